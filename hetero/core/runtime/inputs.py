"""Checking the inputs a caller hands to a graph, shared by every executor."""

from __future__ import annotations

from collections.abc import Mapping
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
