"""The reference executor: runs any graph with the ops' numpy reference semantics.

It is the oracle every backend is compared with, so it favours clarity over speed,
but it frees each intermediate after its last use so that large models fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from hetero.core.exec.inputs import check_inputs
from hetero.core.ir.graph import Graph, Node, Value
from hetero.errors import HeteroError


def run_node(node: Node, args: list[np.ndarray | None]) -> list[np.ndarray]:
    """Run one node's reference semantics; outputs are cast to the inferred dtypes."""
    try:
        results = node.opdef.reference(args, node.attrs)
    except HeteroError as exc:  # e.g. an out-of-range Gather index: say which node
        raise type(exc)(f"node {node.name} ({node.op}): {exc}") from None
    except Exception as exc:  # a bug in a reference function must still name the node
        raise HeteroError(f"node {node.name} ({node.op}): reference failed: {exc}") from exc
    outs = []
    for value, result in zip(node.outputs, results):
        array = np.asarray(result)
        if array.dtype != value.dtype:
            array = array.astype(value.dtype)
        if array.shape != value.shape:
            raise HeteroError(
                f"node {node.name} ({node.op}): reference produced shape {array.shape}, "
                f"the graph says {value.shape}"
            )
        outs.append(array)
    return outs


def run_reference(
    graph: Graph, inputs: Mapping[str, Any], *, keep: bool = False
) -> dict[str, np.ndarray]:
    """Run ``graph`` on ``inputs`` (name → array) and return its outputs by name.

    With ``keep=True`` every intermediate value is returned too, by name.
    """
    env: dict[int, np.ndarray] = {}
    for value, array in zip(graph.inputs, check_inputs(graph, inputs)):
        env[id(value)] = array
    remaining = {id(v): len(v.users) for v in graph.values.values()}
    pinned = {id(v) for v in graph.outputs}
    kept: dict[str, np.ndarray] = {}

    def read(v: Value | None) -> np.ndarray | None:
        if v is None:
            return None
        if v.data is not None:
            return v.data
        return env[id(v)]

    for node in graph.nodes:
        args = [read(v) for v in node.inputs]
        for value, array in zip(node.outputs, run_node(node, args)):
            env[id(value)] = array
            if keep:
                kept[value.name] = array
        for v in node.inputs:
            if v is not None and v.data is None:
                remaining[id(v)] -= 1
                if remaining[id(v)] == 0 and id(v) not in pinned:
                    env.pop(id(v), None)
    result = dict(kept)
    for v in graph.outputs:
        result[v.name] = read(v)
    return result
