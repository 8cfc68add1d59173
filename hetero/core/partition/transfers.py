"""Transfers: the copies between memory spaces that a partition needs.

A value crosses memory spaces when it is produced in a region on one backend and
read in a region on another. Graph inputs and outputs live in the fallback's (host)
memory (the first target's when there is no fallback), so an accelerator region reading a graph input, or producing a graph
output, needs a transfer too. A value moves once per destination backend: regions of
one backend share its memory, so the transfer belongs to the first region that reads
it (in execution order). Constants never move at run time: they are copied into each
region's subgraph when it is compiled.

The rule is one function, :func:`plan_transfers`, over any sequence of parts named by
backend: :func:`find_transfers` applies it to the regions (adding sizes and costs), and
the executable (:mod:`hetero.core.runtime.executable`) to the compiled parts, so what the
report lists is what runs. A :class:`TransferStep` names backends; the executable
performs it between their parts' devices (:mod:`hetero.core.exec.device`), and a step
between two backends whose parts share a device moves nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetero.core.ir.graph import Graph
from hetero.core.partition.costs import transfer_seconds
from hetero.core.partition.subgraph import boundary
from hetero.core.plugin.target import Target

if TYPE_CHECKING:
    from hetero.core.partition.regions import Region


@dataclass(frozen=True)
class TransferStep:
    """Copy ``value`` from ``src``'s memory into ``dst``'s (both backend names)."""

    value: str
    src: str
    dst: str

    @property
    def label(self) -> str:
        """How the profile names this transfer: ``transfer VALUE SRC->DST``."""
        return f"transfer {self.value} {self.src}->{self.dst}"


@dataclass(frozen=True)
class TransferPlan:
    """The steps of each part, in execution order: ``into[i]`` before part ``i`` runs,
    ``home[i]`` (its graph outputs back to the home backend) right after it."""

    into: tuple[tuple[TransferStep, ...], ...]
    home: tuple[tuple[TransferStep, ...], ...]


def plan_transfers(parts: Sequence[tuple[str, Sequence[str], Sequence[str]]],
                   graph_outputs: Collection[str], home: str) -> TransferPlan:
    """The transfers of ``parts``, ``(backend, input names, output names)`` in execution
    order, for a graph whose outputs are ``graph_outputs``, its inputs and outputs in
    backend ``home``'s memory.

    A value moves once per destination backend; a name no earlier part produces is a
    graph input and comes from ``home``.
    """
    outputs = set(graph_outputs)
    where: dict[str, str] = {}
    moved: set[tuple[str, str]] = set()
    into: list[tuple[TransferStep, ...]] = []
    back: list[tuple[TransferStep, ...]] = []

    def move(name: str, src: str, dst: str) -> list[TransferStep]:
        if src == dst or (name, dst) in moved:
            return []
        moved.add((name, dst))
        return [TransferStep(name, src, dst)]

    for backend, inputs, produced in parts:
        into.append(tuple(s for name in inputs for s in move(name, where.get(name, home), backend)))
        where.update(dict.fromkeys(produced, backend))
        back.append(tuple(s for name in produced if name in outputs for s in move(name, backend, home)))
    return TransferPlan(tuple(into), tuple(back))


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
    graph inputs come from, and outputs go to, the memory space of backend ``home``.

    The rule is that of :func:`plan_transfers`, which the executable applies to the
    compiled parts, so what is planned here is what runs.
    """
    bounds = [boundary(graph, r.nodes) for r in regions]
    plan = plan_transfers([(r.backend, [v.name for v in inputs], [v.name for v in produced])
                           for r, (inputs, produced) in zip(regions, bounds)],
                          [v.name for v in graph.outputs], home)
    made_in = {v.name: r.name for r, (_, produced) in zip(regions, bounds) for v in produced}
    found: list[Transfer] = []
    for r, into, back in zip(regions, plan.into, plan.home):
        for step, dst_region in (*((s, r.name) for s in into), *((s, None) for s in back)):
            nbytes = graph.values[step.value].type.nbytes
            found.append(Transfer(step.value, step.src, step.dst, nbytes,
                                  transfer_seconds(nbytes, backends[step.src], backends[step.dst]),
                                  made_in.get(step.value), dst_region))
    return found
