"""Tensor IR → LLVM IR: one module per :class:`PrimFunc`, one entry point per stage.

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
PARALLEL loop below a stage's outermost loop runs serially inside its thread.
"""

from __future__ import annotations

from dataclasses import dataclass
import re

from llvmlite import ir

from hetero.core.ir.tir import (
    Allocate, Binary, Block, Buffer, For, ForKind, IfThenElse, Load, PrimFunc, Seq, Stmt, Store,
    verify_func, walk,
)
from hetero.errors import CodegenError
from hetero.plugins.llvm_cpu.exprs import I1, I64, ExprEmitter

PTR = ir.PointerType()
VOID = ir.VoidType()
I32 = ir.IntType(32)
#: Allocations inside a stage up to this size live on the stack (registers, after
#: promotion); larger ones go to the heap, since pool threads have small stacks.
STACK_LIMIT_BYTES = 64 * 1024
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


def render(func: PrimFunc, triple: str = "", data_layout: str = "") -> RenderedModule:
    """Render a verified ``func`` as an LLVM module for ``triple`` (empty: unspecified)."""
    verify_func(func)
    workspaces: list[Buffer] = []
    stages: list[Stmt] = []
    _split(func.body, workspaces, stages)
    module = ir.Module(name=func.name)
    module.triple = triple
    module.data_layout = data_layout
    buffers = func.params + tuple(workspaces)
    entries = tuple(_StageRenderer(module, func, buffers).render(k, s) for k, s in enumerate(stages))
    _render_wrapper(module, func, entries, tuple(workspaces))
    return RenderedModule(func, module, entries, tuple(workspaces))


def _split(stmt: Stmt, workspaces: list[Buffer], stages: list[Stmt]) -> None:
    if isinstance(stmt, Allocate):
        workspaces.append(stmt.buffer)
        _split(stmt.body, workspaces, stages)
    elif isinstance(stmt, Seq):
        for part in stmt.stmts:
            _split(part, workspaces, stages)
    else:
        stages.append(stmt)


def _range_loop(stage: Stmt) -> For | None:
    """The stage's outermost loop if it is PARALLEL: the loop the runtime splits."""
    while isinstance(stage, Block):
        stage = stage.body
    return stage if isinstance(stage, For) and stage.kind is ForKind.PARALLEL else None


def _symbol(func: PrimFunc, k: int, stage: Stmt) -> str:
    label = stage.name if isinstance(stage, Block) else type(stage).__name__.lower()
    return f"{func.name}_{k}_{re.sub(r'[^A-Za-z0-9_]', '_', label)}"


class _LoopID(ir.values.MDValue):
    """A loop's self-referencing metadata node, the form LLVM requires of loop IDs."""

    __hash__ = object.__hash__

    def __init__(self, module: ir.Module, hints: list[ir.values.MDValue]) -> None:
        super().__init__(module, [], name=str(len(module.metadata)))
        self.operands = (self, *hints)

    def __eq__(self, other: object) -> bool:
        return self is other


