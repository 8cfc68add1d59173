"""A compiled kernel you call with numpy arrays.

::

    kernel = compile_kernel(func)
    out = kernel.run(X=x, W=w)["Y"]       # outputs allocated and returned
    kernel(x, w, y)                       # every parameter, outputs written in place

Stages run in order. A stage whose outermost loop is PARALLEL is split into
contiguous chunks of that loop (:data:`CHUNKS_PER_THREAD` per thread, so that a
core slowed by other work takes fewer), run concurrently on the native thread pool
(:mod:`~hetero.plugins.llvm_cpu.runtime`), or on a Python one where the runtime has
no port; the chunks of one stage all finish before the next stage starts.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import ctypes
import functools
import os
import threading
from typing import Any

import numpy as np

from hetero.plugin import CodegenError, InputError, as_dtype
from hetero.plugin.schedule import Trace
from hetero.plugin.tir import Buffer, PrimFunc, Store, walk
from hetero.plugins.llvm_cpu.codegen import Entry
from hetero.plugins.llvm_cpu.jit import JitModule, jit_compile, load_object
from hetero.plugins.llvm_cpu.runtime import MAX_CHUNKS, Launch, native_pool

Chunk = tuple[int, int]

#: Chunks a parallel stage is cut into per thread: threads claim them as they come
#: free, so one slowed by other work on its core takes fewer.
CHUNKS_PER_THREAD = 4
#: A range this many times the thread count or shorter is cut into one chunk an
#: iteration: 12 iterations cut into 8 chunks are chunks of 1 and 2, and two threads
#: claiming them could end 7 against 5 (Inception v2's 14x14 convolutions, whose
#: tiles number 8 to 16); single iterations even out to within one.
UNIT_CHUNKS_PER_THREAD = 8

_KERNELS: dict[tuple[str, int], CompiledKernel] = {}
_KERNELS_LOCK = threading.Lock()


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hetero-llvm")


def compile_kernel(func: PrimFunc, num_threads: int | None = None, trace: Trace | None = None) -> CompiledKernel:
    """The kernel of ``func``: the same object for equal functions and thread counts.

    ``trace`` is the schedule that made ``func`` (see :attr:`CompiledKernel.trace`); a
    kernel shared by equal functions keeps the first trace it was given.
    """
    threads = num_threads or os.cpu_count() or 1
    key = (repr(func), threads)
    with _KERNELS_LOCK:
        if key not in _KERNELS:
            _KERNELS[key] = CompiledKernel(func, threads, trace)
        kernel = _KERNELS[key]
        if kernel.trace is None:
            kernel.trace = trace
        return kernel


def chunks(extent: int, parts: int) -> list[Chunk]:
    """``range(extent)`` cut into at most ``parts`` contiguous chunks of near-equal size."""
    parts = max(1, min(parts, extent))
    bounds = [extent * k // parts for k in range(parts + 1)]
    return [(bounds[k], bounds[k + 1]) for k in range(parts)]


class CompiledKernel:
    """``func`` compiled for the host CPU.

    ``num_threads`` (default: the CPU count) is how many chunks a PARALLEL stage is
    cut into. After each call, :attr:`last_launches` lists, per stage, the chunks
    that were actually run.

    :attr:`trace` is the schedule that made the function, as recorded on the lowered
    function it started from (None if not given; a kernel that functions equal up to
    naming share keeps the first one's): ``trace.apply(lowered)`` replays it, and a
    tuner varies its decisions. Hoisting constant-only stages and canonical
    renaming, which follow the schedule, are not part of it. It is saved in
    :meth:`image`, so a loaded kernel keeps it.
    """

    def __init__(self, func: PrimFunc, num_threads: int | None = None, trace: Trace | None = None) -> None:
        written = {s.buffer for s in walk(func.body) if isinstance(s, Store)}
        self._setup(func.name, func.params, tuple(b for b in func.params if b in written),
                    jit_compile(func), num_threads)
        self.func: PrimFunc | None = func
        self.trace = trace

    @classmethod
    def from_image(cls, image: dict[str, Any], object_code: bytes,
                   num_threads: int | None = None) -> CompiledKernel:
        """A kernel rebuilt from :meth:`image` and its machine code, without compiling."""
        params = tuple(Buffer(n, tuple(s), as_dtype(d)) for n, s, d in image["params"])
        workspaces = tuple(Buffer(n, tuple(s), as_dtype(d)) for n, s, d in image["workspaces"])
        entries = tuple(Entry(sym, ext, par) for sym, ext, par in image["entries"])
        module = load_object(object_code, entries, workspaces, len(params) + len(workspaces))
        kernel = cls.__new__(cls)
        kernel._setup(image["name"], params, tuple(b for b in params if b.name in image["outputs"]),
                      module, num_threads)
        kernel.func = None
        # Images saved before kernels kept their trace have none.
        kernel.trace = None if image.get("trace") is None else Trace.from_json(image["trace"])
        return kernel

    def image(self) -> dict[str, Any]:
        """What :meth:`from_image` needs besides the machine code, as JSON-ready data."""
        def spec(b: Buffer) -> list[Any]:
            return [b.name, list(b.shape), b.dtype.name]

        return {
            "name": self.name,
            "params": [spec(b) for b in self.params],
            "outputs": [b.name for b in self.outputs],
            "workspaces": [spec(b) for b in self.module.workspaces],
            "entries": [[e.symbol, e.extent, e.parallel] for e, _ in self.module.entries],
            "trace": None if self.trace is None else self.trace.to_json(),
        }

    def _setup(self, name: str, params: tuple[Buffer, ...], outputs: tuple[Buffer, ...],
               module: JitModule, num_threads: int | None) -> None:
        self.name = name
        self.params = params
        self.outputs: tuple[Buffer, ...] = outputs
        self.inputs: tuple[Buffer, ...] = tuple(b for b in params if b not in outputs)
        self.module: JitModule = module
        self.num_threads = num_threads or os.cpu_count() or 1
        self.last_launches: tuple[tuple[str, tuple[Chunk, ...]], ...] = ()
        #: Per stage, its symbol and the chunks every call cuts its range into.
        self.launch_plan: tuple[tuple[str, tuple[Chunk, ...]], ...] = tuple(
            (e.symbol, tuple(chunks(e.extent, self._chunk_count(e)))) for e, _ in module.entries)
        self._pool = native_pool()
        self._packed: tuple[int, ...] = ()
        if self._pool is not None:
            self._pool.ensure(self.num_threads)
            self._packed = tuple(module.engine.get_function_address(e.packed) for e, _ in module.entries)
            if not all(self._packed):
                raise CodegenError(f"kernel {name}: its machine code has no packed entry points (it was "
                                   "built by an older hetero); recompile the model")

    def launches(self, arguments: int) -> list[Launch]:
        """The native runtime's records of one call, each stage's packed entry reading its
        buffers from the pointer array at address ``arguments``."""
        return [Launch(packed, arguments, entry.extent, len(parts))
                for packed, (entry, _), (_, parts) in zip(self._packed, self.module.entries, self.launch_plan)]

    def _chunk_count(self, entry: Entry) -> int:
        """How many pieces a call cuts ``entry``'s range into."""
        if not entry.parallel or self.num_threads == 1:
            return 1
        if entry.extent <= UNIT_CHUNKS_PER_THREAD * self.num_threads:
            return entry.extent
        return max(1, min(entry.extent, CHUNKS_PER_THREAD * self.num_threads, MAX_CHUNKS))

    @property
    def llvm_ir(self) -> str:
        """The optimised LLVM IR."""
        return self.module.llvm_ir

    @property
    def assembly(self) -> str:
        """The host assembly."""
        return self.module.assembly

    def run(self, **arrays: np.ndarray) -> dict[str, np.ndarray]:
        """Run with inputs by name; outputs may be given (written in place) or are
        allocated. Returns every output by name."""
        names = {b.name for b in self.params}
        unknown = sorted(set(arrays) - names)
        if unknown:
            raise InputError(f"kernel {self.name}: no parameter named {unknown[0]!r}; "
                             f"parameters are {sorted(names)}")
        missing = [b.name for b in self.inputs if b.name not in arrays]
        if missing:
            raise InputError(f"kernel {self.name}: input {missing[0]} is missing")
        full = {b.name: arrays[b.name] if b.name in arrays else np.zeros(b.shape, b.dtype)
                for b in self.params}
        self(*(full[b.name] for b in self.params))
        return {b.name: full[b.name] for b in self.outputs}

    def __call__(self, *arrays: np.ndarray) -> None:
        """Run with every parameter in order (inputs, then outputs); outputs are
        written in place, so they must be C-contiguous and writeable."""
        params = self.params
        if len(arrays) != len(params):
            raise InputError(f"kernel {self.name} takes {len(params)} arrays "
                             f"({', '.join(b.name for b in params)}), got {len(arrays)}")
        checked = [self._check(b, a) for b, a in zip(params, arrays)]
        self._check_overlap(checked)
        self.launch(checked)

    def launch(self, arrays: list[np.ndarray]) -> None:
        """Run on ``arrays`` as :meth:`__call__` does, without its checks: for callers that
        built them to the parameters' shapes and dtypes, C-contiguous, outputs fresh."""
        spaces = [np.zeros(max(w.size, 1), w.dtype) for w in self.module.workspaces]
        pointers = [a.ctypes.data for a in arrays] + [w.ctypes.data for w in spaces]
        if self._pool is not None:
            self._pool.ensure(self.num_threads)
            table = (ctypes.c_void_p * max(len(pointers), 1))(*pointers)
            for record in self.launches(ctypes.addressof(table)):
                self._pool.parallel(record.fn, record.args, record.extent, record.chunks)
        else:
            for (_, fn), (_, parts) in zip(self.module.entries, self.launch_plan):
                if len(parts) == 1:
                    fn(*parts[0], *pointers)
                    continue
                # The calling thread takes the first chunk itself: one hand-off fewer.
                futures = [_pool(self.num_threads).submit(fn, lo, hi, *pointers) for lo, hi in parts[1:]]
                fn(*parts[0], *pointers)
                for future in futures:
                    future.result()
        self.last_launches = self.launch_plan

    def _check(self, buffer: Buffer, array: np.ndarray) -> np.ndarray:
        where = f"kernel {self.name}: {buffer.name}"
        if not isinstance(array, np.ndarray):
            raise InputError(f"{where} must be a numpy array, got {type(array).__name__}")
        if array.shape != buffer.shape or array.dtype != buffer.dtype:
            raise InputError(f"{where} must be {buffer.dtype}{list(buffer.shape)}, "
                             f"got {array.dtype}{list(array.shape)}")
        if buffer in self.outputs:
            if not (array.flags.c_contiguous and array.flags.writeable):
                raise InputError(f"{where} is written in place, so it must be a C-contiguous, "
                                 "writeable array; pass np.ascontiguousarray(...) or a fresh array")
            return array
        return np.asarray(array, order="C")  # ascontiguousarray would make a 0-d array 1-d

    def _check_overlap(self, arrays: list[np.ndarray]) -> None:
        # Buffers are noalias in the generated code: a written array that shares memory
        # with another argument would be read and written through two pointers.
        params = self.params
        for b, a in zip(params, arrays):
            if b not in self.outputs:
                continue
            for other, x in zip(params, arrays):
                if other is not b and np.may_share_memory(a, x):
                    raise InputError(f"kernel {self.name}: output {b.name} shares memory with "
                                     f"{other.name}; pass a separate array")

