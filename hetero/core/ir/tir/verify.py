"""The tensor-IR verifier: every buffer and variable in scope, every access well formed,
every scope, intrinsic, thread axis and annotation registered and used as its entry says.

Thread bindings: a THREAD_BINDING loop's axis is a registered thread axis; no axis is
bound twice on one path from the function's body; a block-level axis (``blockIdx``)
never sits inside a thread-level one (``threadIdx``); every loop bound to one axis has
the same extent (one launch has one grid and one block shape).
"""

from __future__ import annotations

from typing import Any

from hetero.core.ir.tir import registry
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import BINARY_OPS, INT_ONLY_OPS, Call, Expr, Var
from hetero.core.ir.tir.functor import ExprVisitor, StmtFunctor
from hetero.core.ir.tir.stmt import Annotations, ForKind, PrimFunc, Stmt
from hetero.errors import VerificationError


def func_problems(func: PrimFunc) -> list[str]:
    """Every broken rule of ``func``, one message each."""
    found: list[str] = []
    names = [b.name for b in func.params]
    if len(set(names)) != len(names):
        found.append(f"parameters {names} repeat a name")
    for b in func.params:
        if b.scope != "global":
            found.append(f"parameter {b.name} must be in global scope, not {b.scope}")
    _Verifier(set(func.params), found).visit_stmt(func.body)
    return [f"func {func.name}: {p}" for p in found]


