"""Liveness of a graph's intermediate tensors, step by step.

A graph runs its nodes in topological order, one **step** at a time. A step is one
node, or one fused group (nodes sharing ``node.group``, see
:mod:`hetero.core.passes.fuse`) that a backend runs as one kernel. A group runs at
the position of its last member: every operand any member reads from outside the
group is produced before that member, so it is ready by then, and only the last
member's output leaves the group.

An **intermediate** is a value some step writes to memory: a node's output that is
not a graph input or a constant. Values passed between members of one fused group
stay in registers and are no intermediates. An intermediate is live from the step
that produces it to the last step that reads it, both included, since a kernel
reads its operands while it writes its results; a graph output stays live to the
last step, and a result nobody reads still occupies memory while it is written.

A compiled part plans its own steps with :func:`analyze_step_liveness`: each step
says what it reads and writes (:class:`StepUse`), and a **view** step's output is its
input under another shape, sharing its memory: the viewed value then stays live as
long as the view's readers, and the view is no intermediate of its own.

>>> live = analyze_liveness(graph)          # doctest: +SKIP
>>> live.interval("conv1")                  # doctest: +SKIP
LiveInterval(name='conv1', start=0, end=2, nbytes=802816)
>>> live.live_at(live.peak_step)            # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from hetero.core.ir.graph import Graph, Node, Value


@dataclass(frozen=True)
class LiveInterval:
    """An intermediate ``name`` of ``nbytes`` bytes, live from step ``start`` to ``end`` inclusive."""

    name: str
    start: int
    end: int
    nbytes: int

    def overlaps(self, other: LiveInterval) -> bool:
        """Whether the two tensors are live at some common step."""
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True, eq=False)
class Liveness:
    """The steps of a graph (or of a compiled part) and the live interval of each
    intermediate.

    ``step_names[i]`` names step ``i``; for a graph, ``steps[i]`` holds the nodes that
    run then (one, or a fused group in topological order), and it is empty for the
    steps of a part (:func:`analyze_step_liveness`). ``intervals`` lists the
    intermediates in the order they are produced.
    """

    graph_name: str
    step_names: tuple[str, ...]
    intervals: tuple[LiveInterval, ...]
    steps: tuple[tuple[Node, ...], ...] = ()

    @cached_property
    def _by_name(self) -> dict[str, LiveInterval]:
        return {iv.name: iv for iv in self.intervals}

    @cached_property
    def _live(self) -> tuple[tuple[LiveInterval, ...], ...]:
        live: list[list[LiveInterval]] = [[] for _ in self.step_names]
        for iv in self.intervals:
            for step in range(iv.start, iv.end + 1):
                live[step].append(iv)
        return tuple(tuple(step) for step in live)

    def interval(self, name: str) -> LiveInterval:
        """The interval of intermediate ``name``; KeyError if it is none."""
        return self._by_name[name]

    def live_at(self, step: int) -> tuple[LiveInterval, ...]:
        """The intermediates live at ``step``, in the order they were produced."""
        return self._live[step]

    def live_bytes(self, step: int) -> int:
        """The bytes of all intermediates live at ``step``."""
        return sum(iv.nbytes for iv in self._live[step])

    @cached_property
    def peak_step(self) -> int:
        """The first step with the most live bytes (0 for a graph without steps)."""
        if not self.step_names:
            return 0
        return max(range(len(self.step_names)), key=lambda s: (self.live_bytes(s), -s))

    @property
    def peak_bytes(self) -> int:
        """The most bytes live at one step: no arena holding them all can be smaller."""
        return self.live_bytes(self.peak_step) if self.step_names else 0

    def step_name(self, step: int) -> str:
        """A readable name for ``step``: its node, its fused group, or the part's step name."""
        return self.step_names[step]


def _nodes_name(nodes: tuple[Node, ...]) -> str:
    """A step of a graph by its node, or its fused group."""
    if len(nodes) == 1:
        return f"{nodes[0].name} ({nodes[0].op})"
    return f"group {nodes[0].group} ({'+'.join(n.op for n in nodes)})"


def schedule_steps(graph: Graph) -> list[tuple[Node, ...]]:
    """The steps of ``graph``: its nodes in order, each fused group at its last member."""
    members: dict[str, list[Node]] = {}
    for node in graph.nodes:
        if node.group is not None:
            members.setdefault(node.group, []).append(node)
    steps: list[tuple[Node, ...]] = []
    for node in graph.nodes:
        if node.group is None:
            steps.append((node,))
        elif members[node.group][-1] is node:
            steps.append(tuple(members[node.group]))
    return steps


def analyze_liveness(graph: Graph) -> Liveness:
    """The steps of ``graph`` and the live interval of each intermediate it produces."""
    steps = schedule_steps(graph)
    step_of: dict[int, int] = {id(n): i for i, nodes in enumerate(steps) for n in nodes}
    last = len(steps) - 1
    outputs = {id(v) for v in graph.outputs}
    intervals: list[LiveInterval] = []
    for i, nodes in enumerate(steps):
        for node in nodes:
            for value in node.outputs:
                if _stays_in_group(value, node, outputs):
                    continue
                end = last if id(value) in outputs else max(
                    (step_of[id(u)] for u in value.users), default=i)
                intervals.append(LiveInterval(value.name, i, end, value.type.nbytes))
    return Liveness(graph.name, tuple(_nodes_name(nodes) for nodes in steps), tuple(intervals), tuple(steps))


@dataclass(frozen=True)
class StepUse:
    """One step of a compiled part: the values it reads and those it writes, by name.

    A ``view`` step writes one value that is its one read value under another shape,
    in the same memory (a Reshape done as a numpy view), so it allocates nothing.
    """

    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    view: bool = False


def analyze_step_liveness(name: str, steps: Sequence[StepUse], nbytes: Mapping[str, int]) -> Liveness:
    """The live interval of every value ``steps`` write (``nbytes`` gives each one's size),
    except views: a viewed value is live to the last step that reads it or any view of it.

    A value is live from the step that writes it to the last one that reads it, both
    included, so a step's operands and results never share memory (kernels take no
    overlapping arrays); a value nothing reads is live at its own step. What the part
    returns must outlive its steps: plan only the intervals of values it does not
    return (or view).
    """
    root: dict[str, str] = {}  # each view to the value whose memory it is
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    for i, step in enumerate(steps):
        for value in step.reads:
            if value in root:
                end[root[value]] = i
        if step.view:
            (source,), (view,) = step.reads, step.writes
            if source in root:
                root[view] = root[source]
            continue
        for value in step.writes:
            root[value] = value
            start[value] = end[value] = i
    intervals = tuple(LiveInterval(v, start[v], end[v], int(nbytes[v])) for v in start)
    return Liveness(name, tuple(s.name for s in steps), intervals)


def _stays_in_group(value: Value, node: Node, outputs: set[int]) -> bool:
    """Whether ``value`` only passes between members of ``node``'s fused group."""
    return (node.group is not None and id(value) not in outputs and bool(value.users)
            and all(u.group == node.group for u in value.users))
