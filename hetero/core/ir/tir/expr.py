"""Tensor-IR expressions: immutable nodes compared by structure.

Expressions are scalar; a loop's kind (vectorized, unrolled, parallel, bound to a GPU
axis) tells a renderer how to map it onto the hardware, so one IR serves the LLVM,
PTX and HLS C++ renderers alike. Arithmetic operators build nodes (``i * 4 + j``);
comparisons use functions (:func:`lt`, :func:`eq`, ...) because ``==`` stays
structural equality, as in any dataclass.

NaN rule: float ``min`` and ``max`` propagate NaN, as numpy's ``minimum`` and
``maximum`` and ONNX's Min, Max, MaxPool and ReduceMax do: if either operand is NaN
the result is NaN; otherwise it is the smaller (larger) operand. Which zero a tie of
``-0`` and ``+0`` gives is left open (numpy's own answer depends on the operand
order), so a renderer may use IEEE 754-2019 ``minimum``/``maximum`` or the hardware's
instruction; the interpreter keeps ``a``. With that, both are commutative and
associative, so a ``max_``/``min_`` reduction gives one result in any order, and one
NaN among its terms makes it NaN. Comparisons with a NaN are false, except ``ne``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from hetero.core.ir.tir import registry

if TYPE_CHECKING:
    from hetero.core.ir.tir.buffer import Buffer

INDEX = np.dtype("int64")
BOOL = np.dtype("bool")

#: Binary arithmetic: ``floordiv`` and ``mod`` round toward minus infinity (index
#: maths); ``div`` is true division for floats and truncating division for integers;
#: ``shr`` (integers only) is ``floor(a / 2**b)``, the arithmetic shift right, for any
#: ``b >= 0``: a shift by the bit width or more gives 0, or -1 for a negative ``a``;
#: ``shl`` (integers only) is ``a * 2**b`` wrapped to the dtype, 0 for ``b`` of the bit
#: width or more (a negative ``b`` reads as such an amount); ``bit_and``, ``bit_or``,
#: ``bit_xor`` (integers only) act on the two's-complement bits. ``tdiv`` (integers
#: only) and ``trem`` are the primitives :mod:`hetero.core.ir.tir.legalize` rewrites
#: ``div``, ``floordiv`` and ``mod`` into: C's ``/`` and ``%`` (``fmod`` for floats),
#: truncating toward zero, defined only for a divisor that is not 0 (and, for signed
#: integers, not -1 with the type's minimum as dividend).
BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow", "shr",
              "shl", "bit_and", "bit_or", "bit_xor", "tdiv", "trem")
#: The binary ops defined on integers only.
INT_ONLY_OPS = ("shr", "shl", "bit_and", "bit_or", "bit_xor", "tdiv")
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGICAL_OPS = ("and", "or")
#: Intrinsic functions every renderer provides: a live view of the intrinsic registry
#: (:mod:`hetero.core.ir.tir.registry`, where plugins add theirs). ``bitcast`` (built by
#: :func:`bitcast`) reads its operand's bits as another dtype of the same width;
#: ``fence`` is its float operand unchanged, rounded as computed: a renderer that fuses
#: a multiply and an add must not fuse across it (where an op's reference rounds each
#: step, as a coordinate that nearest sampling rounds).
INTRINSICS = registry.INTRINSICS

ExprLike = Union["Expr", int, float, bool]


class Expr:
    """Base of all expressions; every expression has a numpy ``dtype``."""

    dtype: np.dtype

    def __add__(self, other: ExprLike) -> Expr:
        return binary("add", self, other)

    def __radd__(self, other: ExprLike) -> Expr:
        return binary("add", other, self)

    def __sub__(self, other: ExprLike) -> Expr:
        return binary("sub", self, other)

    def __rsub__(self, other: ExprLike) -> Expr:
        return binary("sub", other, self)

    def __mul__(self, other: ExprLike) -> Expr:
        return binary("mul", self, other)

    def __rmul__(self, other: ExprLike) -> Expr:
        return binary("mul", other, self)

    def __truediv__(self, other: ExprLike) -> Expr:
        return binary("div", self, other)

    def __rtruediv__(self, other: ExprLike) -> Expr:
        return binary("div", other, self)

    def __floordiv__(self, other: ExprLike) -> Expr:
        return binary("floordiv", self, other)

    def __mod__(self, other: ExprLike) -> Expr:
        return binary("mod", self, other)

    def __neg__(self) -> Expr:
        return binary("sub", const(0, self.dtype), self)


@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A named scalar: a loop variable (int64) or a function's scalar parameter."""

    name: str
    dtype: np.dtype = INDEX


