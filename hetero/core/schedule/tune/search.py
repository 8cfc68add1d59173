"""Search over one task's space: seeded random sampling plus mutation of the best so far.

Trials alternate between a uniformly random point and a one-knob mutation of the best
point measured so far (the simplest evolutionary step), so the search both explores
and climbs. Then :meth:`TaskSearch.confirm` measures the default and the fastest few
again, in turn, and the lowest median wins: on a shared machine a single measurement
can be off by 2x. Every point is replayed first: one that does not apply is drawn again and
costs no trial; a point already measured is never measured twice. With a fixed seed
and the same measurements, the same points are proposed in the same order.

A learned cost model (:mod:`~hetero.core.schedule.tune.model`: LightGBM, trained on the
trials as they arrive, the default's included) plugs in as a :class:`CostModel`: given
one, each trial draws :data:`PROPOSALS_PER_TRIAL` valid points and measures the one it
ranks fastest.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from hetero.core.plugin.backend import Backend
from hetero.core.schedule import Trace
from hetero.core.schedule.tune.measure import Measurement, Measurer, matches
from hetero.core.schedule.tune.space import Point, SearchSpace, valid_point
from hetero.core.schedule.tune.task import TuningTask

#: Draws tried for one new valid, unmeasured point before the space counts as exhausted.
MAX_DRAWS = 200
#: Valid points a cost model ranks per measured trial.
PROPOSALS_PER_TRIAL = 16


class CostModel(Protocol):
    """What a learned cost model offers the search."""

    def update(self, task: TuningTask, traces: list[Trace], seconds: list[float | None]) -> None:
        """Learn from measured traces of ``task`` (None: failed)."""

    def rank(self, task: TuningTask, traces: list[Trace]) -> list[float]:
        """A score per trace, lower predicted faster."""


@dataclass(frozen=True)
class Trial:
    """One measured candidate: its point, trace and outcome."""

    point: Point
    trace: Trace
    seconds: float | None
    error: str | None = None


@dataclass
class TaskResult:
    """A task's search trials, the default's first, and the confirmation rounds after
    them (:meth:`TaskSearch.confirm`)."""

    task: TuningTask
    trials: list[Trial] = field(default_factory=list)
    confirmations: list[Trial] = field(default_factory=list)

    @property
    def default_seconds(self) -> float | None:
        """The default schedule's median seconds (None if it failed)."""
        return self.trials[0].seconds if self.trials else None

    @property
    def best(self) -> Trial | None:
        """The fastest successful trial."""
        done = [t for t in self.trials if t.seconds is not None]
        return min(done, key=lambda t: t.seconds) if done else None  # type: ignore[arg-type,return-value]

    def median_seconds(self, point: Point) -> float | None:
        """The median of every successful measurement of ``point``, search and confirmation."""
        times = [t.seconds for t in self.trials + self.confirmations if t.point == point and t.seconds is not None]
        return statistics.median(times) if times else None

    @property
    def chosen(self) -> tuple[Point, float] | None:
        """The point the records will pick, with its median seconds: among the confirmed
        points the lowest median (among all trials when none was confirmed)."""
        pool = {t.point for t in self.confirmations} or {t.point for t in self.trials}
        timed = [(m, p) for p in pool if (m := self.median_seconds(p)) is not None]
        if not timed:
            return None
        seconds, point = min(timed)
        return point, seconds

    def best_so_far(self) -> list[float | None]:
        """After each trial, the best seconds until then."""
        best: float | None = None
        curve = []
        for t in self.trials:
            if t.seconds is not None and (best is None or t.seconds < best):
                best = t.seconds
            curve.append(best)
        return curve


OnTrial = Callable[[TaskResult], None]


class TaskSearch:
    """The search of one task; :meth:`default` first, then :meth:`run` for more trials."""

    def __init__(self, task: TuningTask, backend: Backend, measurer: Measurer, seed: int,
                 model: CostModel | None = None) -> None:
        self.task = task
        self.measurer = measurer
        self.model = model
        self.replay = lambda trace: backend.tuning_replay(task, trace)
        self.space = SearchSpace.from_trace(task.default_trace, self.replay)
        self.rng = random.Random(seed)
        self.result = TaskResult(task)
        self._seen: set[Point] = set()
        self._reference: list | None = None

    def default(self) -> Trial:
        """Measure the default schedule: its outputs are what every candidate must match."""
        point = self.space.default
        self._seen.add(point)
        m = self.measurer.measure(self.task, [self.task.default_trace])[0]
        self._reference = m.outputs
        trial = Trial(point, self.task.default_trace, m.seconds, m.error)
        self.result.trials.append(trial)
        if self.model is not None:
            self.model.update(self.task, [trial.trace], [trial.seconds])
        return trial

    def run(self, trials: int | None, deadline: float | None = None,
            on_trial: OnTrial | None = None) -> TaskResult:
        """Up to ``trials`` more trials (None: no limit but ``deadline``, a
        :func:`time.monotonic` time); fewer when the space runs out or the deadline passes.

        Trials go in rounds of the measurer's ``batch``: a round's points are all proposed
        from the trials measured before it, then measured together (in parallel where the
        executor has the workers), then learned from. So the points depend on the seed,
        the batch and the measurements only, not on which executor measured them."""
        if self._reference is None:
            return self.result  # the default failed: nothing to check candidates against
        if trials is None and deadline is None:
            raise ValueError("TaskSearch.run needs a number of trials or a deadline")
        count = 0
        while trials is None or count < trials:
            if deadline is not None and time.monotonic() >= deadline:
                break
            size = self.measurer.batch if trials is None else min(self.measurer.batch, trials - count)
            points: list[Point] = []
            while len(points) < size and (point := self._propose(len(points))) is not None:
                self._seen.add(point)
                points.append(point)
            if not points:
                break
            count += len(points)
            traces = [self.space.trace(p) for p in points]
            made = [self._judge(p, t, m) for p, t, m in zip(points, traces, self.measurer.measure(self.task, traces))]
            for trial in made:
                self.result.trials.append(trial)
                if on_trial is not None:
                    on_trial(self.result)
            if self.model is not None:
                self.model.update(self.task, traces, [t.seconds for t in made])
        return self.result

    def confirm(self, rounds: int, top: int, on_trial: OnTrial | None = None) -> TaskResult:
        """Measure the default and the ``top`` fastest other points again, ``rounds`` times
        in turn, so that one lucky measurement on a noisy machine does not decide: the
        records pick the lowest median (:func:`~hetero.core.schedule.tune.records.best_traces`)."""
        ranked = sorted((t for t in self.result.trials[1:] if t.seconds is not None), key=lambda t: t.seconds)
        points = [self.space.default]
        for trial in ranked:
            if trial.point not in points and len(points) <= top:
                points.append(trial.point)
        if self._reference is None or len(points) < 2:
            return self.result
        traces = [self.task.default_trace] + [self.space.trace(p) for p in points[1:]]
        for _ in range(rounds):
            for point, trace in zip(points, traces):
                m = self.measurer.measure(self.task, [trace])[0]
                self.result.confirmations.append(self._judge(point, trace, m))
                if on_trial is not None:
                    on_trial(self.result)
        return self.result

    def _judge(self, point: Point, trace: Trace, m: Measurement) -> Trial:
        if m.seconds is None or m.outputs is None:
            return Trial(point, trace, None, m.error)
        wrong = matches(m.outputs, self._reference or [])
        if wrong is not None:
            return Trial(point, trace, None, f"wrong result: {wrong}")
        return Trial(point, trace, m.seconds)

    def _propose(self, pending: int = 0) -> Point | None:
        """The next point to measure: valid and not yet measured (None: none found);
        ``pending`` points of this round are proposed but not measured yet (they take
        their turns in the alternation of random and climbing draws). A climbing turn
        that finds no unmeasured valid neighbour of the best draws at random instead: the
        neighbourhood is spent, not the space."""
        best = self.result.best
        climb = best is not None and (len(self.result.trials) + pending) % 2 == 0
        found = self._draw(best.point if climb and best else None)
        if not found and climb:
            found = self._draw(None)
        if not found:
            return None
        if self.model is None or len(found) == 1:
            return found[0]
        scores = self.model.rank(self.task, [self.space.trace(p) for p in found])
        return found[min(range(len(found)), key=scores.__getitem__)]

    def _draw(self, around: Point | None) -> list[Point]:
        """Valid unmeasured points, one (PROPOSALS_PER_TRIAL for the model to rank):
        mutations of ``around``, or uniform samples when it is None."""
        wanted = 1 if self.model is None else PROPOSALS_PER_TRIAL
        found: list[Point] = []
        for _ in range(MAX_DRAWS):
            point = self.space.mutate(around, self.rng) if around is not None else self.space.sample(self.rng)
            if point in self._seen or point in found:
                continue
            if not valid_point(self.space, point, self.replay):
                self._seen.add(point)  # never drawn again
                continue
            found.append(point)
            if len(found) == wanted:
                break
        return found
