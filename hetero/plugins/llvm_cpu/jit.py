"""Just-in-time compilation for the host: render, optimise at O3, load with MCJIT.

Entry points are called through ctypes ``CFUNCTYPE`` pointers, which release the GIL
for the duration of the call, so stages run truly in parallel on a thread pool.
Compilation is cached per process: functions with the same structure compile once.
"""

from __future__ import annotations

from collections.abc import Callable
import ctypes
import ctypes.util
from dataclasses import dataclass, field
import functools
import threading

import llvmlite.binding as llvm

from hetero.core.ir.tir import PrimFunc
from hetero.plugins.llvm_cpu.codegen import Entry, RenderedModule, render
from hetero.plugins.llvm_cpu.target import host_target_machine, optimise

EntryFn = Callable[..., None]

_CACHE: dict[str, JitModule] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class JitModule:
    """A function compiled into this process: its entry points, callable with addresses."""

    rendered: RenderedModule
    llvm_ir: str
    entries: tuple[tuple[Entry, EntryFn], ...]
    engine: llvm.ExecutionEngine = field(repr=False)

    @functools.cached_property
    def assembly(self) -> str:
        """The host assembly of the optimised module."""
        return host_target_machine().emit_assembly(llvm.parse_assembly(self.llvm_ir))


def jit_compile(func: PrimFunc) -> JitModule:
    """``func`` compiled for the host, from the cache when an equal function was compiled.

    The cache key is the function's full structural text (its ``repr``), which unlike
    the printed form also records every constant's dtype.
    """
    key = repr(func)
    with _LOCK:
        found = _CACHE.get(key)
        if found is None:
            found = _CACHE[key] = _compile(func)
        return found


@functools.cache
def _load_libm() -> None:
    # tanh/erf are libm calls and LLVM lowers exp/log/pow to them; MCJIT resolves
    # symbols from libraries loaded into the process this way.
    llvm.load_library_permanently(ctypes.util.find_library("m") or "libm.so.6")


def _compile(func: PrimFunc) -> JitModule:
    _load_libm()
    rendered = render(func)
    machine = host_target_machine()
    module = optimise(rendered.module, machine)
    text = str(module)
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    signature = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64,
                                 *([ctypes.c_void_p] * len(rendered.buffers)))
    entries = tuple((e, signature(engine.get_function_address(e.symbol))) for e in rendered.entries)
    return JitModule(rendered, text, entries, engine)
