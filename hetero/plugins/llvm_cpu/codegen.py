"""Tensor IR → LLVM IR: one module per :class:`PrimFunc`, one entry point per stage.

The function is legalised first (:func:`hetero.core.ir.tir.legalize.legalize`, with
:data:`.exprs.CPU_NATIVE`) and emitted with the shared emitters of
:mod:`hetero.core.codegen`; this module is the CPU's part: stages and their calling
convention, parallel ranges, loop hints, heap workspaces, the reduction's
reassociation.

The function's top level is cut into stages (each top-level ``Block`` or statement).
Each stage becomes an entry ``void @<func>_<k>_<stage>(i64 lo, i64 hi, ptr noalias
... buffers)``: when the stage's outermost loop is PARALLEL the entry runs only
iterations ``[lo, hi)`` of it, so the runtime can hand chunks to threads; other
stages ignore the range and run whole. Allocations at the top level outlive a stage,
so they become *workspaces*: extra buffers the caller provides after the parameters.
A serial wrapper ``void @<func>(ptr ... params)`` runs every stage in order with heap
workspaces, for callers of an ahead-of-time object.

Loop kinds: VECTORIZED loops carry ``llvm.loop.vectorize.enable`` and a width hint,
UNROLLED loops ``llvm.loop.unroll.full`` (and loops around one ``llvm.loop.unroll.disable``); SERIAL and PIPELINED loops are plain; a
PARALLEL loop below a stage's outermost loop runs serially inside its thread; a loop
bound to a GPU axis, a ``Barrier`` and an ``Evaluate`` are CodegenErrors naming them
(a CPU kernel has no thread block, and llvm_cpu maps intrinsics as values only).
"""

from __future__ import annotations

from dataclasses import dataclass
import re

from llvmlite import ir

from hetero.plugin import CodegenError
from hetero.plugin.codegen import I1, I64, StmtEmitter, declare, split_stages
from hetero.plugin.tir import (
    Barrier, Binary, Block, Buffer, Evaluate, For, ForKind, Load, PrimFunc, Stmt, Store, legalize, verify_func, walk,
)
from hetero.plugins.llvm_cpu.dot4 import host_vnni
from hetero.plugins.llvm_cpu.exprs import CPU_NATIVE, CpuExprEmitter

PTR = ir.PointerType()
VOID = ir.VoidType()
I32 = ir.IntType(32)
#: Allocations inside a stage up to this size live on the stack (registers, after
#: promotion); larger ones go to the heap, since pool threads have small stacks.
STACK_LIMIT_BYTES = 64 * 1024
#: Appended to a stage's symbol for its packed-argument entry.
PACKED_SUFFIX = "_packed"
_MAX_VECTOR_WIDTH = 64


@dataclass(frozen=True)
class Entry:
    """One stage's entry point: ``symbol(lo, hi, *buffers)``.

    A ``parallel`` entry covers ``range(extent)`` of its outermost loop and may be
    called on disjoint chunks concurrently; a serial one has ``extent`` 1.
    """

    symbol: str
    extent: int
    parallel: bool

    @property
    def packed(self) -> str:
        """The symbol of the same stage taking ``(lo, hi, ptr buffers[])``: one signature
        for every stage, which the native runtime calls (:mod:`.runtime`)."""
        return self.symbol + PACKED_SUFFIX


@dataclass(frozen=True)
class RenderedModule:
    """A function rendered to LLVM IR, with how to call what it contains."""

    func: PrimFunc
    module: ir.Module
    entries: tuple[Entry, ...]
    workspaces: tuple[Buffer, ...]

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        """What every entry takes, in order: the parameters, then the workspaces."""
        return self.func.params + self.workspaces


