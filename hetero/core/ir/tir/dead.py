"""Dead buffers: an allocated buffer that nothing reads is not computed at all.

Lowering writes some intermediates whose every use a simplification later removed: a
GridSample over a one-pixel axis computes a source coordinate and then reads only the
clamped index, which no longer depends on it. Such a buffer costs its loops, and a
renderer whose compiler rejects a variable set but never used (g++'s
``-Werror=unused-but-set-variable``, as a C simulation of HLS code may build) fails on it.
:func:`remove_dead_buffers` drops each allocated buffer no load reads: its stores, the
blocks that write it, the loops and conditionals left empty and the allocation itself,
until none is left. Parameters are never dropped: the caller reads them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Load
from hetero.core.ir.tir.functor import StmtMutator
from hetero.core.ir.tir.stmt import Allocate, Block, Evaluate, For, IfThenElse, PrimFunc, Seq, Stmt, Store, walk
from hetero.core.ir.tir.visit import exprs_of

_EMPTY = Seq(())


def remove_dead_buffers(func: PrimFunc) -> PrimFunc:
    """``func`` without the allocated buffers that no load reads (see the module's docstring)."""
    while True:
        read = _read_buffers(func.body)
        dead = {s.buffer for s in walk(func.body) if isinstance(s, Allocate) and s.buffer not in read}
        if not dead:
            return func
        func = replace(func, body=_Remove(dead).visit_stmt(func.body))


def _read_buffers(stmt: Stmt) -> set[Buffer]:
    read = set()
    for s in walk(stmt):
        roots: tuple[Any, ...] = ()
        if isinstance(s, Store):
            roots = (*s.indices, s.value)
        elif isinstance(s, IfThenElse):
            roots = (s.cond,)
        elif isinstance(s, Evaluate):
            roots = (s.call,)
        for root in roots:
            read.update(e.buffer for e in exprs_of(root) if isinstance(e, Load))
    return read


def _empty(stmt: Stmt) -> bool:
    return isinstance(stmt, Seq) and not stmt.stmts


class _Remove(StmtMutator):
    def __init__(self, dead: set[Buffer]) -> None:
        self.dead = dead

    def visit_Store(self, s: Any) -> Stmt:
        return _EMPTY if s.buffer in self.dead else s

    def visit_Block(self, s: Any) -> Stmt:
        if s.writes in self.dead:
            return _EMPTY
        body = self.visit_stmt(s.body)
        return _EMPTY if _empty(body) else s if body is s.body else replace(s, body=body)

    def visit_For(self, s: Any) -> Stmt:
        body = self.visit_stmt(s.body)
        return _EMPTY if _empty(body) else s if body is s.body else replace(s, body=body)

    def visit_Allocate(self, s: Any) -> Stmt:
        body = self.visit_stmt(s.body)
        if s.buffer in self.dead:
            return body
        return _EMPTY if _empty(body) else s if body is s.body else replace(s, body=body)

    def visit_Seq(self, s: Any) -> Stmt:
        kept = [t for t in (self.visit_stmt(t) for t in s.stmts) if not _empty(t)]
        if len(kept) == len(s.stmts) and all(a is b for a, b in zip(kept, s.stmts)):
            return s
        return kept[0] if len(kept) == 1 else Seq(tuple(kept))

    def visit_IfThenElse(self, s: Any) -> Stmt:
        then = self.visit_stmt(s.then)
        otherwise = None if s.otherwise is None else self.visit_stmt(s.otherwise)
        if otherwise is not None and _empty(otherwise):
            otherwise = None
        if _empty(then) and otherwise is None:
            return _EMPTY
        if then is s.then and otherwise is s.otherwise:
            return s
        return replace(s, then=then, otherwise=otherwise)


__all__ = ["remove_dead_buffers"]
