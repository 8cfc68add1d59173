"""The text form of tensor IR: reads like a loop nest.

::

    func dense_relu(X: f32[4,8], W: f32[8,3], Y: f32[4,3]) {
      block Y {
        for i in range(4) {
          for j in range(3) {
            alloc Y_acc: f32[1] local {
              Y_acc[0] = 0.0
              for r in range(8) {
                Y_acc[0] = Y_acc[0] + X[i, r] * W[r, j]
              }
              Y[i, j] = max(Y_acc[0], 0.0)
    ...
"""

from __future__ import annotations

from hetero.core.ir.tir.expr import Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var
from hetero.core.ir.tir.stmt import Allocate, Block, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store
from hetero.core.ir.types import short_name

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=",
          "and": "and", "or": "or"}
_PRECEDENCE = {"or": 1, "and": 2, "lt": 3, "le": 3, "gt": 3, "ge": 3, "eq": 3, "ne": 3,
               "add": 4, "sub": 4, "mul": 5, "div": 5, "floordiv": 5, "mod": 5}


def format_expr(e: Expr, parent: int = 0) -> str:
    """An expression as text, with only the parentheses precedence needs."""
    from hetero.core.ir.tir.compute import Reduce

    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return repr(e.value)
    if isinstance(e, (Binary, Compare, Logical)) and e.op in _INFIX:
        prec = _PRECEDENCE[e.op]
        # Left-associative: the right operand of an equal-precedence op needs brackets.
        text = f"{format_expr(e.a, prec)} {_INFIX[e.op]} {format_expr(e.b, prec + 1)}"
        return f"({text})" if prec < parent else text
    if isinstance(e, Binary):
        return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Not):
        return f"not {format_expr(e.a, 6)}"
    if isinstance(e, Select):
        return f"select({format_expr(e.cond)}, {format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Cast):
        return f"{short_name(e.dtype)}({format_expr(e.a)})"
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Reduce):
        axes = ", ".join(f"{a.var.name}<{a.extent}" for a in e.axes)
        return f"{e.combiner}({format_expr(e.source)} over {axes})"
    raise TypeError(f"cannot print {type(e).__name__}")


def _buffer_type(buffer: object) -> str:
    return f"{short_name(buffer.dtype)}[{','.join(map(str, buffer.shape))}]"  # type: ignore[attr-defined]


def format_stmt(s: Stmt, indent: int = 0) -> list[str]:
    """A statement as indented lines."""
    pad = "  " * indent
    if isinstance(s, Store):
        index = ", ".join(format_expr(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{index}] = {format_expr(s.value)}"]
    if isinstance(s, For):
        kind = "" if s.kind is ForKind.SERIAL else f" {s.kind.value}"
        if s.thread_axis:
            kind += f"({s.thread_axis})"
        notes = "".join(f" {k}={v}" for k, v in s.annotations)
        head = f"{pad}for {s.var.name} in range({s.extent}){kind}{notes} {{"
        return [head, *format_stmt(s.body, indent + 1), f"{pad}}}"]
    if isinstance(s, Seq):
        return [line for part in s.stmts for line in format_stmt(part, indent)]
    if isinstance(s, Allocate):
        b = s.buffer
        head = f"{pad}alloc {b.name}: {_buffer_type(b)} {b.scope} {{"
        return [head, *format_stmt(s.body, indent + 1), f"{pad}}}"]
    if isinstance(s, Block):
        return [f"{pad}block {s.name} {{", *format_stmt(s.body, indent + 1), f"{pad}}}"]
    if isinstance(s, IfThenElse):
        lines = [f"{pad}if {format_expr(s.cond)} {{", *format_stmt(s.then, indent + 1)]
        if s.otherwise is not None:
            lines += [f"{pad}}} else {{", *format_stmt(s.otherwise, indent + 1)]
        return [*lines, f"{pad}}}"]
    raise TypeError(f"cannot print {type(s).__name__}")


def format_func(f: PrimFunc) -> str:
    """A whole function as text."""
    params = ", ".join(f"{b.name}: {_buffer_type(b)}" for b in f.params)
    return "\n".join([f"func {f.name}({params}) {{", *format_stmt(f.body, 1), "}"])