def render(func: PrimFunc, triple: str = "", data_layout: str = "", host: bool = True) -> RenderedModule:
    """Render a verified ``func`` as an LLVM module for ``triple`` (empty: unspecified),
    to run on this host (``host``: it may use instructions the host has that not every
    CPU of its kind does, AVX-512 VNNI's ``vpdpbusd``) or on any CPU of the triple."""
    verify_func(func)
    vnni = host and host_vnni()
    workspaces, stages = split_stages(legalize(func, CPU_NATIVE).body)
    module = ir.Module(name=func.name)
    module.triple = triple
    module.data_layout = data_layout
    buffers = func.params + tuple(workspaces)
    entries = tuple(_StageRenderer(module, func, buffers, vnni).render(k, s) for k, s in enumerate(stages))
    for entry in entries:
        _render_packed(module, entry, len(buffers))
    _render_wrapper(module, func, entries, tuple(workspaces))
    return RenderedModule(func, module, entries, tuple(workspaces))


def _range_loop(stage: Stmt) -> For | None:
    """The stage's outermost loop if it is PARALLEL: the loop the runtime splits."""
    while isinstance(stage, Block):
        stage = stage.body
    return stage if isinstance(stage, For) and stage.kind is ForKind.PARALLEL else None


def _symbol(func: PrimFunc, k: int, stage: Stmt) -> str:
    label = stage.name if isinstance(stage, Block) else type(stage).__name__.lower()
    return f"{func.name}_{k}_{re.sub(r'[^A-Za-z0-9_]', '_', label)}"


class _StageRenderer(StmtEmitter):
    """Renders one stage as an entry function."""

    def __init__(self, module: ir.Module, func: PrimFunc, buffers: tuple[Buffer, ...], vnni: bool) -> None:
        super().__init__(CpuExprEmitter(module, f"func {func.name}", vnni))
        self.func = func
        self.buffers = buffers

    def render(self, k: int, stage: Stmt) -> Entry:
        symbol = _symbol(self.func, k, stage)
        ptr = self.pointer_type("global")
        fn = ir.Function(self.module, ir.FunctionType(VOID, [I64, I64] + [ptr] * len(self.buffers)), symbol)
        fn.attributes.add("nounwind")
        # Called from the packed entry and the wrapper: inlined into either, its body
        # would be optimised and emitted twice.
        fn.attributes.add("noinline")
        lo, hi, *pointers = fn.args
        lo.name, hi.name = "lo", "hi"
        for arg, buffer in zip(pointers, self.buffers):
            arg.name = buffer.name
            arg.add_attribute("noalias")
        self.em.pointers = dict(zip(self.buffers, pointers))
        self.begin_function(fn)
        loop = _range_loop(stage)
        if loop is not None:
            self.loop(loop, lo, hi, guard=True)
        else:
            self.stmt(stage)
        self.end_function()
        return Entry(symbol, loop.extent if loop is not None else 1, loop is not None)

    def visit_Store(self, s: Store) -> None:
        if not _accumulates(s):
            super().visit_Store(s)
            return
        # A reduction's running sum may be reassociated, so the loop vectorizer can keep
        # one partial sum per lane: the tolerance of a sum of k terms is the bound on any
        # order of summation (hetero.testing.cases).
        em = self.em
        em.forget()
        assert isinstance(s.value, Binary)
        total = em.builder.fadd(em.emit(s.value.a), em.emit(s.value.b), flags=("reassoc", "contract"))
        em.builder.store(total, em.address(s.buffer, s.indices), align=s.buffer.dtype.itemsize)

    def visit_Barrier(self, s: Barrier) -> None:
        raise CodegenError(f"func {self.func.name}: a barrier (Barrier({s.scope!r})) synchronises the "
                           "threads of a block, "
                           "which a CPU kernel does not have; schedule the function for llvm_cpu "
                           "without thread bindings")

    def visit_Evaluate(self, s: Evaluate) -> None:
        raise CodegenError(f"func {self.func.name}: an Evaluate statement (a call of {s.call.func} made "
                           "for its effect) has no CPU rendering; llvm_cpu maps intrinsics as values only")

    def check_loop(self, s: For) -> None:
        if s.kind is ForKind.THREAD_BINDING:
            raise CodegenError(f"func {self.func.name}: loop {s.var.name} is bound to {s.thread_axis}, "
                               "a GPU axis the CPU does not have; schedule it as PARALLEL for llvm_cpu")

    def allocate(self, buffer: Buffer) -> ir.Value:
        if buffer.nbytes <= STACK_LIMIT_BYTES:
            # In the entry block, so LLVM promotes small buffers (accumulators) to registers.
            return super().allocate(buffer)
        malloc = declare(self.module, "malloc", PTR, [I64])
        return self.em.builder.call(malloc, [ir.Constant(I64, buffer.nbytes)], name=buffer.name)

    def release(self, buffer: Buffer, ptr: ir.Value) -> None:
        if buffer.nbytes > STACK_LIMIT_BYTES:
            self.em.builder.call(declare(self.module, "free", VOID, [PTR]), [ptr])

    def loop_hints(self, s: For) -> list[ir.values.MDValue]:
        def hint(name: str, *values: ir.Value) -> ir.values.MDValue:
            return self.module.add_metadata([ir.MetaDataString(self.module, name), *values])

        if s.kind is ForKind.VECTORIZED:
            # Not unrolled before the vectorizer sees it: fully unrolled lanes would reach
            # the SLP vectorizer as scalars, slower to compile and reassembled worse.
            hints = [hint("llvm.loop.vectorize.enable", ir.Constant(I1, 1)),
                     hint("llvm.loop.unroll.disable")]
            # The width hint must be a power of two; other extents let LLVM choose.
            if s.extent & (s.extent - 1) == 0 and s.extent > 1:
                width = ir.Constant(I32, min(s.extent, _MAX_VECTOR_WIDTH))
                hints.append(hint("llvm.loop.vectorize.width", width))
            return hints
        if s.kind is ForKind.UNROLLED:
            return [hint("llvm.loop.unroll.full")]
        if any(isinstance(x, For) and x.kind is ForKind.UNROLLED for x in walk(s.body)):
            # The schedule already unrolled what should be (a register tile's rows):
            # unrolling the loops around it too only multiplies code and compile time.
            return [hint("llvm.loop.unroll.disable")]
        return []


