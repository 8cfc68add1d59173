"""Tensor IR → NVVM IR (LLVM's NVPTX dialect) → PTX: one kernel per :class:`PrimFunc`.

The function is verified and legalised (:data:`NVPTX_NATIVE`: NVPTX selects
``llvm.minimum``/``llvm.maximum`` as ``min.NaN``/``max.NaN`` from sm_80), then
emitted with the shared emitters of :mod:`hetero.core.codegen`; this module is the
GPU's part:

- the kernel ``void @name(ptr addrspace(1) noalias ... params)`` with the
  ``ptx_kernel`` calling convention (a PTX ``.entry``);
- a loop bound to ``blockIdx.*``/``threadIdx.*`` is no loop: its variable is the
  block or thread index (``llvm.nvvm.read.ptx.sreg.*``), and its extent is the launch's
  dimension on that axis (the verifier makes every loop of an axis share its extent,
  so the launch is exactly the bound extents and needs no guard);
- code inside the blocks but outside the thread loops runs in every thread of a block,
  as the interpreter runs it once per block: a store there is guarded to thread 0, and
  the statements of such a sequence are separated by barriers (a serial loop around
  thread loops ends each iteration with one), since the interpreter finishes each
  thread loop before the next statement;
- ``Barrier("shared")`` is ``llvm.nvvm.barrier.cta.sync.aligned.all(0)`` (``bar.sync 0``);
- an ``Allocate`` in scope ``shared`` is an ``addrspace(3)`` array (it must sit
  inside the block loops and outside the thread loops), ``local`` (and ``global``
  scratch) an ``alloca`` in the thread (it must sit inside the thread loops);
- intrinsic functions come from libdevice (``__nv_expf``, ``__nv_tanh``, ...), float16
  through float32;
- an UNROLLED loop carries ``llvm.loop.unroll.full`` (and a loop around one
  ``llvm.loop.unroll.disable``), as on the CPU;
- a VECTORIZED loop of at most :data:`VECTOR_BYTES` lanes inside the thread loops is
  unrolled here, one copy of its body a lane. A thread has no SIMD lanes to vectorise
  its arithmetic into; what pays is memory: one ``ld.global.v4.f32`` instead of four
  loads. So :func:`lane_views` rewrites, before legalisation, each access whose
  element offset :func:`lanes` proves to be ``base + lane`` onto a flat view of its
  buffer, indexed ``base + lane`` (the lanes share ``base``, which LLVM computes once);
  where it also proves ``base`` a multiple of the loop's width (the width a power of two
  of at most 16 bytes), the lanes' accesses promise their alignment (lane 0 the whole
  vector's, through :meth:`ExprEmitter.align`), and NVPTX's load/store vectoriser
  merges them into ``ld``/``st.global.v4`` (``.shared`` for shared memory). Every base is
  16-byte aligned: a parameter is a whole ``cuMemAlloc`` allocation (256 bytes; a view
  at run time is a reshape of one, never an offset), a shared array is aligned 16
  here, a thread's ``alloca`` 16 by the shared emitter. An access that is not proven
  stays a scalar access of its element's alignment, correct either way.

A construct it does not map (an ``Evaluate``, another hardware axis, a store outside
the grid, several grids in one function) is a :class:`CodegenError` naming it. PTX is
emitted in a child process (:mod:`.libdevice` run as a script): whatever LLVM cannot
select aborts the child, and the error names the kernel and the child's stderr. The
child costs about 0.12 s a kernel over emitting in process (a Python start and the
llvmlite import; it never imports hetero); linking libdevice costs 0.2 s more where a
kernel calls it. Validating the IR instead would have to know every construct each
LLVM version cannot select; the child holds for all of them.
"""

from __future__ import annotations

from collections.abc import Iterator
import dataclasses
from dataclasses import dataclass
import json
import math
import re
import subprocess
import sys

from llvmlite import ir
import numpy as np