class _StageRenderer:
    """Renders one stage as an entry function."""

    def __init__(self, module: ir.Module, func: PrimFunc, buffers: tuple[Buffer, ...]) -> None:
        self.module = module
        self.func = func
        self.buffers = buffers
        self.em = ExprEmitter(module, f"func {func.name}")
        self.allocas: ir.IRBuilder = ir.IRBuilder()
        self.heap: list[ir.Value] = []

    def render(self, k: int, stage: Stmt) -> Entry:
        symbol = _symbol(self.func, k, stage)
        fn = ir.Function(self.module, ir.FunctionType(VOID, [I64, I64] + [PTR] * len(self.buffers)), symbol)
        fn.attributes.add("nounwind")
        lo, hi, *pointers = fn.args
        lo.name, hi.name = "lo", "hi"
        for arg, buffer in zip(pointers, self.buffers):
            arg.name = buffer.name
            arg.add_attribute("noalias")
        self.em.pointers = dict(zip(self.buffers, pointers))
        start = fn.append_basic_block("allocas")
        body = fn.append_basic_block("body")
        self.allocas = ir.IRBuilder(start)
        self.em.builder = ir.IRBuilder(body)
        loop = _range_loop(stage)
        if loop is not None:
            self._loop(loop, lo, hi, guard=True)
        else:
            self.stmt(stage)
        self.em.builder.ret_void()
        self.allocas.branch(body)
        return Entry(symbol, loop.extent if loop is not None else 1, loop is not None)

    def stmt(self, s: Stmt) -> None:
        """Render ``s`` at the builder's position."""
        em = self.em
        if isinstance(s, Store):
            if _accumulates(s):
                # A reduction's running sum may be reassociated, so the loop vectorizer
                # can keep one partial sum per lane: the tolerance of a sum of k terms
                # is the bound on any order of summation (hetero.testing.cases).
                assert isinstance(s.value, Binary)
                total = em.builder.fadd(em.emit(s.value.a), em.emit(s.value.b), flags=("reassoc", "contract"))
                em.builder.store(total, em.address(s.buffer, s.indices), align=s.buffer.dtype.itemsize)
                return
            value = em.to_memory(em.emit(s.value), s.buffer.dtype)
            em.builder.store(value, em.address(s.buffer, s.indices), align=s.buffer.dtype.itemsize)
        elif isinstance(s, For):
            self._loop(s, ir.Constant(I64, 0), ir.Constant(I64, s.extent), guard=False)
        elif isinstance(s, Seq):
            for part in s.stmts:
                self.stmt(part)
        elif isinstance(s, Block):
            self.stmt(s.body)
        elif isinstance(s, IfThenElse):
            self._branch(s)
        elif isinstance(s, Allocate):
            self._allocate(s)
        else:
            raise CodegenError(f"func {self.func.name}: cannot render a {type(s).__name__} statement")

    def _loop(self, s: For, lo: ir.Value, hi: ir.Value, guard: bool) -> None:
        if s.kind is ForKind.THREAD_BINDING:
            raise CodegenError(f"func {self.func.name}: loop {s.var.name} is bound to {s.thread_axis}, "
                               "a GPU axis the CPU does not have; schedule it as PARALLEL for llvm_cpu")
        bld = self.em.builder
        fn = bld.function
        pre = bld.block
        body, done = fn.append_basic_block(f"{s.var.name}.body"), fn.append_basic_block(f"{s.var.name}.done")
        if guard:
            bld.cbranch(bld.icmp_signed("<", lo, hi), body, done)
        else:
            bld.branch(body)
        bld.position_at_end(body)
        index = bld.phi(I64, name=s.var.name)
        index.add_incoming(lo, pre)
        self.em.env[s.var] = index
        self.stmt(s.body)
        del self.em.env[s.var]
        bld = self.em.builder
        step = bld.add(index, ir.Constant(I64, 1), flags=("nuw", "nsw"))
        index.add_incoming(step, bld.block)
        back = bld.cbranch(bld.icmp_signed("<", step, hi), body, done)
        hints = self._loop_hints(s)
        if hints:
            back.set_metadata("llvm.loop", _LoopID(self.module, hints))
        bld.position_at_end(done)

    def _loop_hints(self, s: For) -> list[ir.values.MDValue]:
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

    def _branch(self, s: IfThenElse) -> None:
        bld = self.em.builder
        fn = bld.function
        cond = self.em.emit(s.cond)
        then, merge = fn.append_basic_block("then"), fn.append_basic_block("endif")
        otherwise = fn.append_basic_block("else") if s.otherwise is not None else merge
        bld.cbranch(cond, then, otherwise)
        for block, part in ((then, s.then), (otherwise, s.otherwise)):
            if part is None:
                continue
            self.em.builder.position_at_end(block)
            self.stmt(part)
            self.em.builder.branch(merge)
        self.em.builder.position_at_end(merge)

    def _allocate(self, s: Allocate) -> None:
        b = s.buffer
        elem = self.em.type_of(b.dtype, in_memory=True)
        if b.nbytes <= STACK_LIMIT_BYTES:
            # In the entry block, so LLVM promotes small buffers (accumulators) to registers.
            ptr = self.allocas.alloca(elem, size=ir.Constant(I64, b.size), name=b.name)
            ptr.align = max(b.dtype.itemsize, 16)
            self.em.pointers[b] = ptr
            self.stmt(s.body)
        else:
            malloc = self.em.declare("malloc", PTR, [I64])
            ptr = self.em.builder.call(malloc, [ir.Constant(I64, b.nbytes)], name=b.name)
            self.em.pointers[b] = ptr
            self.stmt(s.body)
            self.em.builder.call(self.em.declare("free", VOID, [PTR]), [ptr])
        del self.em.pointers[b]


def _render_wrapper(module: ir.Module, func: PrimFunc, entries: tuple[Entry, ...],
                    workspaces: tuple[Buffer, ...]) -> None:
    """``void @<func>(ptr ... params)``: every stage in order, workspaces on the heap."""
    fn = ir.Function(module, ir.FunctionType(VOID, [PTR] * len(func.params)), func.name)
    fn.attributes.add("nounwind")
    for arg, buffer in zip(fn.args, func.params):
        arg.name = buffer.name
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    em = ExprEmitter(module, f"func {func.name}")
    malloc, free = em.declare("malloc", PTR, [I64]), em.declare("free", VOID, [PTR])
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
