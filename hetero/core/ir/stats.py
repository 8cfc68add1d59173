"""Static statistics of a graph: op histogram, parameters, FLOPs.

*Parameters* are the elements of the float tensors that do not depend on any graph
input and feed a node that does (weights and biases, whether they are stored as
constants or computed from constants, as the light models' ConstantOfShape weights
are). *FLOPs* add up each op's ``flops`` over the nodes that depend on an input.
Nothing is computed or allocated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetero.core.ir.graph import Graph, Value


@dataclass(frozen=True)
class GraphStats:
    """What ``hetero inspect`` prints about a graph."""

    nodes: int
    op_histogram: dict[str, int]
    parameters: int
    parameter_bytes: int
    flops: int
    flops_by_op: dict[str, int] = field(default_factory=dict)


def constant_values(graph: Graph) -> set[int]:
    """ids of the values that depend on no graph input (constants and their closure)."""
    const = {id(v) for v in graph.values.values() if v.data is not None}
    for node in graph.nodes:
        if all(v is None or id(v) in const for v in node.inputs):
            const.update(id(v) for v in node.outputs)
    return const


def graph_stats(graph: Graph) -> GraphStats:
    """Count ops, parameters and FLOPs of ``graph``."""
    const = constant_values(graph)
    params: dict[int, Value] = {}
    flops_by_op: dict[str, int] = {}
    for node in graph.nodes:
        if all(id(v) in const for v in node.outputs):
            continue
        for v in node.inputs:
            if v is not None and id(v) in const and v.dtype.kind == "f":
                params[id(v)] = v
        count = node.opdef.flops(
            [v.type for v in node.inputs if v is not None], [v.type for v in node.outputs], node.attrs
        )
        flops_by_op[node.op] = flops_by_op.get(node.op, 0) + int(count)
    return GraphStats(
        nodes=len(graph.nodes),
        op_histogram=graph.op_histogram(),
        parameters=sum(v.type.size for v in params.values()),
        parameter_bytes=sum(v.type.nbytes for v in params.values()),
        flops=sum(flops_by_op.values()),
        flops_by_op=dict(sorted(flops_by_op.items(), key=lambda kv: -kv[1])),
    )
