"""Generic rewriting of tensor-IR trees: map expressions and statements bottom-up with a
function, as thin uses of the mutators of :mod:`~hetero.core.ir.tir.functor` (a pass
with state of its own subclasses those instead)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from hetero.core.ir.tir.expr import Expr, Var
from hetero.core.ir.tir.functor import ExprMutator, StmtMutator, visit_method
from hetero.core.ir.tir.stmt import Stmt

ExprFn = Callable[[Expr], Expr | None]
StmtFn = Callable[[Stmt], Stmt | None]


class _ExprFnMutator(ExprMutator):
    """Rebuild bottom-up, then let ``fn`` replace each (rebuilt) node."""

    def __init__(self, fn: ExprFn) -> None:
        self.fn = fn

    def visit_expr(self, e: Expr) -> Expr:
        # The dispatch inline, not through super(): one Python frame fewer a level of
        # the tree, so deep expressions stay within the recursion limit.
        rebuilt = visit_method(self, e, "expression")(self, e)
        result = self.fn(rebuilt)
        return rebuilt if result is None else result


class _StmtFnMutator(StmtMutator):
    """Rebuild bottom-up, mapping expressions with ``expr_fn``, then let ``fn`` replace
    each (rebuilt) statement."""

    def __init__(self, fn: StmtFn | None, expr_fn: ExprFn | None) -> None:
        self.fn = fn
        self.exprs = None if expr_fn is None else _ExprFnMutator(expr_fn)

    def visit_expr(self, e: Expr) -> Expr:
        return e if self.exprs is None else self.exprs.visit_expr(e)

    def visit_stmt(self, s: Stmt) -> Stmt:
        rebuilt = super().visit_stmt(s)
        result = None if self.fn is None else self.fn(rebuilt)
        return rebuilt if result is None else result


def map_expr(expr: Expr, fn: ExprFn) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn`` may return a replacement for a node, or None.
    Unchanged subtrees stay the same objects."""
    return _ExprFnMutator(fn).visit_expr(expr)


def map_stmt(stmt: Stmt, fn: StmtFn | None = None, expr_fn: ExprFn | None = None) -> Stmt:
    """Rebuild ``stmt`` bottom-up, mapping its expressions with ``expr_fn`` and then
    each statement with ``fn`` (which may return a replacement, or None)."""
    return _StmtFnMutator(fn, expr_fn).visit_stmt(stmt)


def substitute(node: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """``node`` with every variable in ``mapping`` replaced."""
    return map_expr(node, lambda e: mapping.get(e) if isinstance(e, Var) else None)


def substitute_stmt(stmt: Stmt, mapping: Mapping[Var, Expr]) -> Stmt:
    """``stmt`` with every variable in ``mapping`` replaced in its expressions."""
    return map_stmt(stmt, expr_fn=lambda e: mapping.get(e) if isinstance(e, Var) else None)


def exprs_of(expr: Expr) -> Iterator[Expr]:
    """Every sub-expression of ``expr`` (post-order), ``expr`` included."""
    found: list[Expr] = []

    def collect(e: Expr) -> None:
        found.append(e)

    map_expr(expr, lambda e: collect(e))  # type: ignore[func-returns-value]
    return iter(found)


def mentions(expr: Expr, var: Var) -> bool:
    """Whether ``var`` occurs anywhere in ``expr``."""
    return any(e == var for e in exprs_of(expr))
