"""Transfers: the copies between memory spaces that a partition needs.

A value crosses memory spaces when it is produced in a region on one backend and
read in a region on another. Graph inputs and outputs live in the fallback's (host)
memory (the first target's when there is no fallback), so an accelerator region reading a graph input, or producing a graph
output, needs a transfer too. A value moves once per destination backend: regions of
one backend share its memory, so the transfer belongs to the first region that reads
it (in execution order). Constants never move at run time: they are copied into each
region's subgraph when it is compiled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetero.core.ir.graph import Graph
from hetero.core.partition.costs import transfer_seconds
from hetero.core.partition.subgraph import boundary
from hetero.core.plugin.target import Target

if TYPE_CHECKING:
    from hetero.core.partition.regions import Region


@dataclass(frozen=True)
class Transfer:
    """A copy of ``value`` from ``src_backend``'s memory into ``dst_backend``'s.

    ``src_region`` is None for a graph input, ``dst_region`` None for a graph output
    returned to the host; ``est_seconds`` comes from the declared hierarchies
    (:func:`~hetero.core.partition.costs.transfer_seconds`).
    """

    value: str
    src_backend: str
    dst_backend: str
    nbytes: int
    est_seconds: float
    src_region: str | None
    dst_region: str | None


def find_transfers(
    graph: Graph, regions: Sequence[Region], backends: Mapping[str, Target], home: str
) -> list[Transfer]:
    """Every transfer ``regions`` (in execution order) need, in the order they happen;
    graph inputs come from, and outputs go to, the memory space of backend ``home``."""
    owner = {id(n): r for r in regions for n in r.nodes}
    done: set[tuple[str, str]] = set()
    found: list[Transfer] = []

    def move(value_name: str, nbytes: int, src: str, dst: str,
             src_region: str | None, dst_region: str | None) -> None:
        if src == dst or (value_name, dst) in done:
            return
        done.add((value_name, dst))
        found.append(Transfer(value_name, src, dst, nbytes,
                              transfer_seconds(nbytes, backends[src], backends[dst]),
                              src_region, dst_region))

    outputs = {id(v) for v in graph.outputs}
    for r in regions:
        inputs, produced = boundary(graph, r.nodes)
        for v in inputs:
            src = owner[id(v.producer)] if v.producer is not None else None
            move(v.name, v.type.nbytes, src.backend if src else home, r.backend,
                 src.name if src else None, r.name)
        for v in produced:
            if id(v) in outputs:
                move(v.name, v.type.nbytes, r.backend, home, r.name, None)
    return found
