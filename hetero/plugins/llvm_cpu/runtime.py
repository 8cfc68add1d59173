"""The native runtime: a thread pool and a program runner, in machine code, so that a
parallel launch costs microseconds and a whole part runs in one call from Python.

Why native: with Python's ``ThreadPoolExecutor`` every chunk handed to a worker costs
a queue put, a condition-variable wake and the GIL twice, some 50-100 us a launch on
the 2-core hosts hetero is measured on; ShuffleNet's 274 kernels ran *slower* on two
threads than on one. Here the pool's workers wait on one 64-bit word, claim chunks of
the current job with a compare-and-swap and call the kernel's entry directly; the
caller claims chunks too, so a launch that a busy core delays still finishes.

The module is LLVM IR text (below), compiled by the same LLVM as the kernels, once per
process. Its parts:

- ``hetero_rt_parallel(fn, args, extent, chunks)`` runs ``fn(lo, hi, args)`` over
  ``range(extent)`` cut into ``chunks`` near-equal pieces, on the pool and the calling
  thread, and returns when every piece is done. ``fn`` is a stage's *packed* entry
  (:mod:`~hetero.plugins.llvm_cpu.codegen`): its buffers in one pointer array. A call
  that finds the pool busy with another caller's job runs its pieces itself, in order:
  runs from several threads stay correct and never wait on each other.
- ``hetero_rt_worker()`` is a worker's loop; Python starts the workers as daemon
  threads that call it once (ctypes releases the GIL for the whole call).
- ``hetero_rt_program(steps, n, ns)`` runs ``n`` launches ``{fn, args, extent,
  chunks}`` in order and writes each one's nanoseconds to ``ns``: a part's whole run;
  the workers stay awake until it returns.
- ``hetero_rt_stop()`` ends the workers (at interpreter exit); in a forked child,
  ``hetero_rt_after_fork()`` forgets the parent's workers and locks, and the next
  launch that wants threads starts new ones.

The job word holds ``generation << 32 | next << 16 | chunks``: a worker that claims a
chunk with a compare-and-swap against the generation it was woken for can never take
a piece of a later job, and the job's fields (written before the word is published
with release order) cannot change while any of its chunks is claimed and unfinished.

Idle workers do not hold a core: after :data:`SPIN_PAUSES` pause instructions
(a few tens of microseconds) they sleep on a futex until the next job, so a process
that also runs numpy's BLAS or onnxruntime leaves those their cores. While a program
runs (``@programs`` counts the programs in flight) they keep spinning between its
launches instead: a kernel the caller runs alone (too small to split) often outlasts
the spin, and waking a sleeping worker for the parallel kernel after it cost tens of
microseconds a time on a virtual machine, more than the kernel gained (ShuffleNet at 2
threads, 68 kernels, ran slower than at 1). A program's end lets them sleep. Linux only (futex); elsewhere
:func:`native_pool` returns None and kernels use the Python pool.
"""

from __future__ import annotations

import atexit
import ctypes
from dataclasses import dataclass
import functools
import os
import platform
import string
import sys
import threading

import llvmlite.binding as llvm

from hetero.plugins.llvm_cpu.target import host_target_machine, engine_target_machine

#: Pause instructions a worker spins through before it sleeps: about 30-60 us on the
#: x86 and Arm cores hetero meets (a pause is 40-140 cycles), longer than the Python
#: step between two kernels of one run, much shorter than the gap between runs.
SPIN_PAUSES = 2000
#: Largest chunk count one job word holds (16 bits).
MAX_CHUNKS = 0xFFFF

#: (futex, sched_yield) syscall numbers and the spin-wait hint (x86's pause, Arm's
#: yield, hint #1) with its declaration, per machine.
_ARCH = {
    "x86_64": (202, 24, "call void @llvm.x86.sse2.pause()", "declare void @llvm.x86.sse2.pause()"),
    "aarch64": (98, 124, "call void @llvm.aarch64.hint(i32 1)", "declare void @llvm.aarch64.hint(i32)"),
}

