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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import networkx as nx

from hetero.core.ir.graph import Graph, Node
from hetero.core.partition.assign import Assignment
from hetero.core.partition.costs import estimate_seconds
from hetero.core.partition.subgraph import extract_subgraph
from hetero.core.partition.transfers import find_transfers
from hetero.core.plugin.backend import Backend
from hetero.errors import PartitionError

#: A region must compute at least this many times as long as its transfers in and
#: out take, or it returns to the fallback; set 0 to keep every region. Chosen with
#: benchmarks/bench_threshold.py (four int8 light models split across npu_sim and
#: llvm_cpu, CPU parts timed, NPU parts simulated, transfers modelled): over ratios
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
    backend = [assignment.backend_of(n.name) for n in graph.nodes]
    region = list(range(len(graph.nodes)))
    for composite in assignment.composites():
        # Annotation refuses composites that are not convex, so each one is safe to contract.
        members = [index[id(graph.node(name))] for name in composite.nodes]
        for i in members:
            region[i] = members[0]
    succ: dict[int, set[int]] = {r: set() for r in set(region)}
    pred: dict[int, set[int]] = {r: set() for r in set(region)}
    for i, node in enumerate(graph.nodes):
        for j in _consumers(node, index):
            if region[i] != region[j]:
                succ[region[i]].add(region[j])
                pred[region[j]].add(region[i])
    changed = True
    while changed:
        changed = False
        for i, node in enumerate(graph.nodes):
            for j in _consumers(node, index):
                u, v = region[i], region[j]
                if u != v and backend[i] == backend[j] and not _other_path(succ, u, v):
                    _contract(region, succ, pred, u, v)
                    changed = True
    return _ordered(graph, backend, region, succ)


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
    backends: Mapping[str, Backend] = {b.name: b for b in annotation.backends}
    fallback = assignment.fallback
    transfers = find_transfers(graph, regions, backends, fallback)
    changes: dict[str, tuple[str, str]] = {}
    for r in regions:
        if r.backend == fallback:
            continue
        if not all(annotation.support[n.name][fallback].ok for n in r.nodes):
            continue
        if any(n.name in assignment.pins for n in r.nodes):
            continue
        moved = sum(t.est_seconds for t in transfers if r.name in (t.src_region, t.dst_region))
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


def _other_path(succ: Mapping[int, set[int]], u: int, v: int) -> bool:
    """Whether ``v`` is reachable from ``u`` other than by the edge ``u → v``."""
    stack = [w for w in succ[u] if w != v]
    seen: set[int] = set()
    while stack:
        w = stack.pop()
        if w == v:
            return True
        if w not in seen:
            seen.add(w)
            stack += succ[w]
    return False


def _contract(region: list[int], succ: dict[int, set[int]], pred: dict[int, set[int]],
              u: int, v: int) -> None:
    """Merge region ``v`` into ``u``, rewiring the quotient graph's edges."""
    for i, r in enumerate(region):
        if r == v:
            region[i] = u
    for w in succ.pop(v):
        pred[w].discard(v)
        if w != u:
            pred[w].add(u)
            succ[u].add(w)
    for w in pred.pop(v):
        succ[w].discard(v)
        if w != u:
            succ[w].add(u)
            pred[u].add(w)
    succ[u].discard(v)


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
    first = {r: region.index(r) for r in succ}
    order = nx.lexicographical_topological_sort(dag, key=lambda r: first[r])
    return [
        Region(f"r{k}", backend[r], tuple(n for i, n in enumerate(graph.nodes) if region[i] == r))
        for k, r in enumerate(order)
    ]
