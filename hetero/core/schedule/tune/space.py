"""The search space of a task: every decision of its default trace is a knob.

A split's factors after the first (the first is left to be inferred, so any inner
factor covers the loop) and a pack's factor are knobs. An instruction whose ``choices``
attribute lists a decision's legal values (decision name -> ints: a backend that knows
its machine's legal tiles, such as a simulated NPU's tilings) gets those values for that knob instead
of the generic powers of two and divisors. Decisions that must change
together share one knob: a register tile's lane split and the pack of the operand the
lanes index must agree (``pack`` requires reads indexed ``factor * outer + v`` with
``v`` a loop of extent ``factor``). The coupling is found, not declared: a pack whose
factor equals a split factor of its block is tied to that split when changing the
split alone fails to replay and changing both succeeds (MetaSchedule's shared
sampling variable, derived from the trace instead of written into every schedule).

>>> space = SearchSpace.from_trace(task.default_trace, replay)   # doctest: +SKIP
>>> point = space.sample(random.Random(0))                       # doctest: +SKIP
>>> trace = space.trace(point)                                   # doctest: +SKIP
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from hetero.core.schedule import Trace
from hetero.errors import ScheduleError

#: Largest value a knob takes: the CPU codegen's widest vectorized loop (64 lanes) and
#: more rows than any register file holds; past it a tile only lengthens unrolled code.
MAX_FACTOR = 64

#: (instruction index, decision name, position in a list decision or None)
DecisionRef = tuple[int, str, int | None]
#: A point of the space: one value per knob, in knob order.
Point = tuple[int, ...]


@dataclass(frozen=True)
class Knob:
    """One sampling variable: the decisions it sets (all to the same value), the values
    it may take, and its value in the default trace."""

    name: str
    targets: tuple[DecisionRef, ...]
    values: tuple[int, ...]
    default: int


def _choices(bound: int, current: int) -> tuple[int, ...]:
    """Powers of two and divisors of ``bound`` up to :data:`MAX_FACTOR`, and ``current``."""
    top = min(bound, MAX_FACTOR)
    found = {current} | {2 ** k for k in range(int(math.log2(top)) + 1)} if top >= 1 else {current}
    found |= {d for d in range(1, top + 1) if bound % d == 0}
    return tuple(sorted(found))


def _knobs(trace: Trace) -> list[Knob]:
    knobs = []
    for k, ins in enumerate(trace.instructions):
        if ins.kind == "split" and "factors" in ins.decisions:
            factors = list(ins.decisions["factors"])
            bound = math.prod(f for f in factors if f is not None)
            for p in range(1, len(factors)):
                knobs.append(Knob(f"{ins.inputs[0]}: factor {p}", ((k, "factors", p),),
                                  _choices(bound, factors[p]), factors[p]))
        else:
            allowed = ins.attrs.get("choices") or {}
            for name, value in ins.decisions.items():
                if not isinstance(value, int) or isinstance(value, bool):
                    continue
                if name in allowed:
                    values = tuple(sorted({value, *(int(v) for v in allowed[name])}))
                elif value >= 1:
                    values = _choices(max(value, MAX_FACTOR), value)
                else:
                    continue
                knobs.append(Knob(f"{ins.kind} {ins.inputs[0]}: {name}", ((k, name, None),), values, value))
    return knobs


def _block(trace: Trace, target: DecisionRef) -> str:
    ref = trace.instructions[target[0]].inputs[0]
    return getattr(ref, "block", getattr(ref, "name", ""))


class SearchSpace:
    """The knobs of one default trace; :meth:`trace` turns a point back into a trace."""

    def __init__(self, base: Trace, knobs: list[Knob]) -> None:
        self.base = base
        self.knobs = tuple(knobs)

    @classmethod
    def from_trace(cls, trace: Trace, replay: Callable[[Trace], object]) -> SearchSpace:
        """The space of ``trace``, couplings found by replaying (``replay`` raises
        ScheduleError for a trace that does not apply)."""
        knobs = _knobs(trace)
        space = cls(trace, knobs)
        for pack in [k for k in knobs if trace.instructions[k.targets[0][0]].kind == "pack"]:
            for split in [k for k in space.knobs if k is not pack and k.default == pack.default
                          and trace.instructions[k.targets[0][0]].kind == "split"
                          and _block(trace, k.targets[0]) == _block(trace, pack.targets[0])]:
                if space._coupled(split, pack, replay):
                    merged = Knob(split.name, split.targets + pack.targets, split.values, split.default)
                    space = cls(trace, [merged if k is split else k for k in space.knobs if k is not pack])
                    break
        return space

    def _coupled(self, split: Knob, pack: Knob, replay: Callable[[Trace], object]) -> bool:
        """Whether ``split`` alone cannot change but ``split`` and ``pack`` together can."""
        for value in (v for v in split.values if v != split.default):
            alone = self._set(self.base, split.targets, value)
            both = self._set(alone, pack.targets, value)
            if replays(alone, replay):
                return False
            if replays(both, replay):
                return True
        return False

    @property
    def default(self) -> Point:
        """The default trace's point."""
        return tuple(k.default for k in self.knobs)

    def size(self) -> int:
        """How many points the space has (replayable or not)."""
        return math.prod(len(k.values) for k in self.knobs)

    def sample(self, rng: random.Random) -> Point:
        """A uniformly random point."""
        return tuple(rng.choice(k.values) for k in self.knobs)

    def mutate(self, point: Point, rng: random.Random) -> Point:
        """``point`` with one knob, chosen at random, set to another of its values."""
        movable = [i for i, k in enumerate(self.knobs) if len(k.values) > 1]
        if not movable:
            return point
        i = rng.choice(movable)
        value = rng.choice([v for v in self.knobs[i].values if v != point[i]])
        return point[:i] + (value,) + point[i + 1:]

    def trace(self, point: Point) -> Trace:
        """The base trace with every knob set as ``point`` says."""
        trace = self.base
        for knob, value in zip(self.knobs, point):
            if value != knob.default:
                trace = self._set(trace, knob.targets, value)
        return trace

    @staticmethod
    def _set(trace: Trace, targets: tuple[DecisionRef, ...], value: int) -> Trace:
        changes: dict[int, dict[str, object]] = {}
        for k, name, position in targets:
            old = changes.get(k, {}).get(name, trace.instructions[k].decisions[name])
            if position is None:
                new: object = value
            else:
                # The first factor is inferred, so any inner factor covers the loop.
                new = [None if p == 0 else value if p == position else f for p, f in enumerate(old)]
            changes.setdefault(k, {})[name] = new
        return trace.with_decisions(changes)


#: What a replay raises for a trace that does not apply: a refusal (ScheduleError), or a
#: primitive that trips over an odd factor instead of refusing it, the same rejection,
#: since building the candidate would fail alike.
REJECTIONS = (ScheduleError, ValueError, IndexError, KeyError, TypeError)


def replays(trace: Trace, replay: Callable[[Trace], object]) -> bool:
    """Whether ``replay(trace)`` applies (raises none of :data:`REJECTIONS`)."""
    try:
        replay(trace)
    except REJECTIONS:
        return False
    return True


def valid_point(space: SearchSpace, point: Point, replay: Callable[[Trace], object]) -> bool:
    """Whether ``point``'s trace replays (rejected before measuring when it does not)."""
    return replays(space.trace(point), replay)
