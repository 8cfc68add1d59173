"""Regions: merge same-backend nodes into pieces whose quotient graph stays acyclic.

A region is a set of nodes on one backend that will be compiled as one subgraph.
Regions must execute one after another, so the *quotient graph* (a vertex per
region, an edge wherever a value flows from one region to another) has to be a
DAG. Contracting every connected same-backend component is not enough: in the
diamond ``A → B, A → C, B → D, C → D`` with A, C, D on one backend and B on
another, one region {A, C, D} would both feed B and read from it.

:func:`merge_regions` starts from one region per node (an accepted composite that
landed whole starts as one region; annotation refuses composites that are not convex) and contracts an edge ``u → v`` between two
regions of one backend only when ``v`` is not otherwise reachable from ``u``, the
condition under which contracting keeps a DAG a DAG. It sweeps the edges in graph
order until nothing merges, then checks the result with networkx.

:func:`return_small_regions` then gives back to the fallback each region that
computes for less than ``min_ratio`` times the time it spends on its transfers in
and out: such an island costs more to reach than it saves. An island holding a node
pinned by an override stays (see :class:`~hetero.core.partition.assign.Pin`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from hetero.core.ir.graph import Graph, Node
from hetero.core.partition.assign import Assignment
from hetero.core.partition.costs import estimate_seconds
from hetero.core.partition.subgraph import extract_subgraph
from hetero.core.partition.transfers import find_transfers
from hetero.core.plugin.target import Target
from hetero.errors import PartitionError

#: A region must compute at least this many times as long as its transfers in and
#: out take, or it returns to the fallback; set 0 to keep every region. Chosen with
#: benchmarks/bench_threshold.py (four int8 light models split across the simulated NPU and
#: the CPU backend, CPU parts timed, NPU parts simulated, transfers modelled): over ratios
#: 0 to 1024 one region ever moves, SqueezeNet's one-node int8 Reshape between two
#: CPU regions, which returns from 4 on; the partition without it ran 2.4 % faster
#: (1.437 against 1.473 ms: one CPU launch fewer, which the estimates do not count),
#: within the noise of an earlier run that found them equal. 4 is the smallest ratio
#: that returns that island, and no model's latency got worse at any larger ratio.
DEFAULT_MIN_RATIO = 4.0


@dataclass(frozen=True, eq=False)
class Region:
    """Nodes on one backend, compiled as one subgraph; ``nodes`` are in graph order.

    Regions are named ``r0``, ``r1``... in execution order.
    """

    name: str
    backend: str
    nodes: tuple[Node, ...]

    @property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)


def merge_regions(graph: Graph, assignment: Assignment) -> list[Region]:
    """Merge the assigned nodes of ``graph`` into regions, in an execution order."""
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    by_name = {n.name: i for i, n in enumerate(graph.nodes)}
    backend = [assignment.backend_of(n.name) for n in graph.nodes]
    quotient = _Quotient(len(graph.nodes))
    for composite in assignment.composites():
        # Annotation refuses composites that are not convex, so each one is safe to contract.
        quotient.group([by_name[name] for name in composite.nodes])
    for i, node in enumerate(graph.nodes):
        for j in _consumers(node, index):
            quotient.connect(i, j)
    quotient.order()
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(graph.nodes):
            for j in _consumers(node, index):
                if backend[i] == backend[j] and quotient.contract(i, j):
                    changed = True
    return _ordered(graph, backend, quotient.region, quotient.succ)


def quotient_graph(regions: Sequence[Region]) -> nx.DiGraph:
    """The regions as vertices, an edge wherever a value flows from one to another."""
    owner = {id(n): r.name for r in regions for n in r.nodes}
    dag = nx.DiGraph()
    dag.add_nodes_from(r.name for r in regions)
    for r in regions:
        for node in r.nodes:
            for v in node.outputs:
                for user in v.users:
                    if owner[id(user)] != r.name:
                        dag.add_edge(r.name, owner[id(user)])
    return dag


def return_small_regions(
    graph: Graph,
    regions: Sequence[Region],
    assignment: Assignment,
    min_ratio: float = DEFAULT_MIN_RATIO,
) -> Assignment:
    """Give back to the fallback every region too small to pay for its transfers.

    A region off the fallback returns when its estimated compute time is below
    ``min_ratio`` times the estimated time of its transfers in and out (and the
    fallback takes each of its nodes). Each returned node records why. A region
    holding a node pinned by an override stays: a cost rule never undoes a pin.
    """
    annotation = assignment.annotation
    backends: Mapping[str, Target] = {b.name: b for b in annotation.backends}
    fallback = assignment.fallback
    if fallback is None:  # nowhere to return them
        return assignment
    moves: dict[str, float] = {}
    for t in find_transfers(graph, regions, backends, assignment.home):
        for end in {t.src_region, t.dst_region} - {None}:
            moves[end] = moves.get(end, 0.0) + t.est_seconds
    changes: dict[str, tuple[str, str]] = {}
    for r in regions:
        if r.backend == fallback:
            continue
        if not all(annotation.support[n.name][fallback].ok for n in r.nodes):
            continue
        if any(n.name in assignment.pins for n in r.nodes):
            continue
        moved = moves.get(r.name, 0.0)
        compute = estimate_seconds(backends[r.backend], extract_subgraph(graph, r.nodes, r.name))
        if compute < min_ratio * moved:
            why = (f"returned to {fallback}: its {r.backend} region of {len(r.nodes)} node(s) computes "
                   f"{compute * 1e6:.3g} µs, less than {min_ratio:g} x its {moved * 1e6:.3g} µs "
                   "of transfers")
            for n in r.nodes:
                changes[n.name] = (fallback, why)
    return assignment.reassign(changes)


def _consumers(node: Node, index: Mapping[int, int]) -> list[int]:
    return [index[id(u)] for v in node.outputs for u in v.users]


class _Quotient:
    """The quotient graph of the regions being merged, kept in a topological order.

    ``region[i]`` is the region of node ``i``; regions are named by one of their
    nodes. ``pos`` is a topological order of the regions (a DAG), kept valid as they
    are contracted (after Pearce and Kelly's dynamic topological order): a path from
    ``u`` to ``v`` can only pass regions placed between them, so the search for one
    stays between the two, and merging moves only the regions it found there. Node
    lists move from the smaller region into the larger. Both keep merging a long
    chain near-linear, where searching everything downstream of ``u`` and relabelling
    every node at each contraction made it quadratic.
    """

    def __init__(self, nodes: int) -> None:
        self.region = list(range(nodes))
        self.members: dict[int, list[int]] = {i: [i] for i in range(nodes)}
        self.succ: dict[int, set[int]] = {i: set() for i in range(nodes)}
        self.pred: dict[int, set[int]] = {i: set() for i in range(nodes)}
        self.pos: dict[int, int] = {}

    def group(self, nodes: Sequence[int]) -> None:
        """Start ``nodes`` (not yet connected) as one region."""
        head = nodes[0]
        for i in nodes[1:]:
            self.region[i] = head
            self.members[head] += self.members.pop(i)
            del self.succ[i], self.pred[i]

    def connect(self, i: int, j: int) -> None:
        """Record that node ``i`` feeds node ``j``."""
        u, v = self.region[i], self.region[j]
        if u != v:
            self.succ[u].add(v)
            self.pred[v].add(u)

    def order(self) -> None:
        """A first topological order of the regions (Kahn's algorithm)."""
        waiting = {r: len(ps) for r, ps in self.pred.items()}
        ready = [r for r in sorted(waiting) if waiting[r] == 0]
        while ready:
            r = ready.pop()
            self.pos[r] = len(self.pos)
            for w in self.succ[r]:
                waiting[w] -= 1
                if waiting[w] == 0:
                    ready.append(w)

    def contract(self, i: int, j: int) -> bool:
        """Merge the regions of nodes ``i`` and ``j`` (``i`` feeds ``j``) unless that
        would close a cycle (another path leads from one to the other); whether merged."""
        u, v = self.region[i], self.region[j]
        if u == v:
            return False
        ahead = self._between(u, v, self.succ, lambda w: self.pos[w] < self.pos[v], skip=v)
        if ahead is None:
            return False
        behind = self._between(v, u, self.pred, lambda w: self.pos[w] > self.pos[u], skip=u)
        assert behind is not None  # a path behind v to u would be one ahead of u to v
        slots = sorted([self.pos[u], self.pos[v]] + [self.pos[w] for w in ahead + behind])
        keep, gone = (u, v) if len(self.members[u]) >= len(self.members[v]) else (v, u)
        self._merge(keep, gone)
        placed = sorted(behind, key=self.pos.__getitem__) + [keep] + sorted(ahead, key=self.pos.__getitem__)
        del self.pos[gone]
        for slot, r in zip(slots, placed):
            self.pos[r] = slot
        return True

    def _between(self, start: int, target: int, edges: Mapping[int, set[int]],
                 inside: Callable[[int], bool], skip: int) -> list[int] | None:
        """The regions reached from ``start`` along ``edges`` but not through the direct
        edge to ``target`` (``skip``), staying where ``inside`` holds; None if ``target``
        is among them."""
        seen: set[int] = set()
        stack = [w for w in edges[start] if w != skip]
        while stack:
            w = stack.pop()
            if w == target:
                return None
            if w in seen or not inside(w):
                continue
            seen.add(w)
            stack += edges[w]
        return list(seen)

    def _merge(self, keep: int, gone: int) -> None:
        """Merge region ``gone`` into ``keep``, rewiring the quotient graph's edges."""
        for i in self.members[gone]:
            self.region[i] = keep
        self.members[keep] += self.members.pop(gone)
        for w in self.succ.pop(gone):
            self.pred[w].discard(gone)
            if w != keep:
                self.pred[w].add(keep)
                self.succ[keep].add(w)
        for w in self.pred.pop(gone):
            self.succ[w].discard(gone)
            if w != keep:
                self.succ[w].add(keep)
                self.pred[keep].add(w)
        self.succ[keep].discard(gone)
        self.pred[keep].discard(gone)


def _ordered(graph: Graph, backend: list[str], region: list[int],
             succ: Mapping[int, set[int]]) -> list[Region]:
    """Regions in a topological order of the quotient graph, earliest first node first."""
    dag = nx.DiGraph()
    dag.add_nodes_from(succ)
    dag.add_edges_from((u, w) for u, ws in succ.items() for w in ws)
    if not nx.is_directed_acyclic_graph(dag):
        cycle = nx.find_cycle(dag)
        names = [graph.nodes[u].name for u, _ in cycle]
        raise PartitionError(f"graph {graph.name}: regions around nodes {names} form a cycle; "
                             "this is a partitioner bug, please report it with the model")
    nodes: dict[int, list[Node]] = {}
    for i, n in enumerate(graph.nodes):
        nodes.setdefault(region[i], []).append(n)
    first = {r: index for index, r in reversed(list(enumerate(region)))}
    order = nx.lexicographical_topological_sort(dag, key=lambda r: first[r])
    return [Region(f"r{k}", backend[r], tuple(nodes[r])) for k, r in enumerate(order)]
