"""The :class:`Partition` of a graph, and :func:`partition_graph`, which makes one.

The steps, each its own module: :func:`~hetero.core.partition.annotate.annotate`
asks the backends, :func:`~hetero.core.partition.assign.assign` chooses,
:func:`~hetero.core.partition.regions.merge_regions` groups, and
:func:`~hetero.core.partition.regions.return_small_regions` gives islands back to
the fallback (regions are merged again after that, until nothing returns);
:func:`~hetero.core.partition.transfers.find_transfers` lists the copies, and
:func:`~hetero.core.partition.fit.plan_partition_memory` plans each backend's arena of
intermediates, handing work back to the fallback where an arena overflows its memory.
"""

from __future__ import annotations

import math

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

import networkx as nx

from hetero.core.ir.graph import Graph, Value
from hetero.core.memory.planner import MemoryPlan
from hetero.core.partition.annotate import annotate
from hetero.core.partition.assign import Assignment, assign
from hetero.core.partition.costs import estimate
from hetero.core.partition.fit import fit_memory, plan_partition_memory
from hetero.core.partition.regions import (
    DEFAULT_MIN_RATIO,
    Region,
    merge_regions,
    quotient_graph,
    return_small_regions,
)
from hetero.core.partition.subgraph import boundary, extract_subgraph
from hetero.core.partition.transfers import Transfer, find_transfers
from hetero.core.plugin.backend import Backend
from hetero.core.plugin.target import Target, as_target
from hetero.errors import PartitionError


class CompileUnit(NamedTuple):
    """One compile a partition asks for: ``backend`` compiles ``graph``, named ``region``."""

    region: str
    backend: str
    graph: Graph


