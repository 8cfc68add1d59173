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
as a catch-all); :func:`visit_method` gives that method, for a functor that dispatches
itself. ``Reduce`` (compute.py) is an expression like any other.

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


_DISPATCH: dict[tuple[type, type], Callable[..., Any]] = {}


def visit_method(functor: object, node: object, kind: str = "node") -> Callable[..., Any]:
    """The function ``visit_<Class>`` of ``functor``'s class for ``node``, looked up along
    the node's class hierarchy (call it as ``method(functor, node, ...)``); a TypeError
    naming both classes where there is none. Cached per pair of classes."""
    key = (type(functor), type(node))
    method = _DISPATCH.get(key)
    if method is None:
        found = next((getattr(type(functor), f"visit_{c.__name__}") for c in type(node).__mro__
                      if hasattr(type(functor), f"visit_{c.__name__}")), None)
        if found is None:
            cls = type(node).__name__
            raise TypeError(f"{type(functor).__name__} has no visit_{cls}: {cls} is not a "
                            f"tensor-IR {kind} it knows (add a visit_{cls} method)")
        method = _DISPATCH[key] = found
    return method


class ExprFunctor(Generic[R]):
    """Dispatch an expression to ``visit_<ClassName>``; unknown classes are a TypeError.
    Extra arguments (a printer's precedence, an emitter's builder) pass through."""

    def visit_expr(self, e: Expr, *args: Any) -> R:
        method = _DISPATCH.get((type(self), type(e))) or visit_method(self, e, "expression")
        return method(self, e, *args)  # type: ignore[no-any-return]


class StmtFunctor(Generic[R]):
    """Dispatch a statement to ``visit_<ClassName>``; unknown classes are a TypeError.
    Extra arguments (a printer's indent) pass through."""

    def visit_stmt(self, s: Stmt, *args: Any) -> R:
        method = _DISPATCH.get((type(self), type(s))) or visit_method(self, s, "statement")
        return method(self, s, *args)  # type: ignore[no-any-return]


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


def _mapped(fn: Callable[[_N], _N], items: tuple[_N, ...]) -> tuple[_N, ...] | None:
    """``items`` mapped by ``fn``, or None when every item came back unchanged (``is``)."""
    new = tuple(fn(x) for x in items)
    return None if all(n is o for n, o in zip(new, items)) else new


class ExprMutator(ExprFunctor[Expr]):
    """Rebuild an expression tree bottom-up; a node is rebuilt only if a child changed."""

    def visit_Var(self, e: Any) -> Expr:
        return e  # type: ignore[no-any-return]

    visit_Const = visit_Var

    def visit_Binary(self, e: Any) -> Expr:
        a, b = self.visit_expr(e.a), self.visit_expr(e.b)
        return e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)  # type: ignore[no-any-return]

    visit_Compare = visit_Binary
    visit_Logical = visit_Binary

    def visit_Not(self, e: Any) -> Expr:
        a = self.visit_expr(e.a)
        return e if a is e.a else dataclasses.replace(e, a=a)  # type: ignore[no-any-return]

    visit_Cast = visit_Not

    def visit_Select(self, e: Any) -> Expr:
        c, a, b = self.visit_expr(e.cond), self.visit_expr(e.a), self.visit_expr(e.b)
        if c is e.cond and a is e.a and b is e.b:
            return e  # type: ignore[no-any-return]
        return dataclasses.replace(e, cond=c, a=a, b=b)  # type: ignore[no-any-return]

    def visit_Load(self, e: Any) -> Expr:
        indices = _mapped(self.visit_expr, e.indices)
        return e if indices is None else dataclasses.replace(e, indices=indices)  # type: ignore[no-any-return]

    def visit_Call(self, e: Any) -> Expr:
        args = _mapped(self.visit_expr, e.args)
        return e if args is None else dataclasses.replace(e, args=args)  # type: ignore[no-any-return]

    def visit_Reduce(self, e: Any) -> Expr:
        source, init = self.visit_expr(e.source), self.visit_expr(e.init)
        if source is e.source and init is e.init:
            return e  # type: ignore[no-any-return]
        return dataclasses.replace(e, source=source, init=init)  # type: ignore[no-any-return]


class StmtMutator(StmtFunctor[Stmt]):
    """Rebuild a statement tree bottom-up; a node is rebuilt only if a child changed.
    Expressions go to ``visit_expr``, which keeps them here (:class:`StmtExprMutator`
    rewrites them too)."""

    def visit_expr(self, e: Expr) -> Expr:
        return e

    def visit_Store(self, s: Any) -> Stmt:
        indices, value = _mapped(self.visit_expr, s.indices), self.visit_expr(s.value)
        if indices is None and value is s.value:
            return s  # type: ignore[no-any-return]
        return dataclasses.replace(s, indices=s.indices if indices is None else indices,  # type: ignore[no-any-return]
                                   value=value)

    def visit_For(self, s: Any) -> Stmt:
        body = self.visit_stmt(s.body)
        return s if body is s.body else dataclasses.replace(s, body=body)  # type: ignore[no-any-return]

    visit_Allocate = visit_For
    visit_Block = visit_For

    def visit_Seq(self, s: Any) -> Stmt:
        stmts = _mapped(self.visit_stmt, s.stmts)
        return s if stmts is None else dataclasses.replace(s, stmts=stmts)  # type: ignore[no-any-return]

    def visit_IfThenElse(self, s: Any) -> Stmt:
        cond, then = self.visit_expr(s.cond), self.visit_stmt(s.then)
        otherwise = None if s.otherwise is None else self.visit_stmt(s.otherwise)
        if cond is s.cond and then is s.then and otherwise is s.otherwise:
            return s  # type: ignore[no-any-return]
        return dataclasses.replace(s, cond=cond, then=then, otherwise=otherwise)  # type: ignore[no-any-return]

    def visit_Barrier(self, s: Any) -> Stmt:
        return s  # type: ignore[no-any-return]

    def visit_Evaluate(self, s: Any) -> Stmt:
        call = self.visit_expr(s.call)
        return s if call is s.call else dataclasses.replace(s, call=call)  # type: ignore[no-any-return]


class StmtExprMutator(StmtMutator, ExprMutator):
    """Rebuild statements and every expression they hold."""

    visit_expr = ExprMutator.visit_expr  # type: ignore[assignment]
