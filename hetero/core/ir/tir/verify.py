"""The tensor-IR verifier: every buffer and variable in scope, every access well formed."""

from __future__ import annotations

from hetero.core.ir.tir.buffer import SCOPES, Buffer
from hetero.core.ir.tir.expr import BINARY_OPS, INT_ONLY_OPS, INTRINSICS, Binary, Call, Cast, Compare, Expr, Load, Logical, Not, Select, Var
from hetero.core.ir.tir.stmt import Allocate, Block, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store
from hetero.core.ir.tir.visit import exprs_of
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
    _check_stmt(func.body, set(func.params), set(), found)
    return [f"func {func.name}: {p}" for p in found]


def verify_func(func: PrimFunc) -> PrimFunc:
    """Raise VerificationError on the first broken rule; return ``func`` if it is sound."""
    found = func_problems(func)
    if found:
        raise VerificationError(found[0] + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""))
    return func


def _check_access(buffer: Buffer, indices: tuple[Expr, ...], buffers: set[Buffer],
                  what: str, found: list[str]) -> None:
    if buffer not in buffers:
        found.append(f"{what} {buffer.name}: buffer is not a parameter or an enclosing allocation")
    if len(indices) != len(buffer.shape):
        found.append(f"{what} {buffer.name}: {len(indices)} indices for rank {len(buffer.shape)}")
    for i in indices:
        if i.dtype.kind not in "iu":
            found.append(f"{what} {buffer.name}: index of dtype {i.dtype}")


def _check_expr(e: Expr, buffers: set[Buffer], loop_vars: set[Var], found: list[str]) -> None:
    for sub in exprs_of(e):
        if isinstance(sub, Var) and sub not in loop_vars:
            found.append(f"variable {sub.name} is used outside any loop that binds it")
        elif isinstance(sub, Load):
            _check_access(sub.buffer, sub.indices, buffers, "load of", found)
        elif isinstance(sub, Binary):
            if sub.op not in BINARY_OPS:
                found.append(f"unknown binary op {sub.op}")
            if not sub.a.dtype == sub.b.dtype == sub.dtype:
                found.append(f"{sub.op} mixes {sub.a.dtype} and {sub.b.dtype}")
            if sub.op in INT_ONLY_OPS and sub.dtype.kind not in "iu":
                found.append(f"{sub.op} of {sub.dtype}: shifts and bitwise ops take integers")
        elif isinstance(sub, (Compare, Logical)) and sub.a.dtype != sub.b.dtype:
            found.append(f"{sub.op} compares {sub.a.dtype} with {sub.b.dtype}")
        elif isinstance(sub, Select) and not (sub.a.dtype == sub.b.dtype == sub.dtype):
            found.append(f"select mixes {sub.a.dtype} and {sub.b.dtype}")
        elif isinstance(sub, (Not,)) and sub.a.dtype.kind != "b":
            found.append("not of a non-boolean")
        elif isinstance(sub, Call) and sub.func not in INTRINSICS:
            found.append(f"unknown intrinsic {sub.func}")
        elif isinstance(sub, Cast):
            pass


def _check_stmt(s: Stmt, buffers: set[Buffer], loop_vars: set[Var], found: list[str]) -> None:
    if isinstance(s, Store):
        _check_access(s.buffer, s.indices, buffers, "store to", found)
        for i in s.indices:
            _check_expr(i, buffers, loop_vars, found)
        _check_expr(s.value, buffers, loop_vars, found)
        if s.value.dtype != s.buffer.dtype:
            found.append(f"store to {s.buffer.name}: value is {s.value.dtype}, buffer {s.buffer.dtype}")
    elif isinstance(s, For):
        if s.var in loop_vars:
            found.append(f"loop variable {s.var.name} is bound twice in one nest")
        if s.extent < 1:
            found.append(f"loop {s.var.name} has extent {s.extent}")
        if (s.kind is ForKind.THREAD_BINDING) != (s.thread_axis is not None):
            found.append(f"loop {s.var.name}: a thread axis goes with THREAD_BINDING loops only")
        _check_stmt(s.body, buffers, loop_vars | {s.var}, found)
    elif isinstance(s, Allocate):
        if s.buffer.scope not in SCOPES:
            found.append(f"allocation {s.buffer.name}: unknown scope {s.buffer.scope}")
        if any(b.name == s.buffer.name for b in buffers):
            found.append(f"allocation {s.buffer.name}: name already in use")
        _check_stmt(s.body, buffers | {s.buffer}, loop_vars, found)
    elif isinstance(s, Block):
        _check_stmt(s.body, buffers, loop_vars, found)
    elif isinstance(s, Seq):
        for part in s.stmts:
            _check_stmt(part, buffers, loop_vars, found)
    elif isinstance(s, IfThenElse):
        _check_expr(s.cond, buffers, loop_vars, found)
        if s.cond.dtype.kind != "b":
            found.append("if condition is not boolean")
        _check_stmt(s.then, buffers, loop_vars, found)
        if s.otherwise is not None:
            _check_stmt(s.otherwise, buffers, loop_vars, found)
    else:
        found.append(f"unknown statement {type(s).__name__}")
