"""Just-in-time compilation for the host: render, optimise at O3, load with MCJIT.

Entry points are called through ctypes ``CFUNCTYPE`` pointers, which release the GIL
for the duration of the call, so stages run truly in parallel on a thread pool.
Compilation is cached per process: functions with the same structure compile once,
whatever their own and their loop variables' names (lowering names a convolution's
reduction loops after its output value, so ResNet-50's equal bottleneck convolutions
differed only there: 57 O3 compiles, 34 with this key); equal machine code loaded
from artifacts is loaded once. :func:`compile_all` compiles many functions on forked
processes. A function marked :data:`RUNS_ONCE` (a weight's
packing stage, run while compiling) is compiled quickly instead of well
(:func:`~hetero.plugins.llvm_cpu.target.optimise`).

Each phase is timed for ``hetero compile --timings`` (:mod:`hetero.core.timing`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
import ctypes
import ctypes.util
import dataclasses
from dataclasses import dataclass, field
import functools
import hashlib
import multiprocessing
import os
import re
import threading

import llvmlite.binding as llvm

from hetero.plugin import CodegenError, OptionError, timing
from hetero.plugin.tir import Buffer, PrimFunc
from hetero.plugins.llvm_cpu.codegen import Entry, render
from hetero.plugins.llvm_cpu.target import (
    engine_target_machine, host_target_machine, module_text, optimise_text, unrolls,
)

EntryFn = Callable[..., None]

#: The :class:`PrimFunc` attribute that marks a function run once (at compile time):
#: its compile skips the optimisation pipeline.
RUNS_ONCE = "llvm_cpu.runs_once"
#: Fewer distinct functions than this compile in this process: forking workers would
#: cost more than the compiles they share (a fork of a process holding a model's
#: weights takes some milliseconds, a kernel's O3 some tens).
MIN_PARALLEL = 4
#: The environment variable that sets how many processes compile kernels (default:
#: the host's cores, :func:`compile_workers`; 1 compiles in this process).
JOBS_ENV = "HETERO_COMPILE_JOBS"
#: The owner of llvm_cpu's phases in :mod:`hetero.core.timing`.
OWNER = "llvm_cpu"

_CACHE: dict[str, JitModule] = {}
_LOADED: dict[tuple[bytes, tuple[Entry, ...], tuple[Buffer, ...], int], JitModule] = {}
_LOCK = threading.Lock()
_LOADED_LOCK = threading.Lock()  # apart from _LOCK, which a compile holds while it loads
# A variable's name in a repr; not IterVar's or any other class whose name ends alike.
_VAR_NAME = re.compile(r"(?<![\w.])Var\(name='([^'\\]*)'")


@dataclass(frozen=True)
class JitModule:
    """A function's machine code loaded into this process, with callable entry points.

    ``object_code`` is the host object file: saved in an artifact, it is loaded back
    by :func:`load_object` without compiling anything.
    """

    entries: tuple[tuple[Entry, EntryFn], ...]
    workspaces: tuple[Buffer, ...]
    object_code: bytes
    engine: llvm.ExecutionEngine = field(repr=False)
    llvm_ir: str = ""

    @functools.cached_property
    def assembly(self) -> str:
        """The host assembly of the optimised module."""
        if not self.llvm_ir:
            raise CodegenError("this kernel was loaded from machine code: its LLVM IR is not kept")
        return host_target_machine().emit_assembly(llvm.parse_assembly(self.llvm_ir))


def jit_compile(func: PrimFunc) -> JitModule:
    """``func`` compiled for the host, from the cache when an equal function was compiled.

    The cache key is :func:`structural_key`. A function answered from the cache gets
    the machine code of the first one compiled, whose symbols (and, in its LLVM IR,
    name) are that first function's.
    """
    key = structural_key(func)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            found = _CACHE[key] = _compile(func)
        return found


def structural_key(func: PrimFunc) -> str:
    """``func``'s full structural text (its ``repr``: unlike the printed form it records
    every constant's dtype) without its name, its variables renamed ``0, 1, ...`` in
    order of first appearance: functions equal up to those names have one key.

    Renaming every occurrence of a name to the same new one (and different names to
    different ones) changes no loop's meaning, so equal keys mean equal machine code.
    """
    text = repr(dataclasses.replace(func, name=""))
    names: dict[str, int] = {}
    return _VAR_NAME.sub(lambda m: f"Var(name='{names.setdefault(m.group(1), len(names))}'", text)


@functools.cache
def _load_libm() -> None:
    # tanh/erf are libm calls and LLVM lowers exp/log/pow to them; MCJIT resolves
    # symbols from libraries loaded into the process this way.
    llvm.load_library_permanently(ctypes.util.find_library("m") or "libm.so.6")


def compile_workers(cores: int) -> int:
    """How many processes compile kernels on a host of ``cores``: ``$HETERO_COMPILE_JOBS``
    when set, else ``cores``.

    ResNet-50, medians of 3 fresh processes on this project's 2-core AMD EPYC (znver5)
    beside another agent's busy process: 4.07 s serially, 2.73 s on 2 processes (a
    kernel's O3 is tens of milliseconds, a fork of the compiling process one or two).
    """
    text = os.environ.get(JOBS_ENV, "").strip()
    if not text:
        return cores
    try:
        jobs = int(text)
    except ValueError:
        jobs = 0
    if jobs < 1:
        raise OptionError(f"${JOBS_ENV} must be a whole number of processes, at least 1; got {text!r}")
    return jobs


def compile_all(funcs: Iterable[PrimFunc], workers: int) -> None:
    """Compile each of ``funcs`` that the cache lacks, LLVM's part of the work (parse, O3,
    emit) on ``workers`` processes forked from this one; afterwards :func:`jit_compile` of
    any of them is a cache hit, with the same machine code a serial compile makes.

    Processes, not threads: llvmlite serialises every call into LLVM with a lock of its
    own (``llvmlite.binding.ffi``), so threads would only take turns. A fork shares this
    process's initialised LLVM and imports nothing. With one worker, fewer than
    :data:`MIN_PARALLEL` functions to compile, or no fork on this platform, they compile
    here one after another.
    """
    pending: dict[str, PrimFunc] = {}
    for func in funcs:
        key = structural_key(func)
        if key not in _CACHE:
            pending.setdefault(key, func)
    if workers < 2 or len(pending) < MIN_PARALLEL or "fork" not in multiprocessing.get_all_start_methods():
        for func in pending.values():
            jit_compile(func)
        return
    _load_libm()
    workers = min(workers, len(pending))
    try:
        with timing.phase(f"LLVM parse + O3 + emit ({workers} processes)", OWNER), \
                ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            jobs = []
            for key, func in pending.items():
                quick = bool(func.attr(RUNS_ONCE))
                with timing.phase("render LLVM IR", OWNER):
                    rendered = render(func)
                    text = module_text(rendered.module, host_target_machine(quick))
                jobs.append((key, rendered, pool.submit(_build, text, rendered.module.name, quick, unrolls(func))))
            for key, rendered, job in jobs:
                object_code, optimised = job.result()
                loaded = load_object(object_code, rendered.entries, rendered.workspaces, len(rendered.buffers))
                with _LOCK:
                    _CACHE.setdefault(key, dataclasses.replace(loaded, llvm_ir=optimised))
    except BrokenProcessPool:
        # A worker died (killed, out of memory): what it left undone compiles here.
        for func in pending.values():
            jit_compile(func)


def _build(text: str, name: str, quick: bool, unroll: bool) -> tuple[bytes, str]:
    """A worker's compile of module ``name``: its object code and optimised IR."""
    machine = host_target_machine(quick)
    module = optimise_text(text, name, machine, quick, unroll)
    return machine.emit_object(module), str(module)


