"""``hetero tune``'s driver: extract a model's tasks, share the budget by weight, search each.

Every task's default schedule is measured first (it is the reference every candidate
must match, and its seconds x occurrences is the task's weight); those trials are
outside the budget. The budget, trials or seconds, is then shared among the tasks in
proportion to their weights, so it goes where the model spends its time. Every trial
is appended to the records file as it finishes, so an interrupted run keeps what it
measured. After each task's search its default and fastest points are measured again
in turn, and the records pick the lowest median.

With a cost model (:mod:`.model`, one for the whole run, so that earlier tasks teach
later ones), each trial measures the one of several valid candidates the model ranks
fastest.

Candidates are measured through an executor (:mod:`.executors`: local processes or a
Dask cluster), in rounds of its batch. Progress goes to :mod:`hetero.core.progress`
(a front end draws it) and, as lines, to the caller's logs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hetero.core import progress
from hetero.core.compiler import Session
from hetero.core.ir.graph import Graph
from hetero.core.plugin.backend import Backend
from hetero.core.schedule.tune.executors import ExecutorFactory, executor_factory
from hetero.core.schedule.tune.measure import Measurer
from hetero.core.schedule.tune.records import append_records, new_record
from hetero.core.schedule.tune.search import CostModel, TaskResult, TaskSearch, Trial
from hetero.core.schedule.tune.task import TuningTask, merge_tasks
from hetero.errors import OptionError

Log = Callable[[str], None]

#: Points besides the default that each task measures again after its search: the
#: fastest few, since on this project's shared 2-core host one measurement of a 0.1 ms
#: kernel was seen 2x off an interleaved re-measurement of it.
CONFIRM_TOP = 3


@dataclass(frozen=True)
class Budget:
    """Trials to measure in all, or seconds to search for (one of them)."""

    trials: int | None = None
    seconds: float | None = None

    @staticmethod
    def parse(text: str) -> Budget:
        """``"200"`` (trials) or ``"60s"`` (seconds)."""
        try:
            if text.endswith("s"):
                seconds = float(text[:-1])
                if seconds > 0:
                    return Budget(seconds=seconds)
            elif int(text) >= 0:
                return Budget(trials=int(text))
        except ValueError:
            pass
        raise OptionError(f"budget {text!r}: give a number of trials (200) or of seconds (60s)")


def extract_tasks(graph: Graph, session: Session) -> list[tuple[Backend, TuningTask]]:
    """The distinct kernels of ``graph`` (optimised) for ``session``'s targets, partitioned as
    its compile would, with the backend that builds each: the tasks of the units
    (:meth:`~hetero.core.partition.partition.Partition.units`) a compile of the same
    session compiles."""
    found: list[tuple[Backend, TuningTask]] = []
    for unit in session.partition(session.prepare(graph)).units():
        target = session.target(unit.backend)
        found.extend((target.backend, t) for t in target.backend.tuning_tasks(unit.graph, target))
    merged = merge_tasks([t for _, t in found])
    backends = {t.backend: b for b, t in found}
    return [(backends[t.backend], t) for t in merged]


def share(budget: int, weights: Sequence[float]) -> list[int]:
    """``budget`` split in proportion to ``weights`` (largest remainders get the rest)."""
    total = sum(weights)
    if total <= 0 or budget <= 0:
        return [0] * len(weights)
    exact = [budget * w / total for w in weights]
    parts = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: parts[i] - exact[i])[:budget - sum(parts)]:
        parts[i] += 1
    return parts


def tune(tasks: Sequence[tuple[Backend, TuningTask]], budget: Budget, records: str | os.PathLike[str], *,
         seed: int = 0, executor: ExecutorFactory | None = None, repeats: int = 5, timeout_s: float = 60.0,
         confirm_rounds: int = 3, model: CostModel | None = None, log: Log | None = None,
         trial_log: Log | None = None) -> list[TaskResult]:
    """Tune ``tasks`` within ``budget``, appending every trial to ``records``; the results per
    task. Candidates are measured through ``executor`` (default: one local process), its
    ``batch`` at a time. After its search, each task's default and :data:`CONFIRM_TOP`
    fastest points are measured ``confirm_rounds`` more times in turn (outside the
    budget, like the defaults). ``model`` ranks each trial's candidates (None: the
    search's own random and climbing order).

    ``log`` receives one line per task's default, search and confirmation, ``trial_log``
    one per trial; :mod:`hetero.core.progress` hears a ``tune`` step per task (i of N)
    and a ``trial`` step per trial (done of planned, best GFLOP/s, elapsed, remaining)."""
    factory = executor or executor_factory("local")
    say = log or (lambda line: None)
    start = time.monotonic()
    measurers: dict[str, Measurer] = {}
    searches: list[tuple[Backend, TaskSearch]] = []
    try:
        out = _Records(records, measuring_machines(tasks, factory))
        for index, (backend, task) in enumerate(tasks):
            progress.step("tune", index + 1, len(tasks), f"{task.label}: default schedule")
            if backend.name not in measurers:
                measurers[backend.name] = Measurer(backend, executor=factory, batch=factory.batch, repeats=repeats,
                                                   timeout_s=timeout_s, seed=seed)
            search = TaskSearch(task, backend, measurers[backend.name], seed + index, model)
            trial = search.default()
            out.write(backend, task, trial)
            say(f"task {index + 1}/{len(tasks)} {task.label}: default {_fmt(trial.seconds, task)} "
                f"x{task.occurrences}, {search.space.size()} points")
            searches.append((backend, search))
        _search(searches, budget, out, _Clock(start), say, trial_log or (lambda line: None), confirm_rounds)
    finally:
        progress.end("tune")
        for measurer in measurers.values():
            measurer.close()
        if executor is None:
            factory.close()
    return [search.result for _, search in searches]


@dataclass
class _Clock:
    """The run's progress over all tasks: trials done of ``total`` planned (a trial
    budget), or until ``end`` (a time budget, :func:`time.monotonic`)."""

    start: float
    total: int = 0
    end: float | None = None
    begun: float = 0.0
    done: int = 0

    def tick(self) -> str:
        """Count a trial; the elapsed and estimated remaining seconds (from the time per
        trial so far, or the deadline) as text."""
        self.done += 1
        now = time.monotonic()
        if self.end is not None:
            remaining = self.end - now
        else:
            remaining = (now - self.begun) / self.done * (self.total - self.done)
        return f"elapsed {now - self.start:.0f} s, ~{max(0.0, remaining):.0f} s left"


def _search(searches: list[tuple[Backend, TaskSearch]], budget: Budget, out: _Records, clock: _Clock, say: Log,
            say_trial: Log, confirm_rounds: int) -> None:
    """Share ``budget`` among the searches by weight and run them."""
    weights = [s.result.default_seconds * s.task.occurrences if s.result.default_seconds else 0.0
               for _, s in searches]
    if budget.trials is not None:
        plan: list[int | None] = list(share(budget.trials, weights))
        slices: list[float | None] = [None] * len(searches)
    else:
        left = max(0.0, (budget.seconds or 0.0) - (time.monotonic() - clock.start))
        plan = [None if w > 0 else 0 for w in weights]
        slices = [left * w / (sum(weights) or 1.0) for w in weights]
        clock.end = time.monotonic() + left
    clock.total = sum(p for p in plan if p is not None)
    clock.begun = time.monotonic()
    for index, ((backend, search), trials, seconds) in enumerate(zip(searches, plan, slices)):
        if trials == 0:
            continue
        name = f"task {index + 1}/{len(searches)}"
        progress.step("tune", index + 1, len(searches), search.task.label)
        deadline = None if seconds is None else time.monotonic() + seconds

        def on_trial(result: TaskResult, name: str = name, trials: int | None = trials,
                     backend: Backend = backend) -> None:
            trial, best, count = result.trials[-1], result.best, len(result.trials) - 1
            out.write(backend, result.task, trial)
            timing = clock.tick()
            outcome = _fmt(trial.seconds, result.task) if trial.error is None else f"failed ({trial.error})"
            say_trial(f"{name} trial {count}/{trials or '-'}: {outcome}; "
                      f"best {_fmt(best.seconds if best else None, result.task)}; {timing}")
            rate = gflops(best.seconds if best else None, result.task)
            overall = f"{clock.done}/{clock.total}" if clock.total else f"{clock.done}"
            progress.step("trial", count, trials or 0, ("" if trials else f"{count} done, ")
                          + f"best {rate or 0.0:.1f} GFLOP/s; {overall} in all, {timing}")

        result = search.run(trials, deadline, on_trial)
        progress.end("trial")
        failed = sum(t.error is not None for t in result.trials[1:])
        say(f"{name} searched: {len(result.trials) - 1} trials ({failed} failed), "
            f"best {_fmt(result.best.seconds if result.best else None, result.task)}")
        _confirm(search, backend, out, name, say, confirm_rounds)


def _confirm(search: TaskSearch, backend: Backend, out: _Records, name: str, say: Log, rounds: int) -> None:
    """The confirmation rounds of one searched task, one line at the end."""
    def on_confirm(result: TaskResult) -> None:
        out.write(backend, result.task, result.confirmations[-1])
        progress.step("confirm", len(result.confirmations), 0, "the default and the fastest again")

    result = search.confirm(rounds, CONFIRM_TOP, on_confirm)
    progress.end("confirm")
    if result.confirmations:
        chosen = result.chosen
        default = result.median_seconds(search.space.default)
        say(f"{name} confirmed ({rounds} rounds): default {_fmt(default, result.task)}, "
            f"chosen {_fmt(chosen[1] if chosen else None, result.task)}")


def measuring_machines(tasks: Sequence[tuple[Backend, TuningTask]],
                       executor: ExecutorFactory) -> dict[str, dict[str, Any]]:
    """Per backend of ``tasks``, the machine identity
    (:meth:`~hetero.core.plugin.backend.Backend.tuning_machine`) that every worker of
    ``executor`` reports: the machine the measurements hold for, which is not this
    process's when the workers are elsewhere. An :class:`OptionError` when the workers
    differ: a run's records hold one machine."""
    machines: dict[str, dict[str, Any]] = {}
    for backend, _ in tasks:
        if backend.name in machines:
            continue
        answers = executor.on_workers(backend.tuning_machine)
        found = {json.dumps(m, sort_keys=True, default=str): m for m in answers}
        if len(found) > 1:
            differ = sorted({k for m in answers for k in m if any(m.get(k) != other.get(k) for other in answers)})
            raise OptionError(f"the {executor.where} are on {len(found)} different machines for {backend.name} "
                              f"(their {', '.join(differ)} differ): one run's records hold one machine, so tune "
                              "on workers of one kind")
        machines[backend.name] = answers[0]
    return machines


@dataclass(frozen=True)
class _Records:
    """The records file, and the machine each backend's measurements hold for."""

    path: str | os.PathLike[str]
    machines: dict[str, dict[str, Any]]

    def write(self, backend: Backend, task: TuningTask, trial: Trial) -> None:
        """Append ``trial`` of ``task`` as a record."""
        append_records(self.path, [new_record(task.key, backend.name, trial.trace.to_json(), trial.seconds,
                                              self.machines[backend.name], task.label, trial.error)])


def gflops(seconds: float | None, task: TuningTask) -> float | None:
    """The task's GFLOP/s at ``seconds`` a run."""
    return None if not seconds else task.flops / seconds / 1e9


def _fmt(seconds: float | None, task: TuningTask) -> str:
    if seconds is None:
        return "failed"
    return f"{seconds * 1e3:.3f} ms ({gflops(seconds, task):.1f} GFLOP/s)"
