"""Re-partition until every backend's intermediates fit its memory.

Each backend's regions keep their intermediates in one arena in that backend's
outermost memory level (:func:`plan_partition_memory`). An accelerator with a small
memory can be handed more than it holds. Rather than fail, :func:`fit_memory`
returns work to the fallback, whose memory is the host's: at the step where the
overfull space is most loaded, the largest tensor live there stops being produced
on that backend (its producer, with the rest of any composite it belongs to, moves
to the fallback), and the partition is planned again. Each round moves at least
one node, so the loop ends; when nothing can move (the space is the fallback's
own, or the fallback does not take the producers) the plan's error stands, naming
the space and its tensors. A node pinned by an override never moves: when pins are
what keeps the space overfull, the error is a PartitionError naming the overrides.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hetero.core.ir.graph import Graph
from hetero.core.memory.hierarchy import format_bytes
from hetero.core.memory.planner import MemoryPlan, plan_memory_spaces
from hetero.core.partition.assign import Assignment, Pin
from hetero.core.partition.regions import Region
from hetero.core.plugin.target import Target
from hetero.errors import MemoryPlanError, PartitionError


def plan_partition_memory(
    graph: Graph, regions: Sequence[Region], backends: Mapping[str, Target], *, alignment: int = 64,
    check: bool = True,
) -> dict[str, MemoryPlan]:
    """One arena per backend: each intermediate lives in the memory of the region producing it.

    A space is named after its backend and, with ``check``, must fit that backend's
    outermost memory level, else MemoryPlanError names the space and its largest
    live tensors. Liveness follows the regions' execution order, which may differ
    from the order of ``graph.nodes`` (a diamond runs ``A, C`` before ``B``). Spaces
    come sorted by name; ``graph`` is not modified.
    """
    owner = {n.name: r.backend for r in regions for n in r.nodes}
    position = {n.name: i for i, n in enumerate(n for r in regions for n in r.nodes)}
    ordered = graph.copy()
    ordered.nodes.sort(key=lambda n: position[n.name])
    levels = {name: backends[name].memory.outermost for name in sorted(set(owner.values()))}
    plans = plan_memory_spaces(ordered, lambda v: owner[v.producer.name], alignment=alignment,
                               levels=levels if check else None)
    return dict(sorted(plans.items()))


def fit_memory(
    graph: Graph,
    assignment: Assignment,
    regions: list[Region],
    backends: Mapping[str, Target],
    regroup: Callable[[Assignment], tuple[Assignment, list[Region]]],
) -> tuple[Assignment, list[Region], dict[str, MemoryPlan]]:
    """Move work to the fallback until every space fits; return the result and its plans.

    ``regroup`` turns an assignment into regions (merging, and returning islands too
    small to pay for their transfers). Raises MemoryPlanError when a space cannot be
    made to fit, PartitionError when it could but for nodes pinned by overrides.
    """
    while True:
        plans = plan_partition_memory(graph, regions, backends, check=False)
        changes, held = _relief(assignment, plans, backends)
        if not changes:
            # Either everything fits, or nothing can move: the check names what overflows.
            try:
                for space, plan in plans.items():
                    plan.check(backends[space].memory.outermost)
            except MemoryPlanError as exc:
                if not held:
                    raise
                pins = ", ".join(sorted({str(p) for p in held}))
                raise PartitionError(
                    f"{pins}: the pinned node(s) {', '.join(sorted({p.node for p in held}))} keep "
                    f"their tensors where memory overflows, and nothing else can move to "
                    f"{assignment.fallback}: {exc}; drop or narrow the override(s)") from exc
            return assignment, regions, plans
        assignment, regions = regroup(assignment.reassign(changes))


def _relief(assignment: Assignment, plans: Mapping[str, MemoryPlan],
            backends: Mapping[str, Target]) -> tuple[dict[str, tuple[str, str]], list[Pin]]:
    """For the first overfull space that can shed work, move its largest peak tensor's producer.

    With no such move, also the pins that held back a producer that could have moved.
    """
    annotation = assignment.annotation
    fallback = assignment.fallback
    if fallback is None:  # no space to shed work to
        return {}, []
    composite_of = {n: c.nodes for c in assignment.composites() for n in c.nodes}
    held: list[Pin] = []
    for space, plan in plans.items():
        level = backends[space].memory.outermost
        if space == fallback or plan.arena_bytes <= level.capacity_bytes:
            continue
        for tensor in plan.peak:
            producer = annotation.graph.values[tensor.name].producer.name
            movers = composite_of.get(producer, (producer,))
            if not all(annotation.support[n][fallback].ok for n in movers):
                continue
            pinned = [assignment.pins[n] for n in movers if n in assignment.pins]
            if pinned:
                held += pinned
                continue
            why = (f"returned to {fallback}: {space}'s memory {level.name!r} "
                   f"({format_bytes(level.capacity_bytes)}) cannot hold the "
                   f"{format_bytes(plan.arena_bytes)} its intermediates need; {tensor.name} "
                   f"({format_bytes(tensor.nbytes)}) was live at the peak")
            return {n: (fallback, why) for n in movers}, []
    return {}, held
