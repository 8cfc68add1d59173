"""Checking the inputs a caller hands to a graph, shared by every executor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph
from hetero.errors import InputError, did_you_mean


def check_inputs(graph: Graph, inputs: Mapping[str, Any]) -> list[np.ndarray]:
    """Return the graph's inputs in order, or raise InputError naming what is wrong.

    Missing or unknown names, a wrong shape and a wrong dtype are errors; a value of
    the right shape is never silently broadcast or cast.
    """
    expected = {v.name: v for v in graph.inputs}
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
            raise InputError(
                f"input {v.name!r} of graph {graph.name} must be {v.dtype.name}, got "
                f"{array.dtype.name}; convert it with .astype(np.{v.dtype.name})"
            )
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
            raise InputError(f"input {key!r} of graph {name} must be {dtype}, got "
                             f"{array.dtype.name}; convert it with .astype(np.{dtype})")
        if array.ndim != len(dims) or any(d is not None and d != s for d, s in zip(dims, array.shape)):
            shown = ["?" if d is None else d for d in dims]
            raise InputError(f"input {key!r} of graph {name} must have shape {shown} "
                             f"(? any size), got {list(array.shape)}")
        arrays[key] = array
    return arrays