@dataclass(frozen=True, eq=True)
class Const(Expr):
    """A literal of ``dtype``."""

    value: int | float | bool
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Binary(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Compare(Expr):
    op: str
    a: Expr
    b: Expr
    dtype: np.dtype = BOOL


@dataclass(frozen=True, eq=True)
class Logical(Expr):
    """``and`` / ``or`` of two booleans."""

    op: str
    a: Expr
    b: Expr
    dtype: np.dtype = BOOL


@dataclass(frozen=True, eq=True)
class Not(Expr):
    a: Expr
    dtype: np.dtype = BOOL


@dataclass(frozen=True, eq=True)
class Select(Expr):
    """``a if cond else b``; both branches may be evaluated."""

    cond: Expr
    a: Expr
    b: Expr
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Cast(Expr):
    """Convert ``a`` to ``dtype`` (float to int truncates toward zero)."""

    a: Expr
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Load(Expr):
    """Read ``buffer[indices]``."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: np.dtype


@dataclass(frozen=True, eq=True)
class Call(Expr):
    """An intrinsic function (one of :data:`INTRINSICS`) applied to ``args``."""

    func: str
    args: tuple[Expr, ...]
    dtype: np.dtype


def const(value: Any, dtype: Any) -> Const:
    """A literal of ``dtype``, with its value in the matching Python type."""
    dtype = np.dtype(dtype)
    py = bool(value) if dtype == BOOL else int(value) if dtype.kind in "iu" else float(value)
    return Const(py, dtype)


def as_expr(x: ExprLike, like: np.dtype | None = None) -> Expr:
    """``x`` as an expression; Python numbers take the dtype ``like`` (or int64/float32)."""
    if isinstance(x, Expr):
        return x
    if like is not None:
        return const(x, like)
    if isinstance(x, bool):
        return const(x, BOOL)
    return const(x, INDEX if isinstance(x, int) else np.float32)


def _operands(a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    if isinstance(a, Expr):
        return a, as_expr(b, a.dtype)
    if isinstance(b, Expr):
        return as_expr(a, b.dtype), b
    return as_expr(a), as_expr(b)


def binary(op: str, a: ExprLike, b: ExprLike) -> Expr:
    """``a op b``, folding index arithmetic on literals (so loop bounds stay readable)."""
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary op {op!r}")
    x, y = _operands(a, b)
    if x.dtype != y.dtype:
        raise TypeError(f"{op} of {x.dtype} and {y.dtype}: cast one side first")
    if op in INT_ONLY_OPS and x.dtype.kind not in "iu":
        kind = {"shr": "shifts", "shl": "shifts", "tdiv": "tdiv"}.get(op, "bitwise ops")
        raise TypeError(f"{op} of {x.dtype}: {kind} take integers")
    if x.dtype.kind in "iu":
        simplified = _fold_int(op, x, y)
        if simplified is not None:
            return simplified
    return Binary(op, x, y, x.dtype)


def _fold_int(op: str, x: Expr, y: Expr) -> Expr | None:
    if isinstance(x, Const) and isinstance(y, Const):
        a, b = int(x.value), int(y.value)
        table = {
            "add": lambda: a + b, "sub": lambda: a - b, "mul": lambda: a * b,
            "floordiv": lambda: a // b if b else None, "mod": lambda: a % b if b else None,
            "min": lambda: min(a, b), "max": lambda: max(a, b),
            "shr": lambda: a >> b if b >= 0 else None,
        }
        value = table.get(op, lambda: None)()
        return None if value is None else const(value, x.dtype)
    zero_y = isinstance(y, Const) and y.value == 0
    one_y = isinstance(y, Const) and y.value == 1
    if op in ("add", "sub", "shr") and zero_y:
        return x
    if op == "add" and isinstance(x, Const) and x.value == 0:
        return y
    if op == "mul" and (one_y or (isinstance(x, Const) and x.value == 0)):
        return x
    if op == "mul" and (zero_y or (isinstance(x, Const) and x.value == 1)):
        return y
    if op == "floordiv" and one_y:
        return x
    if op == "mod" and one_y:
        return const(0, x.dtype)
    return None


def compare(op: str, a: ExprLike, b: ExprLike) -> Compare:
    if op not in COMPARE_OPS:
        raise ValueError(f"unknown comparison {op!r}")
    x, y = _operands(a, b)
    if x.dtype != y.dtype:
        raise TypeError(f"{op} of {x.dtype} and {y.dtype}: cast one side first")
    return Compare(op, x, y)


def lt(a: ExprLike, b: ExprLike) -> Compare:
    return compare("lt", a, b)


def le(a: ExprLike, b: ExprLike) -> Compare:
    return compare("le", a, b)


def gt(a: ExprLike, b: ExprLike) -> Compare:
    return compare("gt", a, b)


def ge(a: ExprLike, b: ExprLike) -> Compare:
    return compare("ge", a, b)


def eq(a: ExprLike, b: ExprLike) -> Compare:
    return compare("eq", a, b)


def ne(a: ExprLike, b: ExprLike) -> Compare:
    return compare("ne", a, b)


def logical_and(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and a.value is True:
        return b
    if isinstance(b, Const) and b.value is True:
        return a
    return Logical("and", a, b)


def logical_or(a: Expr, b: Expr) -> Expr:
    return Logical("or", a, b)


def select(cond: Expr, a: ExprLike, b: ExprLike) -> Expr:
    x, y = _operands(a, b)
    return Select(cond, x, y, x.dtype)


def cast(a: ExprLike, dtype: Any) -> Expr:
    dtype = np.dtype(dtype)
    x = as_expr(a)
    return x if x.dtype == dtype else Cast(x, dtype)


def call(func: str, *args: ExprLike) -> Call:
    """A registered intrinsic applied to ``args``; its dtype is the registry's rule for it
    (the first argument's for the built-in math functions)."""
    entry = registry.intrinsic(func)
    exprs = tuple(as_expr(a) for a in args)
    if len(exprs) != entry.arity:
        raise TypeError(f"intrinsic {func} takes {entry.arity} arguments, got {len(exprs)}")
    if entry.result_dtype is None:
        raise TypeError(f"intrinsic {func} has no dtype rule: build its Call with the dtype stated")
    return Call(func, exprs, np.dtype(entry.result_dtype(tuple(e.dtype for e in exprs))))


def bitcast(a: ExprLike, dtype: Any) -> Expr:
    """``a``'s bits read as ``dtype``, which has the same width (a bool is the byte 0 or 1)."""
    dtype, x = np.dtype(dtype), as_expr(a)
    if dtype.itemsize != x.dtype.itemsize:
        raise ValueError(f"bitcast from {x.dtype} to {dtype}: the widths differ")
    return x if x.dtype == dtype else Call("bitcast", (x,), dtype)


def shift_right(a: ExprLike, b: ExprLike) -> Expr:
    """``floor(a / 2**b)`` for integers (``b >= 0``): the arithmetic shift right."""
    return binary("shr", a, b)


def minimum(a: ExprLike, b: ExprLike) -> Expr:
    """The smaller of ``a`` and ``b``; NaN if either is NaN (the module's NaN rule)."""
    return binary("min", a, b)


def maximum(a: ExprLike, b: ExprLike) -> Expr:
    """The larger of ``a`` and ``b``; NaN if either is NaN (the module's NaN rule)."""
    return binary("max", a, b)
