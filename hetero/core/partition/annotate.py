"""Annotate: ask every selected backend about every node, and about its composites.

The first step of partitioning. Nothing is decided here: the annotation records each
backend's answer (with the reason for a refusal) so that the assignment can choose
and the report can say why.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.pattern import Match, Op, Opt
from hetero.core.plugin.backend import Backend, Pattern, Support
from hetero.core.plugin.support import ask
from hetero.core.plugin.target import Target, as_target
from hetero.errors import PartitionError, PluginError


@dataclass(frozen=True)
class Composite:
    """A match of a backend's :class:`~hetero.core.plugin.Pattern`, accepted or refused.

    ``nodes`` are the names of the nodes the match covers, in graph order; ``root``
    is the composite's last node. ``support`` is the pattern check's verdict.
    """

    backend: str
    pattern: str
    root: str
    nodes: tuple[str, ...]
    support: Support


@dataclass(frozen=True, eq=False)
class Annotation:
    """What each backend said about each node of ``graph``.

    ``backends`` keeps the order of the targets; ``support[node][backend]`` is the
    backend's :class:`~hetero.core.plugin.Support` for the node;
    ``composites`` lists every pattern match, accepted or refused, in the order found.
    """

    graph: Graph
    backends: tuple[Target, ...]
    support: Mapping[str, Mapping[str, Support]]
    composites: tuple[Composite, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The backend names, in the targets' order."""
        return tuple(b.name for b in self.backends)

    def backend(self, name: str) -> Target:
        """The annotated target of the backend called ``name``."""
        for b in self.backends:
            if b.name == name:
                return b
        raise PartitionError(f"backend {name!r} was not annotated; the backends are {list(self.names)}")

    def accepted(self) -> tuple[Composite, ...]:
        """The composites whose backend accepted them."""
        return tuple(c for c in self.composites if c.support.ok)

    @cached_property
    def _inside_composites(self) -> dict[str, set[str]]:
        """For each node in an accepted composite, the backends of those composites."""
        found: dict[str, set[str]] = {}
        for c in self.accepted():
            for n in c.nodes:
                found.setdefault(n, set()).add(c.backend)
        return found

    def takes(self, node: str, backend: str) -> bool:
        """Whether ``backend`` takes ``node``, alone or inside a composite it accepted."""
        return self.support[node][backend].ok or backend in self._inside_composites.get(node, ())

    def reason(self, node: str, backend: str) -> str:
        """Why ``backend`` does not take ``node`` (empty when it does)."""
        return "" if self.takes(node, backend) else self.support[node][backend].reason


def annotate(graph: Graph, backends: Sequence[Target | Backend]) -> Annotation:
    """Ask each of ``backends`` (the targets, in order) about every node of ``graph``.

    A Backend given instead of a Target is bound to its default options.

    A backend whose ``supports`` raises refuses the node, with the error as the reason
    (:func:`~hetero.core.plugin.support.ask`).
    """
    backends = [as_target(b) for b in backends]
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise PartitionError(f"backends {names}: each backend may be selected once")
    support: dict[str, dict[str, Support]] = {}
    composites: list[Composite] = []
    for node in graph.nodes:
        support[node.name] = {b.name: ask(b, node) for b in backends}
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    for backend in backends:
        for pattern in backend.patterns:
            for node in graph.nodes:
                composites += _composites(backend, pattern, node, index)
    return Annotation(graph, tuple(backends), support, tuple(composites))


def _composites(backend: Target, pattern: Pattern, node: Node,
                index: Mapping[int, int]) -> Iterator[Composite]:
    try:
        found = list(pattern.match(node, backend))
    except PluginError:
        raise
    except Exception as exc:  # noqa: BLE001 - a failing check refuses the match
        yield Composite(backend.name, pattern.name, node.name, (node.name,),
                        Support.no(f"pattern {pattern.name} raised {type(exc).__name__}: {exc}"))
        return
    for match, verdict in found:
        covered = {id(n) for n in covered_nodes(pattern.pattern, match)}
        members = _graph_order(node, covered)
        outside = _reentry(members, index)
        if verdict.ok and outside is not None:
            # Compiled whole, the composite would need a value computed outside it
            # from one of its own results: no execution order can run that.
            verdict = Support.no(f"pattern {pattern.name} at {node.name} is not convex: node "
                                 f"{outside.name} reads from it and feeds it")
        yield Composite(backend.name, pattern.name, node.name,
                        tuple(n.name for n in members), verdict)


def covered_nodes(pattern: Op, match: Match) -> list[Node]:
    """Every node a match covers: the root and each node an inner :class:`Op` matched.

    Named or not, inner ops count. The walk re-matches each operand under the
    match's own bindings, so it follows the same way the pattern fitted.
    """
    found: list[Node] = []

    def walk(op: Op, node: Node) -> None:
        found.append(node)
        operands = list(node.inputs) + [None] * max(0, len(op.inputs) - len(node.inputs))
        orders = [op.inputs] + ([op.inputs[::-1]] if op.commute else [])
        for patterns in orders:
            pairs = list(zip(patterns, operands))
            if all(any(True for _ in p.match_value(v, match.bindings)) for p, v in pairs):
                for p, v in pairs:
                    inner = p.pattern if isinstance(p, Opt) else p
                    if isinstance(inner, Op) and v is not None and v.producer is not None:
                        walk(inner, v.producer)
                return

    walk(pattern, match.root)
    return found


def _graph_order(root: Node, covered: set[int]) -> list[Node]:
    """The covered nodes in an order that respects their edges (producers first)."""
    order: list[Node] = []
    seen: set[int] = set()

    def visit(node: Node) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for v in node.inputs:
            if v is not None and v.producer is not None and id(v.producer) in covered:
                visit(v.producer)
        order.append(node)

    visit(root)
    return order


def _reentry(members: list[Node], index: Mapping[int, int]) -> Node | None:
    """An outside node on a path that leaves ``members`` and comes back, if any.

    ``index`` is each node's position in the graph's (topological) order: a node past
    the last member reaches no member, so the search stays between the first and the
    last, instead of walking everything downstream of each composite.
    """
    inside = {id(n) for n in members}
    last = max(index[id(n)] for n in members)
    starts = [u for n in members for v in n.outputs for u in v.users if id(u) not in inside]
    seen: set[int] = set()  # shared: a node that led back from no start leads back from none
    for start in starts:
        stack = [start]
        while stack:
            node = stack.pop()
            if id(node) in inside:
                return start
            if id(node) not in seen and index[id(node)] < last:
                seen.add(id(node))
                stack += [u for v in node.outputs for u in v.users]
    return None