def verify_func(func: PrimFunc) -> PrimFunc:
    """Raise VerificationError on the first broken rule; return ``func`` if it is sound."""
    found = func_problems(func)
    if found:
        raise VerificationError(found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    return func


class _Verifier(StmtFunctor[None], ExprVisitor):
    """Walks a function body with the buffers and loop variables in scope, appending one
    message per broken rule to ``found``."""

    def __init__(self, buffers: set[Buffer], found: list[str]) -> None:
        self.buffers = buffers
        self.loop_vars: set[Var] = set()
        self.found = found
        # The thread-bound loops around the statement being checked, outermost first.
        self.bound: list[tuple[str, Var]] = []
        # The first loop bound to each axis, and its extent.
        self.extents: dict[str, tuple[Var, int]] = {}

    def _annotations(self, annotations: Annotations, on: str, what: str) -> None:
        keys = [k for k, _ in annotations]
        if len(set(keys)) != len(keys):
            self.found.append(f"{what}: annotation keys {keys} repeat")
        for key, value in annotations:
            try:
                entry = registry.annotation_key(key, on)
            except VerificationError as exc:
                self.found.append(f"{what}: {exc}")
                continue
            problem = entry.check(value)
            if problem is not None:
                self.found.append(f"{what}: annotation {key} {problem}")

    def _thread_binding(self, s: Any) -> None:
        what = f"loop {s.var.name} bound to {s.thread_axis}"
        if s.thread_axis not in registry.THREAD_AXES:
            self.found.append(f"{what}: {registry.unknown_thread_axis(s.thread_axis)}")
            return
        level = registry.thread_axis(s.thread_axis).level
        for axis, var in self.bound:
            if axis == s.thread_axis:
                self.found.append(f"{what}: loop {var.name} around it is bound to the same axis "
                                  "(an axis is bound once on a path)")
            elif level == "block" and registry.thread_axis(axis).level == "thread":
                self.found.append(f"{what}: it sits inside loop {var.name} bound to thread axis {axis} "
                                  "(block axes go outside thread axes)")
        if any(axis == s.thread_axis for axis, _ in self.bound):
            return
        first = self.extents.setdefault(s.thread_axis, (s.var, s.extent))
        if first[1] != s.extent:
            self.found.append(f"{what}: extent {s.extent}, but loop {first[0].name} is bound to it with "
                              f"extent {first[1]} (loops bound to one axis share its extent)")

    def _access(self, buffer: Buffer, indices: tuple[Expr, ...], what: str) -> None:
        if buffer not in self.buffers:
            self.found.append(f"{what} {buffer.name}: buffer is not a parameter or an enclosing allocation")
        if len(indices) != len(buffer.shape):
            self.found.append(f"{what} {buffer.name}: {len(indices)} indices for rank {len(buffer.shape)}")
        for i in indices:
            if i.dtype.kind not in "iu":
                self.found.append(f"{what} {buffer.name}: index of dtype {i.dtype}")

    # -- expressions --------------------------------------------------------------------

    def visit_Var(self, e: Any) -> None:
        if e not in self.loop_vars:
            self.found.append(f"variable {e.name} is used outside any loop that binds it")

    def visit_Load(self, e: Any) -> None:
        self._access(e.buffer, e.indices, "load of")
        super().visit_Load(e)

    def visit_Binary(self, e: Any) -> None:
        super().visit_Binary(e)
        if e.op not in BINARY_OPS:
            self.found.append(f"unknown binary op {e.op}")
        if not e.a.dtype == e.b.dtype == e.dtype:
            self.found.append(f"{e.op} mixes {e.a.dtype} and {e.b.dtype}")
        if e.op in INT_ONLY_OPS and e.dtype.kind not in "iu":
            self.found.append(f"{e.op} of {e.dtype}: shifts and bitwise ops take integers")

    def visit_Compare(self, e: Any) -> None:
        super().visit_Compare(e)
        if e.a.dtype != e.b.dtype:
            self.found.append(f"{e.op} compares {e.a.dtype} with {e.b.dtype}")

    visit_Logical = visit_Compare

    def visit_Select(self, e: Any) -> None:
        super().visit_Select(e)
        if not (e.a.dtype == e.b.dtype == e.dtype):
            self.found.append(f"select mixes {e.a.dtype} and {e.b.dtype}")

    def visit_Not(self, e: Any) -> None:
        super().visit_Not(e)
        if e.a.dtype.kind != "b":
            self.found.append("not of a non-boolean")

    def visit_Call(self, e: Any) -> None:
        super().visit_Call(e)
        if e.func not in registry.INTRINSICS:
            self.found.append(registry.unknown_intrinsic(e.func))
            return
        entry = registry.intrinsic(e.func)
        if len(e.args) != entry.arity:
            self.found.append(f"intrinsic {e.func} takes {entry.arity} arguments, got {len(e.args)}")
        elif entry.result_dtype is not None:
            want = entry.result_dtype(tuple(a.dtype for a in e.args))
            if e.dtype != want:
                self.found.append(f"intrinsic {e.func} of {[str(a.dtype) for a in e.args]} is {want}, "
                                  f"the call says {e.dtype}")

    # -- statements ---------------------------------------------------------------------

    def visit_Store(self, s: Any) -> None:
        self._access(s.buffer, s.indices, "store to")
        for i in s.indices:
            self.visit_expr(i)
        self.visit_expr(s.value)
        if s.value.dtype != s.buffer.dtype:
            self.found.append(f"store to {s.buffer.name}: value is {s.value.dtype}, buffer {s.buffer.dtype}")

    def visit_For(self, s: Any) -> None:
        if s.var in self.loop_vars:
            self.found.append(f"loop variable {s.var.name} is bound twice in one nest")
        if s.extent < 1:
            self.found.append(f"loop {s.var.name} has extent {s.extent}")
        if (s.kind is ForKind.THREAD_BINDING) != (s.thread_axis is not None):
            self.found.append(f"loop {s.var.name}: a thread axis goes with THREAD_BINDING loops only")
        self._annotations(s.annotations, "loop", f"loop {s.var.name}")
        if s.annotation("ii") is not None and s.kind is not ForKind.PIPELINED:
            self.found.append(f"loop {s.var.name}: an initiation interval (ii) goes with PIPELINED loops "
                              f"only, not {s.kind.value}")
        bound = s.kind is ForKind.THREAD_BINDING and s.thread_axis is not None
        if bound:
            self._thread_binding(s)
            self.bound.append((s.thread_axis, s.var))
        outer = self.loop_vars
        self.loop_vars = outer | {s.var}
        self.visit_stmt(s.body)
        self.loop_vars = outer
        if bound:
            self.bound.pop()

    def visit_Allocate(self, s: Any) -> None:
        what = f"allocation {s.buffer.name}"
        if s.buffer.scope not in registry.SCOPES:
            self.found.append(f"{what}: {registry.unknown_scope(s.buffer.scope)}")
        self._annotations(s.annotations, "buffer", what)
        parts = s.annotation("partition", ())
        if registry.annotation_key("partition", "buffer").check(parts) is None:
            for p in parts:
                problem = p.problem(s.buffer)
                if problem is not None:
                    self.found.append(f"{what}: {problem}")
        if any(b.name == s.buffer.name for b in self.buffers):
            self.found.append(f"allocation {s.buffer.name}: name already in use")
        outer = self.buffers
        self.buffers = outer | {s.buffer}
        self.visit_stmt(s.body)
        self.buffers = outer

    def visit_Seq(self, s: Any) -> None:
        for part in s.stmts:
            self.visit_stmt(part)

    def visit_IfThenElse(self, s: Any) -> None:
        self.visit_expr(s.cond)
        if s.cond.dtype.kind != "b":
            self.found.append("if condition is not boolean")
        self.visit_stmt(s.then)
        if s.otherwise is not None:
            self.visit_stmt(s.otherwise)

    def visit_Block(self, s: Any) -> None:
        for it in s.iters:
            if it.extent < 1:
                self.found.append(f"block {s.name}: iterator {it.var.name} has extent {it.extent}")
        self.visit_stmt(s.body)

    def visit_Barrier(self, s: Any) -> None:
        if s.scope not in registry.SCOPES:
            self.found.append(f"barrier: {registry.unknown_scope(s.scope)}")
        elif registry.scope(s.scope).per_thread:
            self.found.append(f"barrier on {s.scope} memory: it is private to each thread, so there is "
                              "nothing to synchronise (use the scope the threads share)")

    def visit_Evaluate(self, s: Any) -> None:
        if not isinstance(s.call, Call):
            self.found.append(f"evaluate of a {type(s.call).__name__}: only calls are made for their effect")
        self.visit_expr(s.call)

    def visit_Stmt(self, s: Stmt) -> None:
        self.found.append(f"unknown statement {type(s).__name__}")
