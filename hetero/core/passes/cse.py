"""Common-subexpression elimination.

Invariant established: no two constants share dtype, shape and bytes, and no two
nodes apply the same op with equal attributes to the same operands, except where
merging would take a graph output's name away (a duplicate that is a graph output
stays). Every canonical op is a pure function of its operands and attributes, so
merging never changes what the graph computes.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.passes.dead_code import remove_dead_nodes_in_place


def _attr_key(value: Any) -> Hashable:
    # Arrays are unhashable and compare element-wise; key them by what they hold.
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    return (type(value).__name__, value)


def _node_key(node: Node) -> Hashable:
    operands = tuple(id(v) if v is not None else None for v in node.inputs)
    attrs = tuple((k, _attr_key(node.attrs[k])) for k in sorted(node.attrs))
    return (node.op, operands, attrs)


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    """A copy of ``graph`` in which equal constants and equal computations are shared."""
    g = graph.copy()
    outputs = {id(v) for v in g.outputs}
    constants: dict[Hashable, Value] = {}
    for value in list(g.values.values()):
        if value.data is None:
            continue
        first = constants.setdefault(_attr_key(value.data), value)
        if first is not value and id(value) not in outputs:
            g.replace_all_uses(value, first)
    seen: dict[Hashable, Node] = {}
    for node in list(g.nodes):
        first = seen.setdefault(_node_key(node), node)
        if first is node or any(id(v) in outputs for v in node.outputs):
            continue
        for old, new in zip(node.outputs, first.outputs):
            g.replace_all_uses(old, new)
    remove_dead_nodes_in_place(g)
    return g
