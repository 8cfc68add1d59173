"""Checking the inputs a caller hands to a graph, shared by every executor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph
from hetero.errors import InputError, did_you_mean


def check_inputs(graph: Graph, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Return the graph's inputs in order, or raise InputError naming what is wrong.

    Inputs come as a mapping from name to array; a list or tuple is refused, since an
    order is easily wrong and a name is not. Missing or unknown names, a wrong shape and
    a wrong dtype (byte order included) are errors; a value of the right shape is never
    silently broadcast or cast.
    """
    expected = {v.name: v for v in graph.inputs}
    _require_mapping(graph.name, list(expected), inputs)
    unknown = [n for n in inputs if n not in expected]
    if unknown:
        raise InputError(
            f"graph {graph.name} has no input {unknown[0]!r}{did_you_mean(unknown[0], expected)}; "
            f"its inputs are {list(expected)}"
        )
    missing = [n for n in expected if n not in inputs]
    if missing:
        raise InputError(f"graph {graph.name}: missing input(s) {missing}; pass each as a numpy array")
    arrays = []
    for v in graph.inputs:
        array = np.asarray(inputs[v.name])
        if array.dtype != v.dtype:
            raise InputError(_dtype_message(v.name, graph.name, v.dtype, array.dtype))
        if array.shape != v.shape:
            raise InputError(
                f"input {v.name!r} of graph {graph.name} must have shape {list(v.shape)}, "
                f"got {list(array.shape)}"
            )
        arrays.append(array)
    return arrays


#: An input as a model declares it: name, dims (a dynamic one None), dtype.
Declared = tuple[str, tuple[int | None, ...], str]


def check_declared(name: str, declared: Sequence[Declared], inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs by name, checked as :func:`check_inputs` checks them against
    ``declared`` types whose dynamic dims (None) take any size."""
    names = [n for n, _, _ in declared]
    _require_mapping(name, names, inputs)
    unknown = [n for n in inputs if n not in names]
    if unknown:
        raise InputError(f"graph {name} has no input {unknown[0]!r}"
                         f"{did_you_mean(unknown[0], names)}; its inputs are {names}")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise InputError(f"graph {name}: missing input(s) {missing}; pass each as a numpy array")
    arrays = {}
    for key, dims, dtype in declared:
        array = np.asarray(inputs[key])
        if array.dtype != np.dtype(dtype):
            raise InputError(_dtype_message(key, name, np.dtype(dtype), array.dtype))
        if array.ndim != len(dims) or any(d is not None and d != s for d, s in zip(dims, array.shape)):
            shown = ["?" if d is None else d for d in dims]
            raise InputError(f"input {key!r} of graph {name} must have shape {shown} "
                             f"(? any size), got {list(array.shape)}")
        arrays[key] = array
    return arrays


def _require_mapping(graph: str, names: Sequence[str], inputs: object) -> None:
    if not isinstance(inputs, Mapping):
        raise InputError(f"graph {graph}: inputs must be a dict of name to array, got a "
                         f"{type(inputs).__name__}; pass {{{', '.join(repr(n) + ': ...' for n in names)}}}")


def _dtype_message(key: str, graph: str, want: np.dtype, got: np.dtype) -> str:
    """What is wrong with an input of dtype ``got`` where ``want`` is declared."""
    if got.newbyteorder("=") == want.newbyteorder("=") and got.byteorder != want.byteorder:
        order = {"<": "little-endian", ">": "big-endian"}
        return (f"input {key!r} of graph {graph} must be {want.name} in the machine's byte order "
                f"({order.get(want.str[0], 'native')}), got {order.get(got.str[0], got.str[0])} {got.name}; "
                f"convert it with .astype(np.{want.name})")
    return f"input {key!r} of graph {graph} must be {want.name}, got {got.name}; convert it with .astype(np.{want.name})"
