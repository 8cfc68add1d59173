"""Dead-code elimination.

Invariant established: every node contributes to some graph output, and every
constant is read by a node or is itself a graph output. Graph inputs stay, used or not:
they are the graph's interface.
"""

from __future__ import annotations

from collections.abc import Iterable

from hetero.core.ir.graph import Graph, Node


def eliminate_dead_code(graph: Graph) -> Graph:
    """A copy of ``graph`` without the nodes and constants that no output depends on."""
    result = graph.copy()
    remove_dead_nodes_in_place(result)
    return result


def remove_dead_nodes_in_place(graph: Graph, start: Iterable[Node] | None = None) -> set[int]:
    """Remove dead nodes from ``graph`` itself; return the ids of the removed nodes.

    With ``start`` only those nodes and, transitively, the producers they leave unused
    are examined (what a rewrite needs after replacing one node); without it the
    whole graph is swept and unused constants are dropped too.
    """
    outputs = {id(v) for v in graph.outputs}

    def dead(node: Node) -> bool:
        return all(not v.users and id(v) not in outputs for v in node.outputs)

    removed: set[int] = set()
    pending = list(graph.nodes if start is None else start)  # popped consumers first
    while pending:
        node = pending.pop()
        if id(node) in removed or not dead(node):
            continue
        producers = {id(v.producer): v.producer for v in node.inputs
                     if v is not None and v.producer is not None}
        graph.remove_node(node)
        removed.add(id(node))
        pending.extend(producers.values())
    if start is None:
        graph.remove_unused_constants()
    return removed
