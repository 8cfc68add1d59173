"""Cutting a set of nodes out of a graph as a standalone graph."""

from __future__ import annotations

from collections.abc import Sequence

from hetero.core.ir.graph import Graph, Node, Value


def boundary(graph: Graph, nodes: Sequence[Node]) -> tuple[list[Value], list[Value]]:
    """The non-constant values ``nodes`` (in graph order) read from outside, and those
    they produce for outside.

    Inputs are in order of first use; outputs in order of production. A value is an
    output when a node outside reads it or when it is a graph output. The cost grows
    with ``nodes`` and their edges, not with ``graph``: a partition asks this of every
    region.
    """
    inside = {id(n) for n in nodes}
    ordered = nodes
    graph_outputs = {id(v) for v in graph.outputs}
    inputs: list[Value] = []
    seen: set[int] = set()
    for node in ordered:
        for v in node.inputs:
            if v is None or v.data is not None or id(v) in seen:
                continue
            if v.producer is None or id(v.producer) not in inside:
                seen.add(id(v))
                inputs.append(v)
    outputs = [
        v for node in ordered for v in node.outputs
        if id(v) in graph_outputs or any(id(u) not in inside for u in v.users)
    ]
    return inputs, outputs


def extract_subgraph(graph: Graph, nodes: Sequence[Node], name: str) -> Graph:
    """A standalone graph of ``nodes`` (in graph order): what they read from outside
    becomes its inputs, the constants they read are copied in, and what outside reads
    becomes its outputs.

    Value and node names are kept, so a subgraph's inputs and outputs name the
    values of ``graph`` they stand for.
    """
    inputs, outputs = boundary(graph, nodes)
    sub = Graph(name)
    values: dict[int, Value] = {}
    for v in inputs:
        values[id(v)] = sub.add_input(v.name, v.shape, v.dtype)
    for node in nodes:
        args: list[Value | None] = []
        for v in node.inputs:
            if v is not None and id(v) not in values:
                # Only constants can be missing here: inputs and earlier outputs are mapped.
                values[id(v)] = sub.add_constant(v.data, v.name)
            args.append(None if v is None else values[id(v)])
        copy = sub.add_node(node.op, args, node.attrs, name=node.name,
                            output_names=[v.name for v in node.outputs])
        copy.group = node.group
        for old, new in zip(node.outputs, copy.outputs):
            values[id(old)] = new
    sub.set_outputs([values[id(v)] for v in outputs])
    return sub