_IR = r"""
@word = internal global i64 0, align 64
@done = internal global i64 0, align 64
@seq = internal global i32 0, align 64
@sleepers = internal global i32 0, align 64
@stop = internal global i32 0, align 64
@busy = internal global i32 0, align 64
@programs = internal global i32 0, align 64
@job_fn = internal global ptr null, align 64
@job_args = internal global ptr null
@job_extent = internal global i64 0

declare i64 @syscall(i64, ...)
declare i32 @clock_gettime(i32, ptr)

$pause_decl
define internal void @relax() {
  $pause
  ret void
}

; Piece k of `chunks` near-equal pieces of range(extent): fn(extent*k/chunks, extent*(k+1)/chunks).
define internal void @run_piece(ptr %fn, ptr %args, i64 %extent, i64 %chunks, i64 %k) {
  %a = mul i64 %extent, %k
  %lo = udiv i64 %a, %chunks
  %k1 = add i64 %k, 1
  %b = mul i64 %extent, %k1
  %hi = udiv i64 %b, %chunks
  call void %fn(i64 %lo, i64 %hi, ptr %args)
  ret void
}

; Claim and run chunks of job `gen` until it has none left (or a later job replaced it).
define internal void @run_chunks(i64 %gen) {
entry:
  br label %claim
claim:
  %w = load atomic i64, ptr @word acquire, align 8
  %g = lshr i64 %w, 32
  %same = icmp eq i64 %g, %gen
  br i1 %same, label %check, label %out
check:
  %next = and i64 %w, 4294901760
  %n = lshr i64 %next, 16
  %chunks = and i64 %w, 65535
  %left = icmp ult i64 %n, %chunks
  br i1 %left, label %take, label %out
take:
  %w1 = add i64 %w, 65536
  %pair = cmpxchg ptr @word, i64 %w, i64 %w1 acq_rel acquire
  %ok = extractvalue { i64, i1 } %pair, 1
  br i1 %ok, label %work, label %claim
work:
  %fn = load ptr, ptr @job_fn
  %args = load ptr, ptr @job_args
  %extent = load i64, ptr @job_extent
  call void @run_piece(ptr %fn, ptr %args, i64 %extent, i64 %chunks, i64 %n)
  atomicrmw add ptr @done, i64 1 release
  br label %claim
out:
  ret void
}

define void @hetero_rt_worker() {
entry:
  %w0 = load atomic i64, ptr @word acquire, align 8
  %g0 = lshr i64 %w0, 32
  br label %idle
idle:
  %seen = phi i64 [ %g0, %entry ], [ %seen, %slept ], [ %g, %ran ]
  br label %spin
spin:
  %i = phi i64 [ 0, %idle ], [ %i1, %spin_next ]
  %st = load atomic i32, ptr @stop acquire, align 4
  %stopped = icmp ne i32 %st, 0
  br i1 %stopped, label %exit, label %look
look:
  %w = load atomic i64, ptr @word acquire, align 8
  %g = lshr i64 %w, 32
  %new = icmp ne i64 %g, %seen
  br i1 %new, label %ran_pre, label %spin_next
spin_next:
  call void @relax()
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, $spin
  %running = load atomic i32, ptr @programs monotonic, align 4
  %inside = icmp ne i32 %running, 0
  %stay = or i1 %more, %inside
  br i1 %stay, label %spin, label %sleep
sleep:
  %s = load atomic i32, ptr @seq seq_cst, align 4
  atomicrmw add ptr @sleepers, i32 1 seq_cst
  %w2 = load atomic i64, ptr @word seq_cst, align 8
  %g2 = lshr i64 %w2, 32
  %st2 = load atomic i32, ptr @stop seq_cst, align 4
  %changed = icmp ne i64 %g2, %seen
  %st2b = icmp ne i32 %st2, 0
  %wake = or i1 %changed, %st2b
  br i1 %wake, label %slept, label %wait
wait:
  %s64 = zext i32 %s to i64
  call i64 (i64, ...) @syscall(i64 $futex, ptr @seq, i64 128, i64 %s64, ptr null)
  br label %slept
slept:
  atomicrmw sub ptr @sleepers, i32 1 seq_cst
  br label %idle
ran_pre:
  call void @run_chunks(i64 %g)
  br label %ran
ran:
  br label %idle
exit:
  ret void
}

define internal void @wake_all() {
  atomicrmw add ptr @seq, i32 1 seq_cst
  %n = load atomic i32, ptr @sleepers seq_cst, align 4
  %any = icmp ne i32 %n, 0
  br i1 %any, label %wake, label %out
wake:
  call i64 (i64, ...) @syscall(i64 $futex, ptr @seq, i64 129, i64 2147483647)
  br label %out
out:
  ret void
}

define void @hetero_rt_parallel(ptr %fn, ptr %args, i64 %extent, i64 %chunks) {
entry:
  %few = icmp ule i64 %chunks, 1
  br i1 %few, label %alone, label %lock
alone:
  call void %fn(i64 0, i64 %extent, ptr %args)
  ret void
lock:
  %prev = atomicrmw xchg ptr @busy, i32 1 acquire
  %taken = icmp ne i32 %prev, 0
  br i1 %taken, label %serial, label %publish
serial:
  %k = phi i64 [ 0, %lock ], [ %k1, %serial ]
  call void @run_piece(ptr %fn, ptr %args, i64 %extent, i64 %chunks, i64 %k)
  %k1 = add i64 %k, 1
  %last = icmp eq i64 %k1, %chunks
  br i1 %last, label %serial_out, label %serial
serial_out:
  ret void
publish:
  store ptr %fn, ptr @job_fn
  store ptr %args, ptr @job_args
  store i64 %extent, ptr @job_extent
  store atomic i64 0, ptr @done monotonic, align 8
  %old = load atomic i64, ptr @word monotonic, align 8
  %og = lshr i64 %old, 32
  %gen = add i64 %og, 1
  %gen32 = and i64 %gen, 4294967295
  %hi_bits = shl i64 %gen32, 32
  %w = or i64 %hi_bits, %chunks
  store atomic i64 %w, ptr @word release, align 8
  call void @wake_all()
  call void @run_chunks(i64 %gen32)
  br label %wait
wait:
  %i = phi i64 [ 0, %publish ], [ %i1, %again ], [ %i1, %yield ]
  %d = load atomic i64, ptr @done acquire, align 8
  %all = icmp eq i64 %d, %chunks
  br i1 %all, label %finish, label %again
again:
  call void @relax()
  %i1 = add i64 %i, 1
  %long = icmp ugt i64 %i1, $spin
  br i1 %long, label %yield, label %wait
yield:
  call i64 (i64, ...) @syscall(i64 $sched_yield)
  br label %wait
finish:
  store atomic i32 0, ptr @busy release, align 4
  ret void
}

define void @hetero_rt_program(ptr %steps, i64 %n, ptr %ns) {
entry:
  %ts = alloca { i64, i64 }
  atomicrmw add ptr @programs, i32 1 monotonic
  %none = icmp eq i64 %n, 0
  br i1 %none, label %out, label %step
step:
  %k = phi i64 [ 0, %entry ], [ %k1, %step ]
  %rec = getelementptr { ptr, ptr, i64, i64 }, ptr %steps, i64 %k
  %fn = load ptr, ptr %rec
  %pa = getelementptr { ptr, ptr, i64, i64 }, ptr %rec, i32 0, i32 1
  %args = load ptr, ptr %pa
  %pe = getelementptr { ptr, ptr, i64, i64 }, ptr %rec, i32 0, i32 2
  %extent = load i64, ptr %pe
  %pc = getelementptr { ptr, ptr, i64, i64 }, ptr %rec, i32 0, i32 3
  %chunks = load i64, ptr %pc
  %t0 = call i64 @now(ptr %ts)
  call void @hetero_rt_parallel(ptr %fn, ptr %args, i64 %extent, i64 %chunks)
  %t1 = call i64 @now(ptr %ts)
  %dt = sub i64 %t1, %t0
  %slot = getelementptr i64, ptr %ns, i64 %k
  store i64 %dt, ptr %slot
  %k1 = add i64 %k, 1
  %end = icmp eq i64 %k1, %n
  br i1 %end, label %out, label %step
out:
  atomicrmw sub ptr @programs, i32 1 monotonic
  ret void
}

define internal i64 @now(ptr %ts) {
  call i32 @clock_gettime(i32 1, ptr %ts)
  %s = load i64, ptr %ts
  %pn = getelementptr { i64, i64 }, ptr %ts, i32 0, i32 1
  %n = load i64, ptr %pn
  %sn = mul i64 %s, 1000000000
  %t = add i64 %sn, %n
  ret i64 %t
}

; In a forked child: no worker survived the fork, and a lock the parent's other
; threads held would never be released.
define void @hetero_rt_after_fork() {
  store atomic i32 0, ptr @busy seq_cst, align 4
  store atomic i32 0, ptr @sleepers seq_cst, align 4
  ret void
}

define void @hetero_rt_stop() {
  store atomic i32 1, ptr @stop seq_cst, align 4
  call void @wake_all()
  ret void
}
"""


