"""Visitors and mutators of tensor-IR trees, dispatched on the node's class.

The one base every pass over the tensor IR builds on (the printer, the verifier, the
interpreter, every renderer), in the manner of TVM's ``ExprFunctor``/``StmtFunctor``:

- :class:`ExprFunctor` and :class:`StmtFunctor` call ``visit_<ClassName>`` for a node
  (``visit_Binary``, ``visit_For``, ...) and raise a :class:`TypeError` naming the class
  and the functor for a node it has no method for. Expression and statement classes
  have distinct names, so one class may be both (a renderer, the interpreter).
- :class:`ExprVisitor` and :class:`StmtVisitor` walk every child by default (override a
  method to look at a node, and call ``super()`` to keep walking under it).
- :class:`ExprMutator` and :class:`StmtMutator` rebuild a node only when one of its
  children changed, so an unchanged subtree stays the same object (``is``), which keeps
  rewrites cheap and lets a caller see whether anything changed.
  :class:`StmtExprMutator` also rewrites the expressions held by statements.

A method is looked up along the node's class hierarchy, so a subclass of ``Binary``
falls back to ``visit_Binary`` (and a functor may define ``visit_Expr`` or ``visit_Stmt``
as a catch-all). ``Reduce`` (compute.py) is an expression like any other.

Example, counting loads::

    class Loads(StmtExprVisitor):
        def __init__(self) -> None:
            self.count = 0

        def visit_Load(self, e: Load) -> None:
            self.count += 1
            super().visit_Load(e)
"""

from __future__ import annotations

from collections.abc import Callable
import dataclasses
from typing import Any, Generic, TypeVar

from hetero.core.ir.tir.expr import Expr
from hetero.core.ir.tir.stmt import Stmt

R = TypeVar("R")
_N = TypeVar("_N")


_DISPATCH: dict[tuple[type, type], str | None] = {}


def _method(functor: object, node: object, kind: str) -> Callable[..., Any]:
    """The bound ``visit_<Class>`` of ``functor`` for ``node``, searched along its MRO."""
    key = (type(functor), type(node))
    if key not in _DISPATCH:
        _DISPATCH[key] = next((f"visit_{c.__name__}" for c in type(node).__mro__
                               if hasattr(functor, f"visit_{c.__name__}")), None)
    name = _DISPATCH[key]
    if name is None:
        cls = type(node).__name__
        raise TypeError(f"{type(functor).__name__} has no visit_{cls}: {cls} is not a "
                        f"tensor-IR {kind} it knows (add a visit_{cls} method)")
    return getattr(functor, name)  # type: ignore[no-any-return]


class ExprFunctor(Generic[R]):
    """Dispatch an expression to ``visit_<ClassName>``; unknown classes are a TypeError.
    Extra arguments (a printer's precedence, an emitter's builder) pass through."""

    def visit_expr(self, e: Expr, *args: Any) -> R:
        return _method(self, e, "expression")(e, *args)  # type: ignore[no-any-return]


class StmtFunctor(Generic[R]):
    """Dispatch a statement to ``visit_<ClassName>``; unknown classes are a TypeError.
    Extra arguments (a printer's indent) pass through."""

    def visit_stmt(self, s: Stmt, *args: Any) -> R:
        return _method(self, s, "statement")(s, *args)  # type: ignore[no-any-return]


class ExprVisitor(ExprFunctor[None]):
    """Walk an expression tree, children left to right; every method returns None."""

    def visit_Var(self, e: Any) -> None:
        pass

    def visit_Const(self, e: Any) -> None:
        pass

    def visit_Binary(self, e: Any) -> None:
        self.visit_expr(e.a)
        self.visit_expr(e.b)

    visit_Compare = visit_Binary
    visit_Logical = visit_Binary

    def visit_Not(self, e: Any) -> None:
        self.visit_expr(e.a)

    visit_Cast = visit_Not

    def visit_Select(self, e: Any) -> None:
        self.visit_expr(e.cond)
        self.visit_expr(e.a)
        self.visit_expr(e.b)

    def visit_Load(self, e: Any) -> None:
        for i in e.indices:
            self.visit_expr(i)

    def visit_Call(self, e: Any) -> None:
        for a in e.args:
            self.visit_expr(a)

    def visit_Reduce(self, e: Any) -> None:
        self.visit_expr(e.source)
        self.visit_expr(e.init)