def _render_packed(module: ir.Module, entry: Entry, n_buffers: int) -> None:
    """``void @<stage>_packed(i64 lo, i64 hi, ptr buffers)``: the stage, its buffer
    pointers read from an array."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I64, I64, PTR]), entry.packed)
    fn.attributes.add("nounwind")
    lo, hi, array = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    pointers = [bld.load(bld.gep(array, [ir.Constant(I64, k)], source_etype=PTR), typ=PTR)
                for k in range(n_buffers)]
    bld.call(module.globals[entry.symbol], [lo, hi, *pointers])
    bld.ret_void()


def _render_wrapper(module: ir.Module, func: PrimFunc, entries: tuple[Entry, ...],
                    workspaces: tuple[Buffer, ...]) -> None:
    """``void @<func>(ptr ... params)``: every stage in order, workspaces on the heap."""
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR] * len(func.params)), func.name)
    fn.attributes.add("nounwind")
    for arg, buffer in zip(fn.args, func.params):
        arg.name = buffer.name
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    malloc, free = declare(module, "malloc", PTR, [I64]), declare(module, "free", VOID, [PTR])
    spaces = [bld.call(malloc, [ir.Constant(I64, max(w.nbytes, 1))], name=w.name) for w in workspaces]
    for entry in entries:
        callee = module.globals[entry.symbol]
        bld.call(callee, [ir.Constant(I64, 0), ir.Constant(I64, entry.extent), *fn.args, *spaces])
    for space in spaces:
        bld.call(free, [space])
    bld.ret_void()


def _accumulates(s: Store) -> bool:
    """Whether ``s`` is a reduction's float update ``acc[0] = acc[0] + e``, on the local
    one-element accumulator :func:`hetero.core.ir.tir.compute.lower` makes."""
    value, buffer = s.value, s.buffer
    return (buffer.scope == "local" and buffer.shape == (1,) and buffer.dtype.kind == "f"
            and buffer.dtype.itemsize in (4, 8) and isinstance(value, Binary) and value.op == "add"
            and isinstance(value.a, Load) and value.a.buffer == buffer and value.a.indices == s.indices)