class Launch(ctypes.Structure):
    """One record of a program: ``fn(lo, hi, args)`` over ``range(extent)`` in ``chunks``."""

    _fields_ = [("fn", ctypes.c_uint64), ("args", ctypes.c_uint64), ("extent", ctypes.c_int64),
                ("chunks", ctypes.c_int64)]


@dataclass
class NativePool:
    """The process's native pool: call :meth:`ensure` with a thread count before launching."""

    parallel: ctypes._CFuncPtr
    program: ctypes._CFuncPtr
    worker: ctypes._CFuncPtr
    stop: ctypes._CFuncPtr
    after_fork: ctypes._CFuncPtr
    engine: llvm.ExecutionEngine
    workers: list[threading.Thread]
    lock: threading.Lock

    def forked(self) -> None:
        """In a child process: its workers did not survive the fork; the next
        :meth:`ensure` starts new ones."""
        self.after_fork()
        self.workers.clear()
        self.lock = threading.Lock()

    def ensure(self, threads: int) -> None:
        """Have at least ``threads - 1`` workers (the caller is the last thread)."""
        if len(self.workers) >= threads - 1:
            return
        with self.lock:
            while len(self.workers) < threads - 1:
                thread = threading.Thread(target=self.worker, name=f"hetero-native-{len(self.workers)}",
                                          daemon=True)
                thread.start()
                self.workers.append(thread)


