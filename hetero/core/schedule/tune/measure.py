"""Measuring candidates in worker processes, so that a crash or a hang fails one trial only.

Candidates go through a :class:`concurrent.futures.Executor`; the default is a local
process pool (forked: a worker starts with this process's imports and LLVM already
initialised). Each worker arms an alarm with the default action before building, so a
candidate that hangs, even inside LLVM's C++, is killed by the kernel at its timeout;
a candidate that aborts (an LLVM assertion, ``os.abort``) kills its worker. Either
breaks the pool (:class:`~concurrent.futures.process.BrokenProcessPool`): the pool is
rebuilt, the candidates of the broken batch run again one at a time, and the one that
breaks a pool alone is recorded as failed. The run goes on.

An executor that runs work on threads (a Dask worker's, :mod:`.executors`) can neither
arm an alarm there nor survive an abort, so there each candidate runs in a child forked
from the worker, with the alarm armed in the child and its result sent back through a
pipe: a crash or a hang ends the child, its trial records how (:class:`CandidateError`),
and the worker lives on.

A measurement counts only when its outputs match the default schedule's on the same
seeded random inputs (:func:`matches`).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

import numpy as np

from hetero.core.plugin.backend import Backend
from hetero.core.schedule import Trace
from hetero.core.schedule.tune.task import TuningTask

#: Seconds a candidate may take to build and run its repeats: a kernel's LLVM compile is
#: about half a second here, a ResNet-50 convolution's run some milliseconds.
DEFAULT_TIMEOUT_S = 60.0
#: Runs timed per candidate (after one warm-up run); the median counts.
DEFAULT_REPEATS = 5
#: Extra seconds the parent waits past a worker's own alarm before giving up on it
#: (a worker that cannot even be killed by its alarm: the pool is abandoned).
GRACE_S = 10.0
#: A candidate's output may differ from the default's by this much relative to the
#: largest default output: a reordered float32 sum of n terms differs by at most
#: about n * 2**-24 times the sum of the magnitudes, and on random inputs the
#: differences seen are orders of magnitude below this; a wrong schedule (a missed
#: tile, garbage in a padded lane) is off by the size of the outputs themselves.
RELATIVE_TOLERANCE = 1e-4


@dataclass(frozen=True)
class Measurement:
    """One candidate's outcome: median seconds and outputs, or the error that failed it."""

    seconds: float | None
    outputs: list[np.ndarray] | None = None
    error: str | None = None


class CandidateError(Exception):
    """A candidate's failure in a forked child, worded as its trial's error: the
    exception the child raised, or how the child died (a crash, its alarm)."""


def _measure_in_worker(backend: Backend, task: TuningTask, trace_json: str, repeats: int, seed: int,
                       timeout_s: float) -> tuple[float, list[np.ndarray]]:
    """A worker's measurement of one candidate, killed by its own alarm at ``timeout_s``
    (in a forked child when the worker runs it on a thread)."""
    trace = Trace.from_json(trace_json)
    if threading.current_thread() is not threading.main_thread():
        return _measure_in_child(backend, task, trace, repeats, seed, timeout_s)
    _arm(timeout_s)
    try:
        return backend.tuning_measure(task, trace, repeats, seed)
    finally:
        signal.alarm(0)


