"""The functor base: dispatch by class, clear errors for unknown nodes, mutators that
rebuild only what changed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from hetero.core.ir.tir import Buffer, Const, Expr, For, Load, Stmt, Store, Var, const, seq, sum_
from hetero.core.ir.tir.compute import reduce_axis
from hetero.core.ir.tir.expr import Binary
from hetero.core.ir.tir.functor import (
    ExprFunctor, ExprMutator, StmtExprMutator, StmtExprVisitor, StmtFunctor, StmtMutator,
)
from hetero.core.ir.tir.visit import map_expr, map_stmt

A = Buffer("A", (8,), "float32")
B = Buffer("B", (8,), "float32")


class Depth(ExprFunctor[int]):
    def visit_Var(self, e: Var) -> int:
        return 1

    def visit_Const(self, e: Const) -> int:
        return 1

    def visit_Binary(self, e: Binary) -> int:
        return 1 + max(self.visit_expr(e.a), self.visit_expr(e.b))


def test_functor_dispatches_on_the_class_name() -> None:
    i = Var("i")
    assert Depth().visit_expr((i + 1) * i) == 3


def test_an_unknown_node_is_a_type_error_naming_its_class() -> None:
    with pytest.raises(TypeError, match="Depth has no visit_Load: Load is not"):
        Depth().visit_expr(A[Var("i")])

    @dataclass(frozen=True)
    class Fancy(Stmt):
        pass

    with pytest.raises(TypeError, match="StmtMutator has no visit_Fancy"):
        StmtMutator().visit_stmt(Fancy())
    with pytest.raises(TypeError, match="no visit_Fancy"):
        StmtFunctor().visit_stmt(Fancy())


def test_a_subclass_of_a_node_falls_back_to_its_base_method() -> None:
    @dataclass(frozen=True, eq=True)
    class Tagged(Binary):
        pass

    i = Var("i")
    assert Depth().visit_expr(Tagged("add", i, i, i.dtype)) == 2


class Rename(ExprMutator):
    def visit_Var(self, e: Var) -> Expr:
        return Var("k") if e.name == "i" else e


def test_expr_mutator_rebuilds_only_the_changed_path() -> None:
    i, j = Var("i"), Var("j")
    left, right = A[j] * 2.0, A[i]
    e = left + right
    out = Rename().visit_expr(e)
    assert out == A[j] * 2.0 + A[Var("k")]
    assert out.a is left  # type: ignore[attr-defined]
    unchanged = A[j] + 1.0
    assert Rename().visit_expr(unchanged) is unchanged


def test_reduce_is_an_expression_the_mutators_walk() -> None:
    r = reduce_axis(8, "r")
    total = sum_(A[r.var] * A[Var("i")], r)
    out = Rename().visit_expr(total)
    assert out.source == A[r.var] * A[Var("k")]  # type: ignore[attr-defined]
    assert out.axes == total.axes  # type: ignore[attr-defined]


def test_stmt_mutator_keeps_expressions_and_stmt_expr_mutator_rewrites_them() -> None:
    i = Var("i")
    body = For(i, 8, seq(Store(B, (i,), A[i]), Store(B, (const(0, "int64"),), A[i])))
    assert StmtMutator().visit_stmt(body) is body

    class RenameAll(StmtExprMutator, Rename):
        pass

    out = RenameAll().visit_stmt(body)
    k = Var("k")
    assert out == For(i, 8, seq(Store(B, (k,), A[k]), Store(B, (const(0, "int64"),), A[k])))


def test_stmt_expr_visitor_sees_every_load() -> None:
    i = Var("i")
    body = For(i, 8, Store(B, (i,), A[i] + A[i + 1]))

    class Loads(StmtExprVisitor):
        def __init__(self) -> None:
            self.seen: list[Load] = []

        def visit_Load(self, e: Load) -> None:
            self.seen.append(e)
            super().visit_Load(e)

    v = Loads()
    v.visit_stmt(body)
    assert v.seen == [A[i], A[i + 1]]


def test_map_expr_and_map_stmt_keep_their_meaning() -> None:
    i = Var("i")
    e = A[i] + A[i]
    doubled = map_expr(e, lambda x: x * 2.0 if isinstance(x, Load) else None)
    assert doubled == A[i] * 2.0 + A[i] * 2.0
    assert map_expr(e, lambda x: None) is e
    s = For(i, 8, Store(B, (i,), A[i]))
    out = map_stmt(s, lambda t: For(t.var, 4, t.body) if isinstance(t, For) else None,
                   lambda x: x + 1.0 if isinstance(x, Load) else None)
    assert out == For(i, 4, Store(B, (i,), A[i] + 1.0))
    assert np.dtype(out.body.value.dtype) == np.float32  # type: ignore[attr-defined]