def _source(machine: str) -> str | None:
    if sys.platform != "linux" or machine not in _ARCH:
        return None
    futex, sched_yield, pause, pause_decl = _ARCH[machine]
    return string.Template(_IR).substitute(futex=futex, sched_yield=sched_yield, pause=pause,
                                           pause_decl=pause_decl, spin=SPIN_PAUSES)


@functools.cache
def native_pool() -> NativePool | None:
    """The process's pool, compiled on first use; None where the runtime has no port
    (not Linux on x86-64 or AArch64): callers then use a Python thread pool."""
    source = _source(platform.machine())
    if source is None:
        return None
    machine = host_target_machine()
    module = llvm.parse_assembly(source)
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    module.verify()
    engine = llvm.create_mcjit_compiler(module, engine_target_machine())
    engine.finalize_object()

    def bind(name: str, *argtypes: type) -> ctypes._CFuncPtr:
        return ctypes.CFUNCTYPE(None, *argtypes)(engine.get_function_address(name))

    pool = NativePool(
        parallel=bind("hetero_rt_parallel", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64),
        program=bind("hetero_rt_program", ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p),
        worker=bind("hetero_rt_worker"),
        stop=bind("hetero_rt_stop"),
        after_fork=bind("hetero_rt_after_fork"),
        engine=engine, workers=[], lock=threading.Lock())
    atexit.register(pool.stop)
    os.register_at_fork(after_in_child=pool.forked)
    return pool
