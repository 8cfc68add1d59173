"""The text form of tensor IR: reads like a loop nest.

::

    func dense_relu(X: f32[4,8], W: f32[8,3], Y: f32[4,3]) {
      block Y [spatial i:4, j:3; reduction r:8] {
        for i in range(4) {
          for j in range(3) {
            alloc Y_acc: f32[1] local {
              Y_acc[0] = 0.0
              for r in range(8) {
                Y_acc[0] = Y_acc[0] + X[i, r] * W[r, j]
              }
              Y[i, j] = max(Y_acc[0], 0.0)
    ...

A loop prints its kind, thread axis and annotations (``for k in range(64) pipelined
ii=1 {``), an allocation its annotations (``alloc T: f32[64] shared
partition=[cyclic(0, 4)] {``), a barrier as ``barrier(shared)`` and a call made for its
effect as ``evaluate f(x)``.
"""

from __future__ import annotations

from typing import Any

from hetero.core.ir.tir.buffer import Partition
from hetero.core.ir.tir.expr import Expr
from hetero.core.ir.tir.functor import ExprFunctor, StmtFunctor
from hetero.core.ir.tir.stmt import ForKind, IterKind, PrimFunc, Stmt
from hetero.core.ir.types import short_name

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
          "and": "and", "or": "or"}
_PRECEDENCE = {"or": 1, "and": 2, "lt": 3, "le": 3, "gt": 3, "ge": 3, "eq": 3, "ne": 3,
               "add": 4, "sub": 4, "mul": 5, "div": 5, "floordiv": 5, "mod": 5}


class _Printer(ExprFunctor[str], StmtFunctor[list[str]]):
    """Expressions to text (``parent``: the precedence around them), statements to lines."""

    def visit_Var(self, e: Any, parent: int) -> str:
        return e.name  # type: ignore[no-any-return]

    def visit_Const(self, e: Any, parent: int) -> str:
        return repr(e.value)

    def visit_Binary(self, e: Any, parent: int) -> str:
        if e.op not in _INFIX:
            return f"{e.op}({self.visit_expr(e.a, 0)}, {self.visit_expr(e.b, 0)})"
        prec = _PRECEDENCE[e.op]
        # Left-associative: the right operand of an equal-precedence op needs brackets.
        text = f"{self.visit_expr(e.a, prec)} {_INFIX[e.op]} {self.visit_expr(e.b, prec + 1)}"
        return f"({text})" if prec < parent else text

    visit_Compare = visit_Binary
    visit_Logical = visit_Binary

    def visit_Not(self, e: Any, parent: int) -> str:
        return f"not {self.visit_expr(e.a, 6)}"

    def visit_Select(self, e: Any, parent: int) -> str:
        return f"select({self.visit_expr(e.cond, 0)}, {self.visit_expr(e.a, 0)}, {self.visit_expr(e.b, 0)})"

    def visit_Cast(self, e: Any, parent: int) -> str:
        return f"{short_name(e.dtype)}({self.visit_expr(e.a, 0)})"

    def visit_Load(self, e: Any, parent: int) -> str:
        return f"{e.buffer.name}[{self._list(e.indices)}]"

    def visit_Call(self, e: Any, parent: int) -> str:
        return f"{e.func}({self._list(e.args)})"

    def visit_Reduce(self, e: Any, parent: int) -> str:
        axes = ", ".join(f"{a.var.name}<{a.extent}" for a in e.axes)
        return f"{e.combiner}({self.visit_expr(e.source, 0)} over {axes})"

    def _list(self, exprs: tuple[Expr, ...]) -> str:
        return ", ".join(self.visit_expr(x, 0) for x in exprs)

    def visit_Store(self, s: Any, pad: str) -> list[str]:
        return [f"{pad}{s.buffer.name}[{self._list(s.indices)}] = {self.visit_expr(s.value, 0)}"]

    def visit_For(self, s: Any, pad: str) -> list[str]:
        kind = "" if s.kind is ForKind.SERIAL else f" {s.kind.value}"
        if s.thread_axis:
            kind += f"({s.thread_axis})"
        notes = "".join(f" {k}={v}" for k, v in s.annotations)
        return self._nest(f"{pad}for {s.var.name} in range({s.extent}){kind}{notes}", s.body, pad)

    def visit_Seq(self, s: Any, pad: str) -> list[str]:
        return [line for part in s.stmts for line in self.visit_stmt(part, pad)]

    def visit_Allocate(self, s: Any, pad: str) -> list[str]:
        b = s.buffer
        notes = "".join(f" {k}={_partitions(v) if k == 'partition' else v}" for k, v in s.annotations)
        return self._nest(f"{pad}alloc {b.name}: {_buffer_type(b)} {b.scope}{notes}", s.body, pad)

    def visit_Block(self, s: Any, pad: str) -> list[str]:
        iters = ""
        if s.iters:
            groups = [", ".join(f"{it.var.name}:{it.extent}" for it in s.iters if it.kind is kind)
                      for kind in IterKind]
            iters = " [" + "; ".join(f"{kind.value} {g}" for kind, g in zip(IterKind, groups) if g) + "]"
        return self._nest(f"{pad}block {s.name}{iters}", s.body, pad)

    def visit_Barrier(self, s: Any, pad: str) -> list[str]:
        return [f"{pad}barrier({s.scope})"]

    def visit_Evaluate(self, s: Any, pad: str) -> list[str]:
        return [f"{pad}evaluate {self.visit_expr(s.call, 0)}"]

    def visit_IfThenElse(self, s: Any, pad: str) -> list[str]:
        lines = [f"{pad}if {self.visit_expr(s.cond, 0)} {{", *self.visit_stmt(s.then, pad + "  ")]
        if s.otherwise is not None:
            lines += [f"{pad}}} else {{", *self.visit_stmt(s.otherwise, pad + "  ")]
        return [*lines, f"{pad}}}"]

    def _nest(self, head: str, body: Stmt, pad: str) -> list[str]:
        return [f"{head} {{", *self.visit_stmt(body, pad + "  "), f"{pad}}}"]


_PRINTER = _Printer()


def format_expr(e: Expr, parent: int = 0) -> str:
    """An expression as text, with only the parentheses precedence needs."""
    return _PRINTER.visit_expr(e, parent)


def _partitions(parts: tuple[Partition, ...]) -> str:
    return "[" + ", ".join(f"{p.kind}({p.dim}{f', {p.factor}' if p.factor else ''})" for p in parts) + "]"


def _buffer_type(buffer: object) -> str:
    return f"{short_name(buffer.dtype)}[{','.join(map(str, buffer.shape))}]"  # type: ignore[attr-defined]


def format_stmt(s: Stmt, indent: int = 0) -> list[str]:
    """A statement as indented lines."""
    return _PRINTER.visit_stmt(s, "  " * indent)


def format_func(f: PrimFunc) -> str:
    """A whole function as text."""
    params = ", ".join(f"{b.name}: {_buffer_type(b)}" for b in f.params)
    return "\n".join([f"func {f.name}({params}) {{", *format_stmt(f.body, 1), "}"])
