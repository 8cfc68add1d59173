"""Just-in-time compilation for the host: render, optimise at O3, load with MCJIT.

Entry points are called through ctypes ``CFUNCTYPE`` pointers, which release the GIL
for the duration of the call, so stages run truly in parallel on a thread pool.
Compilation is cached per process: functions with the same structure compile once.
"""

from __future__ import annotations

from collections.abc import Callable
import ctypes
import ctypes.util
import dataclasses
from dataclasses import dataclass, field
import functools
import threading

import llvmlite.binding as llvm

from hetero.core.ir.tir import Buffer, PrimFunc
from hetero.errors import CodegenError
from hetero.plugins.llvm_cpu.codegen import Entry, render
from hetero.plugins.llvm_cpu.target import engine_target_machine, host_target_machine, optimise

EntryFn = Callable[..., None]

_CACHE: dict[str, JitModule] = {}
_LOCK = threading.Lock()


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
    object_code = machine.emit_object(module)
    loaded = load_object(object_code, rendered.entries, rendered.workspaces, len(rendered.buffers))
    return dataclasses.replace(loaded, llvm_ir=text)


def load_object(object_code: bytes, entries: tuple[Entry, ...], workspaces: tuple[Buffer, ...],
                n_buffers: int) -> JitModule:
    """Load host machine code into this process and bind its ``entries``.

    Each entry takes ``(lo, hi)`` and ``n_buffers`` pointers (parameters, then
    workspaces).
    """
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
