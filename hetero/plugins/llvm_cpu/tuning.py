"""llvm_cpu's side of auto-tuning (:mod:`hetero.core.schedule.tune`): its tasks, replays,
measurements and tuned compiles.

A task is one kernel step's lowered function; its key hashes the JIT cache's structural
key of that function with canonical names (:func:`~hetero.plugins.llvm_cpu.jit.structural_key`: equal up to
names is equal) with the thread count the schedule was made for, so ResNet-50's
repeated bottleneck convolutions are one task each. A candidate is measured as the
compile builds it: its trace replayed on the function, its weight-packing stages
hoisted and run once (:class:`~hetero.plugins.llvm_cpu.prepack.ConstantPacker`), its
names made canonical, compiled at O3; then timed on seeded random inputs.

:func:`schedule_kernel` is the compile's hook: a step whose task has a tuned trace
(the ``tuned_schedules`` option, filled from records by ``hetero.compile(records=...)``)
replays it; one whose trace no longer applies keeps its default schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
import hashlib
import math
import statistics
import time

import numpy as np

from hetero.plugin import Graph, ScheduleError
from hetero.plugin.lower import VIEW_OPS, kernel_steps
from hetero.plugin.schedule import Trace, TuningTask, merge_tasks
from hetero.plugin.tir import Allocate, Binary, PrimFunc, Store, canonical_names, stores_in_loops, walk
from hetero.plugins.llvm_cpu.host import HostCpu, host
from hetero.plugins.llvm_cpu.jit import structural_key
from hetero.plugins.llvm_cpu.kernel import compile_kernel
from hetero.plugins.llvm_cpu.prepack import ConstantPacker
from hetero.plugins.llvm_cpu.schedules import default_schedule
from hetero.plugins.llvm_cpu.schedules_int8 import shift_windows


@dataclass(frozen=True)
class KernelTask:
    """What a worker needs to build a task: the lowered function, the thread count, the
    graph values its inputs are and which of them are constants (weights, packed once)."""

    func: PrimFunc
    threads: int
    inputs: tuple[str, ...]
    constant: tuple[bool, ...]


def task_key(func: PrimFunc, threads: int) -> str:
    """The identity of ``func``'s kernel scheduled for ``threads``: equal for functions
    equal up to names."""
    text = structural_key(canonical_names(func))
    return hashlib.sha256(f"{text}|threads={threads}".encode()).hexdigest()[:32]


def tasks(graph: Graph, threads: int, backend: str) -> list[TuningTask]:
    """The distinct kernels of ``graph`` (after llvm_cpu's graph passes) whose default
    schedule has decisions to tune, occurrences counted."""
    found = []
    for step in kernel_steps(graph, VIEW_OPS):
        if step.view is not None:
            continue
        func = step.lower()
        trace = default_schedule(func, threads).trace
        if not trace.decisions:
            continue
        out = graph.values[step.outputs[0]].type
        constant = tuple(graph.values[n].data is not None for n in step.inputs)
        found.append(TuningTask(task_key(func, threads), backend, f"{step.label} {out}", 1, flops(func), trace,
                                KernelTask(func, threads, step.inputs, constant)))
    return merge_tasks(found)


def flops(func: PrimFunc) -> float:
    """Arithmetic of one run: two per multiply-add store, one per other store."""
    def per_run(store: Store) -> int:
        fused = isinstance(store.value, Binary) and store.value.op == "add" and \
            isinstance(store.value.b, Binary) and store.value.b.op == "mul"
        return 2 if fused else 1

    return float(sum(per_run(store) * math.prod(loop.extent for loop in loops)
                     for store, loops in stores_in_loops(func.body)))


def replay(task: TuningTask, trace: Trace) -> PrimFunc:
    """``trace`` replayed on the task's function: ScheduleError when it does not apply, or
    when a register tile it makes cannot fit the host's vector registers."""
    payload: KernelTask = task.payload
    func = trace.apply(shift_windows(payload.func))
    check_register_tiles(func, host())
    return func


def check_register_tiles(func: PrimFunc, cpu: HostCpu) -> None:
    """Raise ScheduleError if an accumulator tile of ``func`` (a ``local`` buffer, which
    :meth:`~hetero.core.schedule.Schedule.tile_accumulator` means to live in registers)
    needs more vector registers than ``cpu`` has: such a tile spills every accumulator
    to the stack on each reduction step, so the search skips it before building it (the
    space respects the register file, the first level of the memory hierarchy)."""
    for stmt in walk(func.body):
        if isinstance(stmt, Allocate) and stmt.buffer.scope == "local":
            nbytes = math.prod(stmt.buffer.shape) * np.dtype(stmt.buffer.dtype).itemsize
            registers = -(-nbytes * 8 // cpu.vector_bits)
            if registers > cpu.vector_registers:
                raise ScheduleError(
                    f"accumulator tile {stmt.buffer.name} ({nbytes} bytes) needs {registers} vector registers; "
                    f"{cpu.name} has {cpu.vector_registers} of {cpu.vector_bits} bits")


def _random(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    # Integer inputs are indices or quantised data: zeros are in range for every op.
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def measure(task: TuningTask, trace: Trace, repeats: int, seed: int) -> tuple[float, list[np.ndarray]]:
    """Build ``task`` with ``trace`` as the compile would and time it: the median of
    ``repeats`` runs after one warm-up, and the outputs on inputs drawn from ``seed``."""
    payload: KernelTask = task.payload
    scheduled = replay(task, trace)
    rng = np.random.default_rng(seed)
    params = payload.func.params
    arrays = {name: _random(tuple(b.shape), b.dtype, rng) for b, name in zip(params, payload.inputs)}
    packer = ConstantPacker({n: arrays[n] for n, c in zip(payload.inputs, payload.constant) if c},
                            payload.threads, payload.inputs)
    packed, inputs = packer.apply(scheduled, payload.inputs, "tune")
    kernel = compile_kernel(canonical_names(packed), payload.threads, trace)
    args = [packer.constants[n] if n in packer.constants else arrays[n] for n in inputs]
    outs = [np.zeros(b.shape, b.dtype) for b in kernel.outputs]
    kernel.launch([*args, *outs])
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        kernel.launch([*args, *outs])
        times.append(time.perf_counter() - start)
    return statistics.median(times), outs


def machine() -> dict[str, object]:
    """The host's identity: its CPU, vector width, registers, caches and cores."""
    return asdict(host())


def schedule_kernel(func: PrimFunc, threads: int, tuned: Mapping[str, str]) -> tuple[PrimFunc, Trace]:
    """``func`` scheduled for ``threads``: with its task's tuned trace when ``tuned`` has
    one that applies, else with the default schedule."""
    text = tuned.get(task_key(func, threads)) if tuned else None
    if text is not None:
        try:
            trace = Trace.from_json(text)
            return trace.apply(shift_windows(func)), trace
        except ScheduleError:
            pass  # a record from another hetero whose trace no longer fits: the default serves
    schedule = default_schedule(func, threads)
    return schedule.func, schedule.trace