@dataclass(frozen=True, eq=False)
class Partition:
    """A graph split into regions, each owned by one backend, and the transfers between.

    ``regions`` are in a valid execution order (a topological order of the quotient
    graph); ``estimates`` maps region names to their backend's estimated seconds,
    infinite where the backend could not estimate, and ``estimate_problems`` maps
    those regions to why (the error its ``estimate`` raised); ``memory`` maps each
    memory space (a backend's name) to the plan of the intermediates its regions
    produce (see :func:`plan_partition_memory`).
    """

    graph: Graph
    assignment: Assignment
    regions: tuple[Region, ...]
    transfers: tuple[Transfer, ...]
    estimates: Mapping[str, float] = field(default_factory=dict)
    memory: Mapping[str, MemoryPlan] = field(default_factory=dict)
    estimate_problems: Mapping[str, str] = field(default_factory=dict)

    def region(self, name: str) -> Region:
        """The region called ``name`` (``r0``, ``r1``...)."""
        for r in self.regions:
            if r.name == name:
                return r
        raise PartitionError(f"partition of {self.graph.name} has no region {name!r}; "
                             f"it has {[r.name for r in self.regions]}")

    def inputs(self, region: Region) -> list[Value]:
        """The non-constant values ``region`` reads from outside itself."""
        return boundary(self.graph, region.nodes)[0]

    def outputs(self, region: Region) -> list[Value]:
        """The values ``region`` produces for other regions or as graph outputs."""
        return boundary(self.graph, region.nodes)[1]

    def transfers_in(self, region: Region) -> list[Transfer]:
        """The transfers into ``region``'s memory that it is the first to need."""
        return list(self._by_region[1].get(region.name, ()))

    def transfers_out(self, region: Region) -> list[Transfer]:
        """The transfers of values ``region`` produced, to other memories."""
        return list(self._by_region[0].get(region.name, ()))

    @cached_property
    def _by_region(self) -> tuple[dict[str | None, list[Transfer]], dict[str | None, list[Transfer]]]:
        """The transfers by source region and by destination region, in order."""
        out: dict[str | None, list[Transfer]] = {}
        into: dict[str | None, list[Transfer]] = {}
        for t in self.transfers:
            out.setdefault(t.src_region, []).append(t)
            into.setdefault(t.dst_region, []).append(t)
        return out, into

    def subgraph(self, region: Region) -> Graph:
        """A standalone graph of ``region``: what ``Backend.compile`` receives.

        Its inputs and outputs carry the names of the values of :attr:`graph` they
        stand for, and the constants it reads are copied in.
        """
        return extract_subgraph(self.graph, region.nodes, f"{self.graph.name}.{region.name}")

    def units(self) -> list[CompileUnit]:
        """What compiling this partition compiles, in execution order: each region's
        :meth:`subgraph` on its backend.

        When every region is on one backend (disconnected pieces of a graph make
        several), :attr:`graph` itself is compiled whole, its interface in its own
        order, as one unit named after all its regions (``r0+r1``). The compile driver
        compiles these units, and the tuner extracts its tasks from them, so it tunes
        the kernels a compile builds.
        """
        regions = self.regions
        if len({r.backend for r in regions}) == 1:
            return [CompileUnit("+".join(r.name for r in regions), regions[0].backend, self.graph)]
        return [CompileUnit(r.name, r.backend, self.subgraph(r)) for r in regions]

    def quotient(self) -> nx.DiGraph:
        """The regions as vertices, an edge wherever a value flows between two."""
        return quotient_graph(self.regions)

    def compiled_on(self, moved: Mapping[str, tuple[str, str]], backends: Sequence[Target]) -> Partition:
        """This partition as it was compiled when some regions did not compile where it
        placed them: each region ``moved`` names (region -> (backend, reason)) on that
        backend, its nodes' choices carrying the reason, and the estimates, transfers and
        memory plans made again (memory unchecked: it is a record, not a plan). Regions
        keep their names, nodes and order: they are what was compiled. ``backends`` are
        the targets, the new backends among them."""
        by_name = {t.name: t for t in backends}
        assignment = self.assignment.reassign(
            {n.name: moved[r.name] for r in self.regions if r.name in moved for n in r.nodes})
        regions = tuple(Region(r.name, moved[r.name][0], r.nodes) if r.name in moved else r
                        for r in self.regions)
        estimates = dict(self.estimates)
        problems = {k: v for k, v in self.estimate_problems.items() if k not in moved}
        for r in regions:
            if r.name in moved:
                made = estimate(by_name[r.backend], extract_subgraph(self.graph, r.nodes, r.name))
                estimates[r.name] = made.seconds
                if made.problem:
                    problems[r.name] = made.problem
        transfers = find_transfers(self.graph, regions, by_name, assignment.home)
        memory = plan_partition_memory(self.graph, regions, by_name, check=False)
        return Partition(self.graph, assignment, regions, tuple(transfers), estimates, memory, problems)

    def report(self) -> str:
        """The text report: coverage, regions, transfers, memory, and moved nodes with reasons."""
        from hetero.core.partition.report import format_report

        return format_report(self)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (what :meth:`to_json` prints)."""
        from hetero.core.partition.report import describe

        return describe(self)

    def to_json(self) -> str:
        """The report as JSON for tools; keys and lists come in a stable order. An
        estimate a backend could not make (infinite) is written as null: JSON has no
        infinity."""
        import json

        return json.dumps(_finite(self.to_dict()), indent=2, allow_nan=False)


def _finite(data: Any) -> Any:
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_finite(v) for v in data]
    return data


#: ``partition_graph``'s default fallback: chosen among the backends by declaration.
BY_DECLARATION = "<by declaration>"


def choose_fallback(backends: Sequence[Target | Backend]) -> str | None:
    """The fallback among ``backends``: the first that declares it takes every canonical
    op (ARCHITECTURE.md rule 1: by declaration, never by name); None when none does."""
    return next((b.name for b in backends if b.takes_every_op), None)


def partition_graph(
    graph: Graph,
    backends: Sequence[Target | Backend],
    *,
    policy: str = "priority",
    overrides: Mapping[str, str] | None = None,
    fallback: str | None = BY_DECLARATION,
    min_ratio: float = DEFAULT_MIN_RATIO,
) -> Partition:
    """Split ``graph`` across ``backends`` (the targets in order, the fallback among them).

    A Backend given instead of a Target is bound to its default options. ``fallback``
    names the backend that takes what the others refuse; by default the one
    :func:`choose_fallback` picks, None for none. ``policy``, ``overrides`` and
    ``fallback`` are as in :func:`~hetero.core.partition.assign.assign`; ``min_ratio`` as in
    :func:`~hetero.core.partition.regions.return_small_regions`. An override pins its
    nodes: no later step (small islands, memory fit) moves them, and a pin that
    cannot hold is a PartitionError naming the override. ``graph`` is not
    modified. A backend whose intermediates do not fit its memory hands work back to
    the fallback (:func:`~hetero.core.partition.fit.fit_memory`); MemoryPlanError
    when that cannot make them fit.
    """
    targets = [as_target(b) for b in backends]
    if fallback == BY_DECLARATION:
        fallback = choose_fallback(targets)
    by_name = {b.name: b for b in targets}
    assignment = assign(annotate(graph, targets), policy, overrides, fallback)

    def regroup(assignment: Assignment) -> tuple[Assignment, list[Region]]:
        regions = merge_regions(graph, assignment)
        # Each round returns at least one region, so this ends within len(regions) rounds.
        while True:
            smaller = return_small_regions(graph, regions, assignment, min_ratio)
            if all(smaller.backend_of(n) == assignment.backend_of(n) for n in assignment.choices):
                return assignment, regions
            assignment = smaller
            regions = merge_regions(graph, assignment)

    assignment, regions = regroup(assignment)
    assignment, regions, memory = fit_memory(graph, assignment, regions, by_name, regroup)
    made = {r.name: estimate(by_name[r.backend], extract_subgraph(graph, r.nodes, r.name)) for r in regions}
    estimates = {name: e.seconds for name, e in made.items()}
    problems = {name: e.problem for name, e in made.items() if e.problem}
    transfers = find_transfers(graph, regions, by_name, assignment.home)
    return Partition(graph, assignment, tuple(regions), tuple(transfers), estimates, memory, problems)
