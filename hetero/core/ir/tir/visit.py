"""Generic rewriting of tensor-IR trees: map expressions and statements bottom-up."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
import dataclasses

from hetero.core.ir.tir.expr import Binary, Call, Cast, Compare, Expr, Load, Logical, Not, Select, Var
from hetero.core.ir.tir.stmt import Allocate, Block, For, IfThenElse, Seq, Stmt, Store

ExprFn = Callable[[Expr], Expr | None]
StmtFn = Callable[[Stmt], Stmt | None]


def map_expr(expr: Expr, fn: ExprFn) -> Expr:
    """Rebuild ``expr`` bottom-up; ``fn`` may return a replacement for a node, or None."""
    if isinstance(expr, (Binary, Compare, Logical)):
        a, b = map_expr(expr.a, fn), map_expr(expr.b, fn)
        if a is not expr.a or b is not expr.b:
            expr = dataclasses.replace(expr, a=a, b=b)
    elif isinstance(expr, (Not, Cast)):
        a = map_expr(expr.a, fn)
        if a is not expr.a:
            expr = dataclasses.replace(expr, a=a)
    elif isinstance(expr, Select):
        c, a, b = map_expr(expr.cond, fn), map_expr(expr.a, fn), map_expr(expr.b, fn)
        if c is not expr.cond or a is not expr.a or b is not expr.b:
            expr = dataclasses.replace(expr, cond=c, a=a, b=b)
    elif isinstance(expr, (Load, Call)):
        field = "indices" if isinstance(expr, Load) else "args"
        old = getattr(expr, field)
        new = tuple(map_expr(e, fn) for e in old)
        if any(n is not o for n, o in zip(new, old)):
            expr = dataclasses.replace(expr, **{field: new})
    else:
        from hetero.core.ir.tir.compute import Reduce  # Reduce lives with the compute layer

        if isinstance(expr, Reduce):
            src, init = map_expr(expr.source, fn), map_expr(expr.init, fn)
            if src is not expr.source or init is not expr.init:
                expr = dataclasses.replace(expr, source=src, init=init)
    result = fn(expr)
    return expr if result is None else result


def map_stmt(stmt: Stmt, fn: StmtFn | None = None, expr_fn: ExprFn | None = None) -> Stmt:
    """Rebuild ``stmt`` bottom-up, mapping its expressions with ``expr_fn`` and then
    each statement with ``fn`` (which may return a replacement, or None)."""

    def ex(e: Expr) -> Expr:
        return map_expr(e, expr_fn) if expr_fn is not None else e

    if isinstance(stmt, Store):
        new: Stmt = Store(stmt.buffer, tuple(ex(i) for i in stmt.indices), ex(stmt.value))
    elif isinstance(stmt, For):
        new = dataclasses.replace(stmt, body=map_stmt(stmt.body, fn, expr_fn))
    elif isinstance(stmt, (Allocate, Block)):
        new = dataclasses.replace(stmt, body=map_stmt(stmt.body, fn, expr_fn))
    elif isinstance(stmt, Seq):
        new = Seq(tuple(map_stmt(s, fn, expr_fn) for s in stmt.stmts))
    elif isinstance(stmt, IfThenElse):
        new = IfThenElse(
            ex(stmt.cond), map_stmt(stmt.then, fn, expr_fn),
            None if stmt.otherwise is None else map_stmt(stmt.otherwise, fn, expr_fn),
        )
    else:
        raise TypeError(f"unknown statement {type(stmt).__name__}")
    if fn is not None:
        result = fn(new)
        if result is not None:
            return result
    return new


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
