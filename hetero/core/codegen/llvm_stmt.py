"""Legalised tensor-IR statements as LLVM IR: stores, counted loops with a phi induction
variable, branches, allocations; shared by every LLVM-based renderer.

A renderer subclasses :class:`StmtEmitter` for what its target does differently, through
these hooks (each with a default that fits any target):

- :meth:`StmtEmitter.check_loop`: which loop kinds it maps (the default refuses loops
  bound to a hardware axis, which only a GPU renderer maps);
- :meth:`StmtEmitter.loop_hints`: the ``llvm.loop`` metadata of a loop (none);
- :meth:`StmtEmitter.allocate` / :meth:`StmtEmitter.release`: where an ``Allocate``'s
  buffer lives (an ``alloca`` in the entry block, which LLVM promotes to registers);
- :meth:`StmtEmitter.pointer_type`: the pointer type of a buffer scope (its address
  space: 0 for all here; NVPTX puts ``global`` in 1 and ``shared`` in 3).

A statement the emitter has no method for (a barrier, a call statement) is a
:class:`CodegenError` naming it, unless the subclass maps it (``visit_Barrier``).
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from hetero.core.codegen.llvm_expr import I64, ExprEmitter
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.functor import StmtFunctor
from hetero.core.ir.tir.stmt import For, ForKind, Stmt
from hetero.errors import CodegenError


class LoopID(ir.values.MDValue):
    """A loop's self-referencing metadata node, the form LLVM requires of loop IDs."""

    __hash__ = object.__hash__

    def __init__(self, module: ir.Module, hints: list[ir.values.MDValue]) -> None:
        super().__init__(module, [], name=str(len(module.metadata)))
        self.operands = (self, *hints)

    def __eq__(self, other: object) -> bool:
        return self is other


class StmtEmitter(StmtFunctor[None]):
    """Renders legalised statements into a function, with expressions through ``em``.

    Call :meth:`begin_function` on a new function, :meth:`stmt` on its body, then
    :meth:`end_function`.
    """

    def __init__(self, em: ExprEmitter) -> None:
        self.em = em
        self.module = em.module
        self.allocas: ir.IRBuilder = ir.IRBuilder()
        self._body: ir.Block | None = None

    # -- hooks ------------------------------------------------------------------------

    def check_loop(self, s: For) -> None:
        """Raise CodegenError for a loop this target cannot map."""
        if s.kind is ForKind.THREAD_BINDING:
            raise CodegenError(f"{self.em.where}: loop {s.var.name} is bound to {s.thread_axis}, "
                               "a hardware axis this target does not have; schedule it as PARALLEL or SERIAL")

    def loop_hints(self, s: For) -> list[ir.values.MDValue]:
        """The ``llvm.loop`` hints of loop ``s``."""
        return []

    def pointer_type(self, scope: str) -> ir.PointerType:
        """The pointer type of a buffer in memory ``scope``."""
        return ir.PointerType()

    def allocate(self, buffer: Buffer) -> ir.Value:
        """The base pointer of an allocated ``buffer``: stack memory in the entry block."""
        ptr = self.allocas.alloca(self.em.type_of(buffer.dtype, in_memory=True),
                                  size=ir.Constant(I64, buffer.size), name=buffer.name)
        ptr.align = max(buffer.dtype.itemsize, 16)
        return ptr

    def release(self, buffer: Buffer, ptr: ir.Value) -> None:
        """End ``buffer``'s lifetime (nothing for stack memory)."""

    # -- functions --------------------------------------------------------------------

    def begin_function(self, fn: ir.Function) -> None:
        """Start rendering into ``fn``: allocations go to its entry block, code after it."""
        start = fn.append_basic_block("allocas")
        self._body = fn.append_basic_block("body")
        self.allocas = ir.IRBuilder(start)
        self.em.builder = ir.IRBuilder(self._body)
        self.em.forget()

    def end_function(self) -> None:
        """Return from the function and close its entry block."""
        assert self._body is not None, "begin_function first"
        self.em.builder.ret_void()
        self.allocas.branch(self._body)
        self._body = None

    # -- statements -------------------------------------------------------------------

    def stmt(self, s: Stmt) -> None:
        """Render ``s`` at the builder's position."""
        self.visit_stmt(s)

    def visit_Stmt(self, s: Any) -> None:
        raise CodegenError(f"{self.em.where}: cannot render a {type(s).__name__} statement on this target")

    def visit_Store(self, s: Any) -> None:
        em = self.em
        em.forget()
        value = em.to_memory(em.emit(s.value), s.buffer.dtype)
        em.builder.store(value, em.address(s.buffer, s.indices), align=em.align(s.buffer, s.indices))

    def visit_For(self, s: Any) -> None:
        self.loop(s, ir.Constant(I64, 0), ir.Constant(I64, s.extent), guard=False)

    def visit_Seq(self, s: Any) -> None:
        for part in s.stmts:
            self.stmt(part)

    def visit_Block(self, s: Any) -> None:
        self.stmt(s.body)

    def visit_IfThenElse(self, s: Any) -> None:
        bld = self.em.builder
        fn = bld.function
        self.em.forget()
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
        self.em.forget()

    def visit_Allocate(self, s: Any) -> None:
        ptr = self.allocate(s.buffer)
        self.em.pointers[s.buffer] = ptr
        self.stmt(s.body)
        self.release(s.buffer, ptr)
        del self.em.pointers[s.buffer]

    def loop(self, s: For, lo: ir.Value, hi: ir.Value, guard: bool) -> None:
        """``for var in [lo, hi): body`` with a phi induction variable; ``guard`` tests
        ``lo < hi`` first (the body runs at least once otherwise)."""
        self.check_loop(s)
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
        self.em.forget()
        self.stmt(s.body)
        del self.em.env[s.var]
        bld = self.em.builder
        step = bld.add(index, ir.Constant(I64, 1), flags=("nuw", "nsw"))
        index.add_incoming(step, bld.block)
        back = bld.cbranch(bld.icmp_signed("<", step, hi), body, done)
        hints = self.loop_hints(s)
        if hints:
            back.set_metadata("llvm.loop", LoopID(self.module, hints))
        bld.position_at_end(done)
        self.em.forget()
