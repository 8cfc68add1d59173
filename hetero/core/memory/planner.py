"""The static memory planner: one arena per memory space, an offset for each intermediate.

Two intermediates may share bytes when they are never live at the same step (see
:mod:`hetero.core.memory.liveness`), so a graph needs far less than the sum of its
tensors. Finding the smallest arena is NP-hard (it is dynamic storage allocation);
the planner runs the heuristics that TensorFlow Lite and ONNX Runtime rely on and
keeps the smallest arena any of them finds:

* **greedy by size**: largest tensor first, each at the offset of the tightest gap
  between already-placed tensors whose lifetimes overlap its own (best fit);
* **greedy by size, first fit**: the same order, each at the lowest offset that fits;
* **greedy by breadth**: the steps with the most live bytes first, and within a step
  its tensors largest first, each at the tightest gap.

Every offset is a multiple of ``alignment``. The plan also reports two yardsticks:
the **naive** size (every intermediate its own buffer) and the **lower bound** (the
most bytes live at one step, which no arena can undercut).

>>> plan = plan_memory(graph)                    # doctest: +SKIP
>>> plan.arena_bytes, plan.lower_bound_bytes     # doctest: +SKIP
>>> plan.check(MemoryLevel("SRAM", 8 * 2**20, bandwidth_gbps=100))  # doctest: +SKIP
>>> print(plan)                                  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from hetero.core.ir.graph import Graph, Value
from hetero.core.memory.hierarchy import MemoryLevel, format_bytes
from hetero.core.memory.liveness import LiveInterval, Liveness, analyze_liveness
from hetero.errors import MemoryPlanError

#: How many of the largest tensors live at the peak an error or a report names.
_SHOWN_AT_PEAK = 5


@dataclass(frozen=True)
class Allocation:
    """Intermediate ``name`` at bytes ``[offset, offset + nbytes)``, live at steps ``start..end``."""

    name: str
    offset: int
    nbytes: int
    start: int
    end: int

    @property
    def stop(self) -> int:
        """One past its last byte."""
        return self.offset + self.nbytes


@dataclass(frozen=True)
class MemoryPlan:
    """Where each intermediate of one memory space lives in that space's arena.

    ``arena_bytes`` is the planned peak; ``naive_bytes`` the sum of all the space's
    intermediates; ``lower_bound_bytes`` the most of them live at one step
    (``peak_step``, run by ``peak_step_name``); ``peak`` the allocations live there,
    largest first. ``strategy`` names the heuristic whose arena was kept.
    """

    graph_name: str
    space: str
    alignment: int
    strategy: str
    allocations: tuple[Allocation, ...]
    arena_bytes: int
    naive_bytes: int
    lower_bound_bytes: int
    peak_step: int
    peak_step_name: str
    peak: tuple[Allocation, ...]

    def offset(self, name: str) -> int:
        """The arena offset of intermediate ``name``; KeyError if this plan holds none."""
        for a in self.allocations:
            if a.name == name:
                return a.offset
        raise KeyError(name)

    @property
    def ratio(self) -> float:
        """Planned peak over the lower bound: 1.0 is optimal (1.0 for an empty plan)."""
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    def check(self, level: MemoryLevel) -> None:
        """Raise MemoryPlanError unless the arena fits in ``level``'s capacity."""
        if self.arena_bytes <= level.capacity_bytes:
            return
        largest = ", ".join(f"{a.name} ({format_bytes(a.nbytes)})" for a in self.peak[:_SHOWN_AT_PEAK])
        raise MemoryPlanError(
            f"graph {self.graph_name}: memory space {self.space!r} needs "
            f"{format_bytes(self.arena_bytes)} ({self.arena_bytes} bytes) but memory level "
            f"{level.name!r} holds {format_bytes(level.capacity_bytes)} "
            f"({level.capacity_bytes} bytes); at the peak, step {self.peak_step} "
            f"[{self.peak_step_name}], the largest live tensors are {largest or 'none'}; "
            f"place part of the graph on a backend with more memory or shrink its inputs"
        )

    def summary(self) -> str:
        """One line: planned arena, lower bound, naive sum."""
        return (f"{self.space}: arena {format_bytes(self.arena_bytes)}, lower bound "
                f"{format_bytes(self.lower_bound_bytes)} (x{self.ratio:.3f}), naive "
                f"{format_bytes(self.naive_bytes)}")

    def __str__(self) -> str:
        saved = 1 - self.arena_bytes / self.naive_bytes if self.naive_bytes else 0.0
        lines = [
            (f"memory plan of graph {self.graph_name}, space {self.space!r} "
             f"({len(self.allocations)} tensors, {self.alignment}-byte aligned, {self.strategy})"),
            f"  planned arena  {format_bytes(self.arena_bytes):>10}  x{self.ratio:.3f} of the lower bound",
            (f"  lower bound    {format_bytes(self.lower_bound_bytes):>10}  live at step "
             f"{self.peak_step} [{self.peak_step_name}]"),
            f"  naive sum      {format_bytes(self.naive_bytes):>10}  reuse saves {saved:.0%}",
            "  largest tensors at the peak:",
        ]
        lines += [f"    {a.name}  {format_bytes(a.nbytes)} at offset {a.offset}, steps {a.start}..{a.end}"
                  for a in self.peak[:_SHOWN_AT_PEAK]]
        rows = [("offset", "size", "steps", "tensor")] + [
            (str(a.offset), format_bytes(a.nbytes), f"{a.start}..{a.end}", a.name)
            for a in sorted(self.allocations, key=lambda a: (a.offset, a.start))
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        lines += ["  " + "  ".join(c.rjust(w) for c, w in zip(r[:3], widths)) + "  " + r[3]
                  for r in rows]
        return "\n".join(lines)


def plan_memory(
    graph: Graph,
    *,
    alignment: int = 64,
    space: str = "global",
    level: MemoryLevel | None = None,
) -> MemoryPlan:
    """Plan every intermediate of ``graph`` into one arena for memory ``space``.

    With ``level``, raise MemoryPlanError if the arena does not fit its capacity.
    """
    liveness = analyze_liveness(graph)
    plan = plan_arena(liveness, liveness.intervals, space=space, alignment=alignment)
    if level is not None:
        plan.check(level)
    return plan


def plan_memory_spaces(
    graph: Graph,
    space_of: Callable[[Value], str],
    *,
    alignment: int = 64,
    levels: Mapping[str, MemoryLevel] | None = None,
) -> dict[str, MemoryPlan]:
    """One arena per memory space: ``space_of(value)`` says where each intermediate lives.

    ``levels`` maps a space to the memory level its arena must fit in; spaces it
    does not name are not checked.
    """
    liveness = analyze_liveness(graph)
    by_space: dict[str, list[LiveInterval]] = {}
    for iv in liveness.intervals:
        by_space.setdefault(space_of(graph.values[iv.name]), []).append(iv)
    plans = {space: plan_arena(liveness, ivs, space=space, alignment=alignment)
             for space, ivs in by_space.items()}
    for space, level in (levels or {}).items():
        if space in plans:
            plans[space].check(level)
    return plans


def plan_arena(
    liveness: Liveness,
    intervals: Sequence[LiveInterval],
    *,
    space: str = "global",
    alignment: int = 64,
) -> MemoryPlan:
    """Offsets for ``intervals`` (some or all of ``liveness``'s) in one arena: the best heuristic's."""
    if isinstance(alignment, bool) or not isinstance(alignment, int) or alignment <= 0:
        raise MemoryPlanError(
            f"graph {liveness.graph_name}: alignment must be a positive number of bytes, "
            f"got {alignment!r}"
        )
    intervals = tuple(intervals)
    steps = len(liveness.step_names)
    pressure = _pressure(intervals, steps)
    candidates = []
    for strategy, order, best_fit in _strategies(intervals, pressure):
        offsets = _place(order, alignment, best_fit, steps)
        arena = max((offsets[iv.name] + iv.nbytes for iv in intervals), default=0)
        candidates.append((arena, strategy, offsets))
    arena, strategy, offsets = min(candidates, key=lambda c: c[0])
    allocations = tuple(Allocation(iv.name, offsets[iv.name], iv.nbytes, iv.start, iv.end)
                        for iv in intervals)
    peak_step = max(range(len(pressure)), key=lambda s: (pressure[s], -s)) if pressure else 0
    peak = tuple(sorted((a for a in allocations if a.start <= peak_step <= a.end),
                        key=lambda a: (-a.nbytes, a.name)))
    return MemoryPlan(
        graph_name=liveness.graph_name,
        space=space,
        alignment=alignment,
        strategy=strategy,
        allocations=allocations,
        arena_bytes=arena,
        naive_bytes=sum(iv.nbytes for iv in intervals),
        lower_bound_bytes=max(pressure, default=0),
        peak_step=peak_step,
        peak_step_name=liveness.step_name(peak_step) if liveness.step_names else "",
        peak=peak,
    )


def _pressure(intervals: Sequence[LiveInterval], steps: int) -> list[int]:
    """The bytes of ``intervals`` live at each of ``steps`` steps (a difference array, so
    the cost does not grow with the intervals' lengths)."""
    delta = [0] * (steps + 1)
    for iv in intervals:
        delta[iv.start] += iv.nbytes
        delta[iv.end + 1] -= iv.nbytes
    return list(accumulate(delta[:steps]))


def _strategies(
    intervals: tuple[LiveInterval, ...], pressure: Sequence[int]
) -> Iterator[tuple[str, list[LiveInterval], bool]]:
    """(name, placement order, best fit?) for each heuristic; ``pressure[s]``: the bytes live at step s."""
    by_size = sorted(intervals, key=lambda iv: (-iv.nbytes, iv.start, -(iv.end - iv.start)))
    yield "greedy by size", by_size, True
    yield "greedy by size, first fit", by_size, False
    yield "greedy by breadth", _by_breadth(intervals, pressure), True


def _by_breadth(intervals: tuple[LiveInterval, ...], pressure: Sequence[int]) -> list[LiveInterval]:
    """The steps with the most live bytes first (earlier step first among equals), and
    within a step its tensors not yet taken, largest first (in ``intervals`` order among
    equals).

    A tensor is taken at the first step of that order it is live at: the step of its
    lifetime with the most live bytes, the earliest of equals. A sparse table answers
    that range maximum in constant time, so the order costs O(n log n) and not the sum
    of the lifetimes.
    """
    steps = len(pressure)
    if not intervals:
        return []
    # One integer per step ordering it as the breadth order does: more bytes first, then
    # the earlier step; the step is recovered from the key's remainder.
    keys = [p * (steps + 1) + (steps - s) for s, p in enumerate(pressure)]
    table = [keys]
    width = 1
    while 2 * width <= steps:
        last = table[-1]
        table.append(list(map(max, last[:len(last) - width], last[width:])))
        width *= 2

    def best_step(start: int, end: int) -> int:
        level = (end - start + 1).bit_length() - 1
        row = table[level]
        key = max(row[start], row[end - (1 << level) + 1])
        return steps - key % (steps + 1)

    rank = {s: i for i, s in enumerate(sorted(range(steps), key=lambda s: (-pressure[s], s)))}
    keyed = [(rank[best_step(iv.start, iv.end)], -iv.nbytes, i) for i, iv in enumerate(intervals)]
    return [intervals[i] for _, _, i in sorted(keyed)]


class _Timeline:
    """The tensors placed so far, found by the steps they are live at.

    A segment tree over the steps: a tensor is stored at the O(log n) tree nodes that
    exactly cover its lifetime, and :meth:`overlapping` visits only the tree nodes that
    meet the asked lifetime and hold something below them, so a placement costs
    O(log n) plus the tensors it conflicts with, where scanning every placed tensor
    made planning quadratic in the graph's length.
    """

    def __init__(self, steps: int) -> None:
        self.size = 1
        while self.size < max(steps, 1):
            self.size *= 2
        self.depth = self.size.bit_length()
        self.stored: list[list[tuple[int, int, int]]] = [[] for _ in range(2 * self.size)]
        self.used = [False] * (2 * self.size)

    def add(self, start: int, end: int, item: tuple[int, int, int]) -> None:
        """Store ``item`` (offset, stop, serial number) as live at steps ``start..end``."""
        lo, hi = start + self.size, end + self.size + 1
        while lo < hi:
            if lo & 1:
                self._store(lo, item)
                lo += 1
            if hi & 1:
                hi -= 1
                self._store(hi, item)
            lo //= 2
            hi //= 2

    def _store(self, node: int, item: tuple[int, int, int]) -> None:
        self.stored[node].append(item)
        while node and not self.used[node]:
            self.used[node] = True
            node //= 2

    def overlapping(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """Every stored item live at some step of ``start..end``, each once.

        The tree nodes that meet ``start..end`` are the ancestors of its steps' leaves.
        A short lifetime climbs from each of its leaves (cheap steps, O(length + log n));
        a long one descends from the root into the subtrees that hold something
        (O(log n) per item found).
        """
        found: dict[int, tuple[int, int, int]] = {}
        stored, used, size = self.stored, self.used, self.size
        if end - start < self.depth:
            climbed: set[int] = set()
            for node in range(start + size, end + size + 1):
                while node and node not in climbed:
                    climbed.add(node)
                    for item in stored[node]:
                        found[item[2]] = item
                    node //= 2
            return list(found.values())
        todo = [1]
        while todo:
            node = todo.pop()
            for item in stored[node]:
                found[item[2]] = item
            if node >= size:
                continue
            # The children's step ranges: node covers span steps from lo.
            level = node.bit_length() - 1
            half = (size >> level) // 2
            lo = (node - (1 << level)) * 2 * half
            left, right = 2 * node, 2 * node + 1
            if used[left] and start <= lo + half - 1:
                todo.append(left)
            if used[right] and end >= lo + half:
                todo.append(right)
        return list(found.values())


def _place(order: Sequence[LiveInterval], alignment: int, best_fit: bool, steps: int) -> dict[str, int]:
    """Offsets for ``order``, each placed clear of the already-placed tensors it is live with."""
    placed = _Timeline(steps)
    offsets: dict[str, int] = {}
    for serial, iv in enumerate(order):
        conflicts = sorted((o, stop) for o, stop, _ in placed.overlapping(iv.start, iv.end) if stop > o)
        candidate, chosen, chosen_gap = 0, None, 0
        for o, stop in conflicts:
            gap = o - candidate
            if gap >= iv.nbytes and (chosen is None or gap < chosen_gap):
                chosen, chosen_gap = candidate, gap
                if not best_fit:
                    break
            candidate = max(candidate, _align_up(stop, alignment))
        offset = candidate if chosen is None else chosen
        offsets[iv.name] = offset
        placed.add(iv.start, iv.end, (offset, offset + iv.nbytes, serial))
    return offsets


def _align_up(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment
