"""The tuner's learned cost model: gradient-boosted trees (LightGBM) on measured trials.

:class:`GradientBoostedModel` is a :class:`~hetero.core.schedule.tune.search.CostModel`:
the search hands it every measurement as it arrives (:meth:`~GradientBoostedModel.update`)
and asks it to rank a batch of valid candidates (:meth:`~GradientBoostedModel.rank`);
the search measures the one it ranks fastest. The trees are small and few
(:data:`ROUNDS` rounds of at most :data:`LEAVES` leaves, one thread). A fit took 37 ms
on 100 trials and 100 ms on 3,000 (the project's loaded 2-core host), of the order of
one measurement (0.1-0.5 s with its compile), so the model is refitted after every
:data:`RETRAIN_EVERY` new trials: on the synthetic bowl of the tests, refitting after
every trial, every 2, 4 or 8 found the optimum in the same number of trials within
noise (means 18-26 over four seeds).

What it learns. The target is log(seconds per flop): within a task that is log(seconds)
less a constant, so it ranks the same; across tasks it takes out the kernel's size,
which is what lets trials of one kernel say something about another. A failed trial
(a crash, a timeout, a wrong result) counts as :data:`FAILURE_PENALTY` times slower than
the slowest success of its task, rather than being dropped: failures cluster (an unroll
too large to compile in time, a tile that overflows), and a model that never sees them
keeps proposing their neighbours. A task with no success yet has its failures left out:
there is nothing to be slower than.

Features (:mod:`~hetero.core.schedule.tune.features`): a task's own trials carry its
knob values and the backend's task features; another task's trials, of the same
backend, carry the task features only (the knob columns missing, which LightGBM
routes natively). Before :data:`MIN_ROWS` trials are usable, :meth:`rank` gives every
candidate 0, so the search keeps its random order.

Transfer (:meth:`GradientBoostedModel.pretrain`): records of earlier runs
(:func:`~hetero.core.schedule.tune.records.load_records`) of the tasks given are
replayed and featurized like this run's trials, so a task measured before starts
ranked, and a new task starts ranked by what its backend's other kernels showed. A
record's function is only known through a task, so records of tasks not given are
skipped; so are records whose trace no longer replays, and, unless asked, records
from another machine (:func:`~hetero.core.schedule.tune.records.same_machine`).

With the same seed and the same measurements the model ranks alike: LightGBM runs
deterministic, fits and predicts on one thread (several threads on a small shared host
made fits 4-26x slower, and a prediction on every core kept the measuring worker off
the CPU).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hetero.core.plugin.backend import Backend
from hetero.core.schedule import Trace
from hetero.core.schedule.tune.features import Featurizer
from hetero.core.schedule.tune.records import Record, same_machine
from hetero.core.schedule.tune.search import CostModel
from hetero.core.schedule.tune.task import TuningTask
from hetero.errors import OptionError, PluginError, ScheduleError

#: The cost models ``make_cost_model`` knows.
COST_MODELS = ("none", "lightgbm")
#: Usable trials (this task's and, through task features, others') before the model ranks.
MIN_ROWS = 8
#: New trials between refits.
RETRAIN_EVERY = 4
#: Boosting rounds and leaves per tree: enough for the few knobs of a task's space and a
#: few dozen task features, small enough to fit in milliseconds.
ROUNDS = 60
LEAVES = 15
#: How many times slower than its task's slowest success a failed trial counts.
FAILURE_PENALTY = 4.0

#: LightGBM's settings besides the seed. Leaves may hold 2 rows and bins 1: the first
#: fits see 8 trials, where the defaults (20 a leaf) would grow no tree at all.
PARAMS: dict[str, Any] = {
    "objective": "regression",
    "learning_rate": 0.15,
    "num_leaves": LEAVES,
    "min_data_in_leaf": 2,
    "min_data_in_bin": 1,
    "min_sum_hessian_in_leaf": 1e-3,
    "lambda_l2": 1.0,
    "feature_pre_filter": False,
    "num_threads": 1,
    "deterministic": True,
    "force_col_wise": True,
    "verbose": -1,
}


def _lightgbm() -> Any:
    """The lightgbm module, or the error that says how to install it."""
    try:
        import lightgbm
    except ImportError:
        raise OptionError("cost model 'lightgbm' needs the LightGBM package, which is not installed: "
                          "pip install 'hetero[tune]', or tune with the cost model 'none'") from None
    return lightgbm


@dataclass
class _TaskRows:
    """One task's trials as the model holds them: (knob features, task features, seconds)."""

    featurizer: Featurizer
    rows: list[tuple[list[float], list[float] | None, float | None]] = field(default_factory=list)

    @property
    def backend(self) -> str:
        return self.featurizer.backend.name

    @property
    def scale(self) -> float:
        """log(flops): what the target takes out so that tasks of different sizes compare."""
        flops = self.featurizer.task.flops
        return math.log(flops) if flops > 0 else 0.0

    def targets(self) -> list[float | None]:
        """Each row's target (see the module docstring); None for a row left out."""
        done = [math.log(s) - self.scale for _, _, s in self.rows if s is not None and s > 0]
        failed = max(done) + math.log(FAILURE_PENALTY) if done else None
        return [math.log(s) - self.scale if s is not None and s > 0 else failed for _, _, s in self.rows]


@dataclass(frozen=True)
class Pretrained:
    """What :meth:`GradientBoostedModel.pretrain` made of the records it was given: distinct
    (task, trace) pairs used, and records skipped by reason."""

    used: int = 0
    other_task: int = 0
    other_machine: int = 0
    stale: int = 0


class GradientBoostedModel:
    """A :class:`~hetero.core.schedule.tune.search.CostModel` of LightGBM trees (see the
    module docstring). ``backends`` are those whose tasks it will see (a task's
    features come from its backend); ``seed`` seeds every fit."""

    def __init__(self, backends: Iterable[Backend] = (), *, seed: int = 0, retrain_every: int = RETRAIN_EVERY) -> None:
        self._lgb = _lightgbm()
        self.seed = seed
        self.retrain_every = max(1, retrain_every)
        self._backends = {b.name: b for b in backends}
        self._tasks: dict[str, _TaskRows] = {}
        self._fits: dict[str, tuple[int, Any]] = {}  # task key -> (rows fitted on, booster or None)

    def update(self, task: TuningTask, traces: list[Trace], seconds: list[float | None]) -> None:
        """Learn from measured ``traces`` of ``task`` (None: failed); traces that do not
        fit the task's space are ignored."""
        for trace, s in zip(traces, seconds):
            self._add(task, trace, s)

    def rank(self, task: TuningTask, traces: list[Trace]) -> list[float]:
        """Predicted log(seconds) per trace (lower is faster); all 0 before the model has
        :data:`MIN_ROWS` usable trials, infinity for a trace that does not replay."""
        data = self._rows(task)
        booster = self._booster(task.key)
        if booster is None:
            return [0.0] * len(traces)
        found = [data.featurizer.features(t) for t in traces]
        rows = [(f[1] or []) + f[0] for f in found if f is not None]
        predicted = iter(booster.predict(np.array(rows, dtype=np.float64), num_threads=1) if rows else [])
        return [float(next(predicted)) + data.scale if f is not None else math.inf for f in found]

    def pretrain(self, records: Iterable[Record], tasks: Sequence[tuple[Backend, TuningTask]], *,
                 any_machine: bool = False) -> Pretrained:
        """Learn from earlier ``records`` of ``tasks`` (this run's, and any others whose
        records should teach it: see the module docstring). The times of one trace are
        taken as their median, a trace that only failed as one failure."""
        by_key = {t.key: (b, t) for b, t in tasks}
        self._backends.update({b.name: b for b, _ in tasks})
        times: dict[tuple[str, str], list[float | None]] = {}
        other_task = other_machine = stale = 0
        for record in records:
            known = by_key.get(record.task)
            if known is None or known[0].name != record.backend:
                other_task += 1
            elif not any_machine and not same_machine(record.machine, known[0].tuning_machine()):
                other_machine += 1
            else:
                times.setdefault((record.task, record.trace), []).append(record.seconds)
        used = 0
        for (key, text), seen in times.items():
            done = [s for s in seen if s is not None]
            try:
                trace = Trace.from_json(text)
            except ScheduleError:
                stale += len(seen)
                continue
            if self._add(by_key[key][1], trace, statistics.median(done) if done else None):
                used += 1
            else:
                stale += len(seen)
        return Pretrained(used, other_task, other_machine, stale)

    def _rows(self, task: TuningTask) -> _TaskRows:
        data = self._tasks.get(task.key)
        if data is None:
            backend = self._backends.get(task.backend)
            if backend is None:
                raise PluginError(f"cost model: task {task.label} is of backend {task.backend}, which the model "
                                  f"was not given; pass it in GradientBoostedModel(backends=...)")
            data = self._tasks[task.key] = _TaskRows(Featurizer(task, backend))
        return data

    def _add(self, task: TuningTask, trace: Trace, seconds: float | None) -> bool:
        """Hold one trial; False when its trace does not fit or replay."""
        data = self._rows(task)
        found = data.featurizer.features(trace)
        if found is None:
            return False
        data.rows.append((found[0], found[1], seconds))
        return True

    def _training_set(self, key: str) -> tuple[list[list[float]], list[float]]:
        """Rows and targets to fit task ``key``'s model on: its own trials with every
        feature, and other tasks' of its backend through the task features alone."""
        mine = self._tasks[key]
        width = mine.featurizer.task_width
        missing = [math.nan] * mine.featurizer.knob_width
        rows: list[list[float]] = []
        targets: list[float] = []
        for other_key, data in self._tasks.items():
            same = other_key == key
            if not same and (not width or data.backend != mine.backend or data.featurizer.task_width != width):
                continue
            for (knobs, task_features, _), target in zip(data.rows, data.targets()):
                if target is not None:
                    rows.append((task_features or []) + (knobs if same else missing))
                    targets.append(target)
        return rows, targets

    def _booster(self, key: str) -> Any:
        """Task ``key``'s fitted trees (refitted when ``retrain_every`` trials have come
        since the last fit), or None while there are too few trials."""
        rows, targets = self._training_set(key)
        fitted, booster = self._fits.get(key, (0, None))
        if len(rows) < MIN_ROWS:
            return None
        if booster is not None and len(rows) - fitted < self.retrain_every:
            return booster
        params = {**PARAMS, "seed": self.seed}
        dataset = self._lgb.Dataset(np.array(rows, dtype=np.float64), label=np.array(targets), params=params)
        booster = self._lgb.train(params, dataset, num_boost_round=ROUNDS)
        self._fits[key] = (len(rows), booster)
        return booster


def make_cost_model(name: str, backends: Iterable[Backend] = (), *, seed: int = 0) -> CostModel | None:
    """The cost model called ``name`` (one of :data:`COST_MODELS`) for tasks of
    ``backends``: None for "none" (the search keeps its random order)."""
    if name == "none":
        return None
    if name == "lightgbm":
        return GradientBoostedModel(backends, seed=seed)
    raise OptionError(f"cost model {name!r}: not one hetero knows; choose one of {', '.join(COST_MODELS)}")