def _arm(timeout_s: float) -> None:
    """End this process at ``timeout_s``: SIG_DFL, so the kernel ends it whatever code
    (Python or C++) it is in."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, int(round(timeout_s))))


def _measure_in_child(backend: Backend, task: TuningTask, trace: Trace, repeats: int, seed: int,
                      timeout_s: float) -> tuple[float, list[np.ndarray]]:
    """The measurement made in a child forked from this thread's process; the child's
    exception, or its death, is a :class:`CandidateError` here.

    Forking a process with threads is safe here because the parent's threads never
    build or run candidates (they wait on children, or run the executor's own loop), so
    no lock the child needs is held by a thread the child lacks."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _child(write, backend, task, trace, repeats, seed, timeout_s)
    os.close(write)
    try:
        data = _read_until(read, time.monotonic() + timeout_s + GRACE_S)
    finally:
        os.close(read)
    if data is None:
        os.kill(pid, signal.SIGKILL)  # it outlived its own alarm: stopped in the kernel
    _, status = os.waitpid(pid, 0)
    if data:
        outcome, value = pickle.loads(data)
        if outcome == "raised":
            raise CandidateError(value)
        return value
    raise CandidateError(_death(status, timeout_s, ended=data is not None))


def _child(write: int, backend: Backend, task: TuningTask, trace: Trace, repeats: int, seed: int,
           timeout_s: float) -> None:
    """The forked child: measure under the alarm, send ("returned", result) or ("raised",
    the error as text: any exception pickles so, and unpickles) through ``write``, and
    leave without running the parent's exit handlers."""
    try:
        _arm(timeout_s)
        try:
            message = pickle.dumps(("returned", backend.tuning_measure(task, trace, repeats, seed)))
        except Exception as exc:  # noqa: BLE001 - a candidate's failure is its trial's
            message = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write, "wb") as out:
            out.write(message)
    finally:
        os._exit(0)


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to the pipe ``fd`` until its writer closes it (b"" when it
    closed with nothing written); None if the writer is still there at ``deadline``."""
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _death(status: int, timeout_s: float, ended: bool) -> str:
    """Why a child sent nothing back, from its wait ``status`` (``ended``: it closed its
    pipe before the deadline; else it was killed here)."""
    if not ended:
        return f"the candidate's process did not end {GRACE_S:g} s past its {timeout_s:g} s limit and was killed"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGALRM:
            return f"the candidate's process ran past the {timeout_s:g} s limit and was killed"
        return f"the candidate's process died of {signal.Signals(number).name} (it crashed)"
    return f"the candidate's process exited with status {os.WEXITSTATUS(status)} before it answered"


def local_pool(workers: int) -> Callable[[], Executor]:
    """A factory of local process pools of ``workers`` (forked where the platform can)."""
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)

    def make() -> Executor:
        return ProcessPoolExecutor(workers, mp_context=context)

    return make


class Measurer:
    """Measures candidate traces of tasks through executors made by ``executor``.

    ``batch`` candidates are in flight at once (the pool's workers; one by default, so
    that timed runs on a small shared host do not compete with each other).
    """

    def __init__(self, backend: Backend, *, executor: Callable[[], Executor] | None = None, batch: int = 1,
                 timeout_s: float = DEFAULT_TIMEOUT_S, repeats: int = DEFAULT_REPEATS, seed: int = 0) -> None:
        self.backend = backend
        self.make_executor = executor or local_pool(batch)
        self.batch = max(1, batch)
        self.timeout_s = timeout_s
        self.repeats = repeats
        self.seed = seed
        self._executor: Executor | None = None

    def measure(self, task: TuningTask, traces: list[Trace]) -> list[Measurement]:
        """Each of ``traces`` measured, in order; failures are Measurements with an error."""
        results: list[Measurement] = []
        for start in range(0, len(traces), self.batch):
            chunk = traces[start:start + self.batch]
            found = self._run(task, chunk)
            if any(m is None for m in found) and len(chunk) > 1:
                # Which candidate broke the pool is unknown: each of those runs again alone.
                found = [m if m is not None else self._run(task, [t])[0] for m, t in zip(found, chunk)]
            results.extend(m if m is not None else Measurement(None, error=self._died) for m in found)
        return results

    @property
    def _died(self) -> str:
        return (f"the worker process died (it crashed, or ran past the {self.timeout_s:g} s limit "
                "and was killed)")

    def _run(self, task: TuningTask, traces: list[Trace]) -> list[Measurement | None]:
        """One batch; None for a candidate lost to a broken pool."""
        executor = self._pool()
        futures = [executor.submit(_measure_in_worker, self.backend, task, t.to_json(), self.repeats, self.seed,
                                   self.timeout_s) for t in traces]
        found: list[Measurement | None] = []
        deadline = time.monotonic() + self.timeout_s + GRACE_S
        for future in futures:
            try:
                seconds, outputs = future.result(timeout=max(0.0, deadline - time.monotonic()))
                found.append(Measurement(float(seconds), [np.asarray(o) for o in outputs]))
            except BrokenProcessPool:
                self._discard()
                found.append(None)
            except FutureTimeout:
                self._discard()
                found.append(Measurement(None, error=f"timed out after {self.timeout_s:g} s"))
            except CandidateError as exc:
                found.append(Measurement(None, error=str(exc)))
            except Exception as exc:  # noqa: BLE001 - a candidate's failure is its trial's, not the run's
                found.append(Measurement(None, error=f"{type(exc).__name__}: {exc}"))
        return found

    def _pool(self) -> Executor:
        if self._executor is None:
            self._executor = self.make_executor()
        return self._executor

    def _discard(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def close(self) -> None:
        """Shut the executor down."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


def matches(outputs: list[np.ndarray], reference: list[np.ndarray]) -> str | None:
    """None when ``outputs`` match ``reference`` within :data:`RELATIVE_TOLERANCE`; else why not."""
    if len(outputs) != len(reference):
        return f"{len(outputs)} outputs, the default schedule gives {len(reference)}"
    for k, (out, ref) in enumerate(zip(outputs, reference)):
        if out.shape != ref.shape:
            return f"output {k} has shape {out.shape}, the default's is {ref.shape}"
        scale = float(np.max(np.abs(ref))) if ref.size else 0.0
        error = float(np.max(np.abs(out.astype(np.float64) - ref))) if ref.size else 0.0
        if not error <= RELATIVE_TOLERANCE * max(scale, 1.0):
            return f"output {k} differs from the default schedule's by {error:.3g} (largest value {scale:.3g})"
    return None