def _compile(func: PrimFunc) -> JitModule:
    _load_libm()
    quick = bool(func.attr(RUNS_ONCE))
    with timing.phase("render LLVM IR", OWNER):
        rendered = render(func)
    machine = host_target_machine(quick)
    with timing.phase("LLVM parse" if quick else "LLVM parse + O3", OWNER):
        module = optimise_text(module_text(rendered.module, machine), rendered.module.name, machine, quick,
                               unrolls(func))
        text = str(module)
    with timing.phase("LLVM emit object", OWNER):
        object_code = machine.emit_object(module)
    loaded = load_object(object_code, rendered.entries, rendered.workspaces, len(rendered.buffers))
    return dataclasses.replace(loaded, llvm_ir=text)


def load_object(object_code: bytes, entries: tuple[Entry, ...], workspaces: tuple[Buffer, ...],
                n_buffers: int) -> JitModule:
    """Load host machine code into this process and bind its ``entries``; equal code
    with equal entries is loaded once per process.

    Each entry takes ``(lo, hi)`` and ``n_buffers`` pointers (parameters, then
    workspaces).
    """
    key = (hashlib.sha256(object_code).digest(), entries, workspaces, n_buffers)
    with _LOADED_LOCK:
        found = _LOADED.get(key)
        if found is None:
            with timing.phase("MCJIT load", OWNER):
                found = _LOADED[key] = _load(object_code, entries, workspaces, n_buffers)
        return found


def _load(object_code: bytes, entries: tuple[Entry, ...], workspaces: tuple[Buffer, ...],
          n_buffers: int) -> JitModule:
    _load_libm()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), engine_target_machine())
    engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, *([ctypes.c_void_p] * n_buffers))
    bound = []
    for e in entries:
        address = engine.get_function_address(e.symbol)
        if not address:
            raise CodegenError(f"machine code has no entry point {e.symbol}: the artifact is damaged")
        bound.append((e, signature(address)))
    return JitModule(tuple(bound), workspaces, object_code, engine)