class StmtVisitor(StmtFunctor[None]):
    """Walk a statement tree; expressions go to ``visit_expr``, which ignores them here
    (:class:`StmtExprVisitor` walks them too)."""

    def visit_expr(self, e: Expr) -> None:
        pass

    def visit_Store(self, s: Any) -> None:
        for i in s.indices:
            self.visit_expr(i)
        self.visit_expr(s.value)

    def visit_For(self, s: Any) -> None:
        self.visit_stmt(s.body)

    visit_Allocate = visit_For
    visit_Block = visit_For

    def visit_Seq(self, s: Any) -> None:
        for part in s.stmts:
            self.visit_stmt(part)

    def visit_IfThenElse(self, s: Any) -> None:
        self.visit_expr(s.cond)
        self.visit_stmt(s.then)
        if s.otherwise is not None:
            self.visit_stmt(s.otherwise)

    def visit_Barrier(self, s: Any) -> None:
        pass

    def visit_Evaluate(self, s: Any) -> None:
        self.visit_expr(s.call)


class StmtExprVisitor(StmtVisitor, ExprVisitor):
    """Walk statements and every expression they hold."""

    visit_expr = ExprVisitor.visit_expr


def _rebuilt(node: _N, **children: Any) -> _N:
    """``node`` with ``children`` replaced, or ``node`` itself when none changed (``is``)."""
    for name, new in children.items():
        old = getattr(node, name)
        same = (all(n is o for n, o in zip(new, old)) and len(new) == len(old)
                if isinstance(new, tuple) else new is old)
        if not same:
            return dataclasses.replace(node, **children)  # type: ignore[type-var]
    return node


class ExprMutator(ExprFunctor[Expr]):
    """Rebuild an expression tree bottom-up; a node is rebuilt only if a child changed."""

    def visit_Var(self, e: Any) -> Expr:
        return e  # type: ignore[no-any-return]

    visit_Const = visit_Var

    def visit_Binary(self, e: Any) -> Expr:
        return _rebuilt(e, a=self.visit_expr(e.a), b=self.visit_expr(e.b))  # type: ignore[no-any-return]

    visit_Compare = visit_Binary
    visit_Logical = visit_Binary

    def visit_Not(self, e: Any) -> Expr:
        return _rebuilt(e, a=self.visit_expr(e.a))  # type: ignore[no-any-return]

    visit_Cast = visit_Not

    def visit_Select(self, e: Any) -> Expr:
        return _rebuilt(e, cond=self.visit_expr(e.cond), a=self.visit_expr(e.a),  # type: ignore[no-any-return]
                        b=self.visit_expr(e.b))

    def visit_Load(self, e: Any) -> Expr:
        return _rebuilt(e, indices=tuple(self.visit_expr(i) for i in e.indices))  # type: ignore[no-any-return]

    def visit_Call(self, e: Any) -> Expr:
        return _rebuilt(e, args=tuple(self.visit_expr(a) for a in e.args))  # type: ignore[no-any-return]

    def visit_Reduce(self, e: Any) -> Expr:
        return _rebuilt(e, source=self.visit_expr(e.source), init=self.visit_expr(e.init))  # type: ignore[no-any-return]


class StmtMutator(StmtFunctor[Stmt]):
    """Rebuild a statement tree bottom-up; a node is rebuilt only if a child changed.
    Expressions go to ``visit_expr``, which keeps them here (:class:`StmtExprMutator`
    rewrites them too)."""

    def visit_expr(self, e: Expr) -> Expr:
        return e

    def visit_Store(self, s: Any) -> Stmt:
        return _rebuilt(s, indices=tuple(self.visit_expr(i) for i in s.indices),  # type: ignore[no-any-return]
                        value=self.visit_expr(s.value))

    def visit_For(self, s: Any) -> Stmt:
        return _rebuilt(s, body=self.visit_stmt(s.body))  # type: ignore[no-any-return]

    visit_Allocate = visit_For
    visit_Block = visit_For

    def visit_Seq(self, s: Any) -> Stmt:
        return _rebuilt(s, stmts=tuple(self.visit_stmt(p) for p in s.stmts))  # type: ignore[no-any-return]

    def visit_IfThenElse(self, s: Any) -> Stmt:
        otherwise = None if s.otherwise is None else self.visit_stmt(s.otherwise)
        return _rebuilt(s, cond=self.visit_expr(s.cond), then=self.visit_stmt(s.then),  # type: ignore[no-any-return]
                        otherwise=otherwise)

    def visit_Barrier(self, s: Any) -> Stmt:
        return s  # type: ignore[no-any-return]

    def visit_Evaluate(self, s: Any) -> Stmt:
        return _rebuilt(s, call=self.visit_expr(s.call))  # type: ignore[no-any-return]


class StmtExprMutator(StmtMutator, ExprMutator):
    """Rebuild statements and every expression they hold."""

    visit_expr = ExprMutator.visit_expr  # type: ignore[assignment]