from hetero.plugin import CodegenError
from hetero.plugin.codegen import ExprEmitter, StmtEmitter
from hetero.plugin.schedule import children
from hetero.plugin.tir import (
    Allocate, Barrier, Binary, Buffer, Cast, Const, Evaluate, Expr, For, ForKind, INDEX, IfThenElse, Load, Native,
    PrimFunc, Seq, Stmt, StmtExprMutator, Store, Var, binary, cast, const, eq, exprs_of, flat_index, legalize,
    logical_and, verify_func, walk,
)
from hetero.plugins.cuda import libdevice

#: NVPTX maps IEEE 754-2019 minimum/maximum (min.NaN/max.NaN, sm_80 and later).
NVPTX_NATIVE = Native(ieee_minmax=True)
#: PTX ISA 7.8: the first with sm_90, and read by every ptxas since CUDA 11.8.
DEFAULT_PTX_VERSION = 78
_AXES = tuple(f"{level}.{d}" for level in ("blockIdx", "threadIdx") for d in "xyz")
_SREG = {"blockIdx": "ctaid", "threadIdx": "tid"}
#: The most bytes one access of a thread moves (``ld.global.v4.f32``, ``.v2.f64``,
#: ``.v8.f16`` through ``.v4.b32``): the widest vector loop the renderer unrolls into lanes.
VECTOR_BYTES = 16
I32 = ir.IntType(32)
I64 = ir.IntType(64)
_GLOBAL = ir.PointerType(addrspace=1)
# libdevice's functions of one argument (float32 adds an "f"); pow takes two.
_LIBDEVICE = {"exp": "exp", "log": "log", "sqrt": "sqrt", "abs": "fabs", "floor": "floor", "ceil": "ceil",
              "round_even": "rint", "sin": "sin", "cos": "cos", "tanh": "tanh", "erf": "erf", "expm1": "expm1",
              "log1p": "log1p", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
              "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "pow": "pow"}


@dataclass(frozen=True)
class LaunchConfig:
    """How to launch a kernel: ``grid`` blocks and ``block`` threads (x, y, z), and the
    static shared memory each block holds."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class RenderedKernel:
    """A function rendered as one PTX kernel: its entry ``name``, the ``ptx`` and the NVVM
    IR it came from, how to launch it, and the buffers its parameters take, in order."""

    name: str
    arch: str
    ptx: str
    llvm_ir: str
    launch: LaunchConfig
    params: tuple[Buffer, ...]

    @property
    def shared_bytes(self) -> int:
        return self.launch.shared_bytes


def render_ptx(func: PrimFunc, arch: str = "sm_80", ptx_version: int = DEFAULT_PTX_VERSION) -> RenderedKernel:
    """Render a verified ``func`` as a PTX kernel for ``arch`` at PTX ISA ``ptx_version``
    (78 for 7.8). CodegenError for a construct it does not map, for a missing libdevice
    when the kernel calls one of its functions, and when LLVM fails on the kernel."""
    verify_func(func)
    where = f"func {func.name}"
    viewed, views = lane_views(func)
    legal = legalize(viewed, NVPTX_NATIVE)
    launch = _launch(legal, where)
    name = re.sub(r"[^A-Za-z0-9_]", "_", func.name)
    module = ir.Module(name=name)
    module.triple = libdevice.TRIPLE
    emitter = _KernelEmitter(_NvptxExprEmitter(module, where, views), launch)
    emitter.kernel(name, legal)
    llvm_ir = str(module)
    ptx = emit_ptx_in_child(llvm_ir, name, arch, ptx_version, uses_libdevice=emitter.em.uses_libdevice)
    version = re.search(r"^\.version (\d+)\.(\d+)", ptx, re.MULTILINE)
    if version is None or int(version.group(1)) * 10 + int(version.group(2)) != ptx_version:
        raise CodegenError(f"{where}: LLVM emitted PTX {version.group(0) if version else 'without .version'} "
                           f"instead of ISA {ptx_version // 10}.{ptx_version % 10}; choose a ptx_version "
                           "this LLVM supports")
    return RenderedKernel(name, arch, ptx, llvm_ir, launch, func.params)


def _launch(func: PrimFunc, where: str) -> LaunchConfig:
    """The launch dimensions from the thread-bound loops' extents, and the shared bytes."""
    extents: dict[str, int] = {}
    grids = 0
    for s, outer in _bound_loops(func.body, ()):
        if s.thread_axis not in _AXES:
            raise CodegenError(f"{where}: loop {s.var.name} is bound to {s.thread_axis}, which is not a CUDA "
                               f"axis ({', '.join(_AXES)})")
        extents[s.thread_axis] = s.extent
        if s.thread_axis.startswith("blockIdx") and not any(a.startswith("blockIdx") for a in outer):
            grids += 1
    if grids > 1:
        raise CodegenError(f"{where}: {grids} grids (loop nests bound to blockIdx) one after the other need a "
                           "grid-wide barrier between them; render one kernel per stage")
    shared = sum(s.buffer.nbytes for s in walk(func.body) if isinstance(s, Allocate) and s.buffer.scope == "shared")

    return LaunchConfig(_dims(extents, "blockIdx"), _dims(extents, "threadIdx"), shared)


def _dims(extents: dict[str, int], level: str) -> tuple[int, int, int]:
    """The (x, y, z) extents of ``level`` (1 where no loop is bound)."""
    return extents.get(f"{level}.x", 1), extents.get(f"{level}.y", 1), extents.get(f"{level}.z", 1)


def _bound_loops(stmt: Stmt, outer: tuple[str, ...]) -> Iterator[tuple[For, tuple[str, ...]]]:
    """Every thread-bound loop under ``stmt`` with the axes bound around it."""
    if isinstance(stmt, For) and stmt.kind is ForKind.THREAD_BINDING:
        yield stmt, outer
        outer = (*outer, stmt.thread_axis or "")
    for child in children(stmt):
        yield from _bound_loops(child, outer)


@dataclass(frozen=True)
class Lanes:
    """An integer expression over the lanes of a vector loop: ``base + step * lane`` for
    every ``lane`` in ``[0, width)``, with ``base`` free of the lane and a multiple of
    ``multiple`` (0 when ``base`` is 0)."""

    base: Expr
    step: int
    multiple: int


def lanes(e: Expr, lane: Var, width: int) -> Lanes | None:
    """``e`` as :class:`Lanes` of ``lane`` over ``[0, width)``, or None where that is not
    shown: the lane under an operation other than ``+``, ``-``, a product with a literal,
    a value-preserving cast, or a floored division or remainder by a positive literal
    ``d`` that no two lanes straddle. The last is the fused index's case: with ``base`` a
    multiple of ``g = gcd(multiple, d)``, ``base mod d`` is at most ``d - g``, so while
    ``step * (width - 1) < g`` every lane has ``base // d`` as quotient and ``base mod d
    + step * lane`` as remainder."""
    if e == lane:
        return Lanes(const(0, e.dtype), 1, 0)
    if isinstance(e, Const) and e.dtype.kind in "iu":
        return Lanes(e, 0, abs(int(e.value)))
    if isinstance(e, Cast) and e.a.dtype.kind in "iu" and np.can_cast(e.a.dtype, e.dtype, "safe"):
        inner = lanes(e.a, lane, width)
        if inner is None:
            return None
        return Lanes(e if inner.base is e.a else cast(inner.base, e.dtype), inner.step, inner.multiple)
    if isinstance(e, Binary) and e.dtype.kind in "iu" and e.op in ("add", "sub", "mul", "floordiv", "mod"):
        a, b = lanes(e.a, lane, width), lanes(e.b, lane, width)
        if a is None or b is None:
            return None
        if e.op == "add":
            step, multiple = a.step + b.step, math.gcd(a.multiple, b.multiple)
        elif e.op == "sub":
            step, multiple = a.step - b.step, math.gcd(a.multiple, b.multiple)
        elif e.op == "mul":
            k = _literal(e.b) if a.step else _literal(e.a) if b.step else 1
            if k is None:
                return None  # the lane times a variable: no constant step
            step, multiple = (a.step if a.step else b.step) * k, a.multiple * b.multiple
        else:
            d = _literal(e.b)
            if d is None or d <= 0 or b.step:
                return None
            if a.step:
                g = math.gcd(a.multiple, d)
                if a.step < 0 or a.step * (width - 1) >= g:
                    return None  # some lanes would straddle a multiple of d
            if e.op == "floordiv":
                step, multiple = 0, a.multiple // d if a.multiple % d == 0 else 1
            else:
                step, multiple = a.step, math.gcd(a.multiple, d)
        base = e if a.base is e.a and b.base is e.b else binary(e.op, a.base, b.base)
        return Lanes(base, step, multiple)
    if any(x == lane for x in exprs_of(e)):
        return None
    return Lanes(e, 0, 1)


def _literal(e: Expr) -> int | None:
    """The value of an integer literal, None for anything else."""
    return int(e.value) if isinstance(e, Const) and e.dtype.kind in "iu" else None


@dataclass(frozen=True)
class LaneView:
    """A flat view of ``buffer`` that the lanes of the vector loop over ``lane`` access at
    ``base + lane``, with ``base`` a multiple of ``width`` (1 where that is not shown)."""

    buffer: Buffer
    lane: Var
    width: int


def lane_views(func: PrimFunc) -> tuple[PrimFunc, dict[Buffer, LaneView]]:
    """``func`` with every access of a VECTORIZED loop (of at most :data:`VECTOR_BYTES`
    lanes) that is contiguous in the loop's lane read or written through a flat view of
    its buffer at ``base + lane``, and the views. The views mean what the accesses did:
    the view's element ``base + lane`` is the buffer's element the access named."""
    mutator = _LaneViewer()
    body = mutator.visit_stmt(func.body)
    return (func if body is func.body else dataclasses.replace(func, body=body)), mutator.views


class _LaneViewer(StmtExprMutator):
    """Rewrites the contiguous accesses of the vector loops it passes through."""

    def __init__(self) -> None:
        self.views: dict[Buffer, LaneView] = {}
        self.loops: list[For] = []

    def visit_For(self, s: For) -> Stmt:
        if s.kind is not ForKind.VECTORIZED or s.extent > VECTOR_BYTES:
            return super().visit_For(s)
        self.loops.append(s)
        out = super().visit_For(s)
        self.loops.pop()
        return out

    def visit_Load(self, e: Load) -> Expr:
        e = super().visit_Load(e)
        viewed = self._view(e.buffer, e.indices)
        return e if viewed is None else Load(viewed[0], viewed[1], e.dtype)

    def visit_Store(self, s: Store) -> Stmt:
        s = super().visit_Store(s)
        viewed = self._view(s.buffer, s.indices)
        return s if viewed is None else dataclasses.replace(s, buffer=viewed[0], indices=viewed[1])

    def _view(self, buffer: Buffer, indices: tuple[Expr, ...]) -> tuple[Buffer, tuple[Expr, ...]] | None:
        """The view and index of ``buffer[indices]`` in the innermost vector loop, or None
        where the access is not contiguous in its lane (or there is no vector loop)."""
        if not self.loops or buffer in self.views:
            return None
        loop = self.loops[-1]
        width = loop.extent
        form = lanes(flat_index(buffer, tuple(cast(i, INDEX) for i in indices)), loop.var, width)
        if form is None or form.step != 1:
            return None
        vector = (width & (width - 1) == 0 and width * buffer.dtype.itemsize <= VECTOR_BYTES
                  and form.multiple % width == 0)
        view = Buffer(f"{buffer.name}.lanes{width if vector else 1}.{loop.var.name}", (buffer.size,),
                      buffer.dtype, buffer.scope)
        self.views[view] = LaneView(buffer, loop.var, width if vector else 1)
        return view, (form.base + loop.var,)


def vector_accesses(loop: For) -> bool:
    """Whether every access in ``loop`` (a loop of at most :data:`VECTOR_BYTES` lanes) that
    its variable moves is one the renderer makes a vector access: contiguous in the lane,
    its base a multiple of the extent, the lanes together 16 bytes at most. A schedule
    asks this before it vectorises a loop for the memory's sake."""
    width = loop.extent
    if width < 2 or width & (width - 1) or width > VECTOR_BYTES:
        return False
    accesses: list[tuple[Buffer, tuple[Expr, ...]]] = []
    for s in walk(loop.body):
        if isinstance(s, Store):
            accesses.append((s.buffer, s.indices))
        for top in _exprs_of_stmt(s):
            accesses += [(e.buffer, e.indices) for e in exprs_of(top) if isinstance(e, Load)]
    for buffer, indices in accesses:
        form = lanes(flat_index(buffer, tuple(cast(i, INDEX) for i in indices)), loop.var, width)
        if form is None or form.step not in (0, 1):
            return False
        if form.step and (form.multiple % width or width * buffer.dtype.itemsize > VECTOR_BYTES):
            return False
    return True


def _exprs_of_stmt(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement holds itself (not those of the statements in it)."""
    if isinstance(s, Store):
        return (*s.indices, s.value)
    if isinstance(s, IfThenElse):
        return (s.cond,)
    if isinstance(s, Evaluate):
        return (s.call,)
    return ()


def emit_ptx_in_child(llvm_ir: str, name: str, arch: str, ptx_version: int, uses_libdevice: bool) -> str:
    """The PTX of ``llvm_ir``, emitted by :mod:`.libdevice` in a child process."""
    lib = libdevice.find_libdevice() if uses_libdevice else None
    if uses_libdevice and lib is None:
        raise CodegenError(f"kernel {name} calls libdevice functions, and no libdevice.10.bc was found; "
                           "install CUDA or pip install nvidia-cuda-nvcc (the cuda extra), or set CUDA_HOME")
    request = json.dumps({"llvm_ir": llvm_ir, "arch": arch, "ptx_version": ptx_version,
                          "libdevice": str(lib) if lib else None, "kernels": [name]})
    done = subprocess.run([sys.executable, libdevice.__file__], input=request, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise CodegenError(f"kernel {name}: LLVM's NVPTX target failed on it (exit status {done.returncode}): "
                           f"{tail}")
    return done.stdout


class _NvptxExprEmitter(ExprEmitter):
    """The shared emitter with libdevice's math functions."""

    def __init__(self, module: ir.Module, where: str, views: dict[Buffer, LaneView]) -> None:
        super().__init__(module, where, NVPTX_NATIVE)
        self.uses_libdevice = False
        self.views = views
        #: The lane each unrolled vector loop's copy of its body is rendering.
        self.lane_of: dict[Var, int] = {}

    def address(self, buffer: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        view = self.views.get(buffer)
        if view is None:
            return super().address(buffer, indices)
        base = self.pointers.get(view.buffer)
        if base is None:
            raise CodegenError(f"{self.where}: buffer {view.buffer.name} is not in scope; verify the function")
        return self.builder.gep(base, [self.emit(indices[0])], inbounds=True,
                                source_etype=self.type_of(buffer.dtype, in_memory=True))

    def align(self, buffer: Buffer, indices: tuple[Expr, ...]) -> int:
        # A view's element base + k, with base a multiple of the width: its address is
        # k elements past a multiple of the vector's bytes (and every base is aligned 16).
        view = self.views.get(buffer)
        size = buffer.dtype.itemsize
        if view is None or view.lane not in self.lane_of:
            return size
        k = self.lane_of[view.lane]
        return view.width * size if k == 0 else math.gcd(view.width * size, k * size)

    def math_call(self, func: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value:
        if func not in _LIBDEVICE:
            raise CodegenError(f"{self.where}: intrinsic {func} of {dtype} has no NVPTX rendering (libdevice "
                               "has none)")
        bld, f32 = self.builder, ir.FloatType()
        half = dtype.itemsize == 2
        wide = [bld.fpext(a, f32) for a in args] if half else args
        ty = wide[0].type
        symbol = f"__nv_{_LIBDEVICE[func]}{'' if dtype.itemsize == 8 else 'f'}"
        self.uses_libdevice = True
        out = bld.call(self.declare(symbol, ty, [a.type for a in wide]), wide)
        return bld.fptrunc(out, args[0].type) if half else out


class _KernelEmitter(StmtEmitter):
    """Renders a legalised function as one kernel of ``launch``."""

    em: _NvptxExprEmitter

    def __init__(self, em: _NvptxExprEmitter, launch: LaunchConfig) -> None:
        super().__init__(em)
        self.launch = launch
        self.launched = {f"{level}.{d}" for level, dims in (("blockIdx", launch.grid), ("threadIdx", launch.block))
                         for d, n in zip("xyz", dims) if n > 1}
        self.bound: set[str] = set()
        self._indices: dict[str, ir.Value] = {}

    def kernel(self, name: str, func: PrimFunc) -> None:
        """Emit ``func`` as the kernel ``name``."""
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [_GLOBAL] * len(func.params)), name)
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        for arg, buffer in zip(fn.args, func.params):
            arg.name = buffer.name
            arg.add_attribute("noalias")
        self.em.pointers = dict(zip(func.params, fn.args))
        self.begin_function(fn)
        self.stmt(func.body)
        self.end_function()

    def pointer_type(self, scope: str) -> ir.PointerType:
        return ir.PointerType(addrspace={"global": 1, "shared": 3}.get(scope, 0))

    def allocate(self, buffer: Buffer) -> ir.Value:
        # The interpreter gives an allocation one copy per run of its Allocate: a thread's
        # own inside the thread loops, one per block between the block and thread loops.
        # The GPU's memory is per thread (alloca) or per block (shared): each must sit where
        # the two agree.
        outside = sorted(a for a in self.launched if a not in self.bound)
        if buffer.scope != "shared":
            if outside:
                raise CodegenError(f"{self.em.where}: {buffer.scope} buffer {buffer.name} is allocated outside "
                                   f"the loop bound to {outside[0]}, so its threads would share it; allocate "
                                   "it inside the thread loops, or in scope 'shared' for the block")
            return super().allocate(buffer)
        threads = [a for a in self.bound if a.startswith("threadIdx")]
        blocks = [a for a in outside if a.startswith("blockIdx")]
        if threads or blocks:
            where = f"inside the loop bound to {threads[0]}" if threads else f"outside the loop bound to {blocks[0]}"
            raise CodegenError(f"{self.em.where}: shared buffer {buffer.name} is allocated {where}; a block's "
                               "shared memory is allocated inside the block loops and outside the thread loops")
        array = ir.ArrayType(self.em.type_of(buffer.dtype, in_memory=True), buffer.size)
        name = self.module.get_unique_name(f"shared.{buffer.name}")
        var = ir.GlobalVariable(self.module, array, name, addrspace=3)
        var.linkage = "internal"
        var.align = 16
        var.initializer = ir.Constant(array, ir.Undefined)
        # The address of its first element, as the emitter indexes every buffer's base.
        return var.gep([ir.Constant(I32, 0), ir.Constant(I32, 0)])

    def _index(self, axis: str) -> ir.Value:
        """The ``i64`` block or thread index on ``axis``, read once in the entry block."""
        if axis not in self._indices:
            level, d = axis.split(".")
            sreg = self.em.declare(f"llvm.nvvm.read.ptx.sreg.{_SREG[level]}.{d}", I32, [])
            self._indices[axis] = self.allocas.zext(self.allocas.call(sreg, []), I64, name=axis)
        return self._indices[axis]

    def _thread_level(self) -> bool:
        """Whether every launched thread axis is bound here (code runs once per thread)."""
        return all(a in self.bound for a in self.launched if a.startswith("threadIdx"))

    def loop_hints(self, s: For) -> list[ir.values.MDValue]:
        if s.kind is ForKind.UNROLLED:
            return [self._hint("llvm.loop.unroll.full")]
        if any(isinstance(x, For) and x.kind is ForKind.UNROLLED for x in walk(s.body)):
            # The schedule unrolled what pays (a register tile, the K steps between two
            # barriers): unrolling the loops around it only multiplies code.
            return [self._hint("llvm.loop.unroll.disable")]
        return []

    def _hint(self, name: str, *values: ir.Value) -> ir.values.MDValue:
        return self.module.add_metadata([ir.MetaDataString(self.module, name), *values])

    def _lanes(self, s: For) -> None:
        """A vector loop as one copy of its body a lane, the lane a constant; a guard
        around the body that no lane changes (a split's bound: it reads neither the lane
        nor memory a lane may write) goes around the copies, so they share one block
        and their accesses can merge."""
        body = s.body
        if isinstance(body, IfThenElse) and not any(x == s.var or isinstance(x, Load)
                                                    for x in exprs_of(body.cond)):
            inner = None if body.otherwise is None else dataclasses.replace(s, body=body.otherwise)
            self.visit_IfThenElse(IfThenElse(body.cond, dataclasses.replace(s, body=body.then), inner))
            return
        self.check_loop(s)
        for k in range(s.extent):
            self.em.env[s.var] = ir.Constant(I64, k)
            self.em.lane_of[s.var] = k
            self.em.forget()
            self.stmt(s.body)
        del self.em.env[s.var], self.em.lane_of[s.var]
        self.em.forget()

    def visit_For(self, s: For) -> None:
        if s.kind is ForKind.VECTORIZED and s.extent <= VECTOR_BYTES and self._thread_level():
            self._lanes(s)
            return
        if s.kind is not ForKind.THREAD_BINDING:
            if self._thread_level() or not any(isinstance(x, For) and x.kind is ForKind.THREAD_BINDING
                                               for x in walk(s.body)):
                super().visit_For(s)
                return
            # Each iteration's thread loops finish before the next iteration's start.
            super().visit_For(dataclasses.replace(s, body=Seq((s.body, Barrier("shared")))))
            return
        axis = s.thread_axis or ""
        self.em.env[s.var] = self._index(axis)
        self.bound.add(axis)
        self.em.forget()
        self.stmt(s.body)
        self.bound.discard(axis)
        del self.em.env[s.var]
        self.em.forget()

    def visit_Seq(self, s: Seq) -> None:
        if self._thread_level():
            super().visit_Seq(s)
            return
        for k, part in enumerate(s.stmts):
            if k and not isinstance(part, Barrier) and not isinstance(s.stmts[k - 1], Barrier):
                self.visit_Barrier(Barrier("shared"))
            self.stmt(part)

    def visit_Store(self, s: Store) -> None:
        missing = sorted(a for a in self.launched if a not in self.bound)
        grid = [a for a in missing if a.startswith("blockIdx")]
        if grid:
            raise CodegenError(f"{self.em.where}: the store to {s.buffer.name} sits outside the loop bound to "
                               f"{grid[0]}, so every block would run it; move it into the grid")
        if not missing:
            super().visit_Store(s)
            return
        first: Expr | None = None
        for axis in missing:
            var = Var(f"first.{axis}")
            self.em.env[var] = self._index(axis)
            test = eq(var, 0)
            first = test if first is None else logical_and(first, test)
        assert first is not None
        self.bound.update(missing)  # the guarded store runs in one thread: thread level
        self.visit_IfThenElse(IfThenElse(first, s))
        self.bound.difference_update(missing)

    def visit_Barrier(self, s: Barrier) -> None:
        if s.scope != "shared":
            raise CodegenError(f"{self.em.where}: Barrier({s.scope!r}) has no NVPTX rendering; only the "
                               "block's shared memory has a barrier (Barrier('shared'))")
        sync = self.em.declare("llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [I32])
        self.em.builder.call(sync, [ir.Constant(I32, 0)])

    def visit_Evaluate(self, s: Evaluate) -> None:
        raise CodegenError(f"{self.em.where}: an Evaluate statement (a call of {s.call.func} made for its "
                           "effect) has no NVPTX rendering")
