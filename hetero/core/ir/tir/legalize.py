"""Legalisation: the tensor IR's higher-level semantics rewritten into primitive operations.

The IR defines its operations the way numpy computes them (see :mod:`.expr`): floored
``floordiv``/``mod``, integer division by zero giving 0, NaN-propagating float
``min``/``max``, shifts defined for any amount, rounding to float16, bfloat16 and the
narrow storage types. :func:`legalize` rewrites all of that into a small primitive set
that maps one to one onto LLVM IR, PTX or C, so that every renderer maps primitives
only and none of them re-derives the IR's meaning.

Invariant: after ``legalize(func, native)``, every expression in ``func`` is in the
primitive set below (:func:`check_legal` names the first one that is not), and
``run_func`` gives the same results for ``func`` and for its legalised form.

The primitive set, what a renderer must map:

- ``Var``, ``Load``, ``Select`` (both operands may be evaluated), ``Logical``, ``Not``;
  ``Const`` of every type but the storage types.
- ``Compare`` of booleans, integers (signed or unsigned by the dtype) and floats
  (ordered, except ``ne``, which is true when either operand is NaN).
- ``Binary``: ``add``, ``sub``, ``mul`` (integers wrap, floats IEEE; a renderer may
  contract a multiply and an add); ``div`` of floats; ``tdiv`` and ``trem`` (C's ``/``
  and ``%``, ``fmod`` for floats) whose divisor is never 0 nor, for signed integers,
  -1; ``min``/``max`` of integers; ``bit_and``, ``bit_or``, ``bit_xor``; ``shr``
  (arithmetic for signed types, logical for unsigned) and ``shl`` whose amount is a
  literal below the bit width or ``bit_and(x, width - 1)``; ``pow`` (floats: the
  target's power function; integers: exponentiation by squaring, wrapped, with a
  negative exponent giving ``trunc(1 / a**-b)``; a loop, which an expression rewrite
  cannot write without let-bindings). Float ``min``/``max`` stay only where the
  renderer declares :attr:`Native.ieee_minmax`: then they mean IEEE 754-2019
  ``minimum``/``maximum`` (LLVM's ``llvm.minimum``/``llvm.maximum``), with either zero
  for a tie of ``-0`` and ``+0``.
- ``Cast`` between booleans, the integer types and float16/32/64 (float to integer
  truncates toward zero; out of range or NaN the IR leaves the result open; to bool is
  ``!= 0``), except to float16 from float64 or an integer.
- ``Call`` of a built-in math intrinsic on float16/32/64 (the renderer's math library:
  LLVM intrinsics, libm, libdevice), ``fence``, ``dot4_u8s8`` where the renderer
  declares :attr:`Native.dot4_u8s8` (elsewhere it becomes four byte extractions,
  multiplies and adds), ``bitcast`` between types of one width
  (a storage type only to or from an integer), and an intrinsic a plugin registered,
  as it is (the plugin's renderer provides it).
- Storage types (bfloat16, the float8 variants, float4, int4, int2) are only loaded,
  stored, selected and bitcast to or from integers; their register form is their bits
  (:mod:`.legalize_casts`).

Example::

    func = legalize(func, Native(ieee_minmax=True))   # a CPU has llvm.minimum/maximum
    check_legal(func, Native(ieee_minmax=True))       # passes
"""

from __future__ import annotations

from dataclasses import dataclass
import dataclasses
from typing import Any

import numpy as np

from hetero.core.ir.tir.expr import (
    Binary, Call, Cast, Compare, Const, Expr, binary, bitcast, call, cast, compare, const, eq, gt,
    logical_and, logical_or, lt, ne, select,
)
from hetero.core.ir.tir.functor import ExprFunctor, StmtExprMutator, StmtExprVisitor
from hetero.core.ir.tir.legalize_casts import (
    F16, F64, is_storage, legal_bitcast, legal_cast, storage_const, wide_dtype,
)
from hetero.core.ir.tir.stmt import PrimFunc
from hetero.errors import CodegenError, VerificationError

_FLOOR_OPS = ("floordiv", "mod")
_BITS = {2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}
#: The built-in math intrinsics, which numpy computes in float64 for an integer operand.
_MATH = ("exp", "log", "sqrt", "tanh", "erf", "abs", "floor", "ceil", "round_even", "expm1", "log1p",
         "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
#: Of those, the identity on integers (``abs`` of unsigned ones too).
_INTEGER_IDENTITY = ("floor", "ceil", "round_even")


@dataclass(frozen=True)
class Native:
    """What a renderer maps natively beyond the primitive set.

    ``ieee_minmax``: float ``min``/``max`` are IEEE 754-2019 ``minimum``/``maximum``
    on this target (NaN-propagating), so they stay as they are instead of becoming
    compares and selects. ``dot4_u8s8``: that intrinsic stays a call.
    """

    ieee_minmax: bool = False
    #: ``dot4_u8s8`` stays a call (the renderer has a 4-way byte dot product, x86's
    #: ``vpdpbusd``) instead of becoming shifts, masks, multiplies and adds.
    dot4_u8s8: bool = False


def legalize(func: PrimFunc, native: Native = Native()) -> PrimFunc:
    """``func`` with every higher-level operation rewritten into primitives (see the
    module's docstring); ``func`` itself is unchanged. A subexpression shared in the
    input stays shared in the output, and the rewrites share their operands (``a``
    and ``b`` of a ``floordiv`` appear once each as objects), so a renderer that
    remembers what it emitted per object emits each once."""
    body = _Legalizer(native).visit_stmt(func.body)
    return func if body is func.body else dataclasses.replace(func, body=body)


def check_legal(func: PrimFunc, native: Native = Native()) -> PrimFunc:
    """Raise VerificationError naming the first non-primitive expression of ``func``;
    return ``func`` when only primitives remain."""
    checker = _Checker(native)
    checker.visit_stmt(func.body)
    if checker.problem is not None:
        raise VerificationError(f"func {func.name}: {checker.problem} is not a primitive operation; "
                                "run hetero.core.ir.tir.legalize.legalize on it first")
    return func


def require_primitive(e: Expr, native: Native, where: str) -> None:
    """CodegenError naming ``where`` unless the node ``e`` is primitive: what a renderer
    says when it is handed a function that was not legalised."""
    problem = why_not_primitive(e, native)
    if problem is not None:
        raise CodegenError(f"{where}: {problem} is not a primitive operation; "
                           "legalize the function (hetero.core.ir.tir.legalize) before rendering")


def why_not_primitive(e: Expr, native: Native = Native()) -> str | None:
    """What makes the node ``e`` (its children aside) non-primitive, or None if it is one."""
    if isinstance(e, Binary):
        return _binary_problem(e, native)
    if isinstance(e, Compare) and is_storage(e.a.dtype):
        return f"{e.op} of {e.a.dtype.name}"
    if isinstance(e, Cast):
        src, dst = e.a.dtype, e.dtype
        if is_storage(src) or is_storage(dst):
            return f"cast from {src.name} to {dst.name}"
        if dst == F16 and src.kind != "b" and (src.kind != "f" or src == F64):
            return f"cast from {src.name} to float16"
        return None
    if isinstance(e, Const) and is_storage(e.dtype):
        return f"literal of {e.dtype.name}"
    if isinstance(e, Call):
        return _call_problem(e, native)
    if type(e).__name__ == "Reduce":
        return "a Reduce (lower compute definitions with tir.lower)"
    return None


def _binary_problem(e: Binary, native: Native) -> str | None:
    dtype, what = e.dtype, f"{e.op} of {e.dtype.name}"
    if is_storage(dtype):
        return f"{what} (arithmetic on a storage type: widen it, as hetero.core.lower.narrow does)"
    if dtype.kind == "b":
        return f"{what} (arithmetic on booleans: cast them to an integer type)"
    if e.op in _FLOOR_OPS or (e.op == "div" and dtype.kind in "iu"):
        return what
    if e.op in ("min", "max") and dtype.kind == "f" and not native.ieee_minmax:
        return what
    if e.op in ("shr", "shl") and not _amount_in_range(e.b, dtype):
        return f"{what} by an amount that may reach the bit width"
    return None


def _call_problem(e: Call, native: Native) -> str | None:
    arg = e.args[0].dtype if e.args else e.dtype
    if e.func == "dot4_u8s8" and not native.dot4_u8s8:
        return "dot4_u8s8"
    if e.func == "bitcast":
        pair = (arg, e.dtype)
        if any(is_storage(x) and y.kind not in "iu" for x, y in (pair, pair[::-1])):
            return f"bitcast from {arg.name} to {e.dtype.name}"
        return None
    if e.func in _MATH and (arg.kind != "f" or is_storage(arg)):
        return f"{e.func} of {arg.name}"
    return None


def _amount_in_range(b: Expr, dtype: np.dtype) -> bool:
    width = 8 * dtype.itemsize
    if isinstance(b, Const):
        return 0 <= int(b.value) < width
    return (isinstance(b, Binary) and b.op == "bit_and" and isinstance(b.b, Const)
            and b.b.value == width - 1)


class _Legalizer(StmtExprMutator):
    """The rewrite, bottom-up; each input object is rewritten once (memo by identity)."""

    def __init__(self, native: Native) -> None:
        self.native = native
        self._done: dict[int, tuple[Expr, Expr]] = {}

    def visit_expr(self, e: Expr) -> Expr:  # type: ignore[override]
        hit = self._done.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out: Expr = ExprFunctor.visit_expr(self, e)
        self._done[id(e)] = (e, out)
        return out

    def visit_Const(self, e: Any) -> Expr:
        return storage_const(e.value, e.dtype) if is_storage(e.dtype) else e  # type: ignore[no-any-return]

    def visit_Cast(self, e: Any) -> Expr:
        return legal_cast(self.visit_expr(e.a), e.dtype)

    def visit_Compare(self, e: Any) -> Expr:
        a, b = self.visit_expr(e.a), self.visit_expr(e.b)
        if is_storage(a.dtype):
            wide = wide_dtype(a.dtype)
            return compare(e.op, legal_cast(a, wide), legal_cast(b, wide))
        return e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)  # type: ignore[no-any-return]

    def visit_Call(self, e: Any) -> Expr:
        args = tuple(self.visit_expr(a) for a in e.args)
        x = args[0] if args else None
        if e.func == "bitcast" and x is not None:
            return legal_bitcast(x, e.dtype)
        if e.func == "dot4_u8s8" and not self.native.dot4_u8s8:
            return _dot4_u8s8(*args)
        if x is not None and x.dtype.kind in "iub" and e.func in _MATH:
            if e.func in _INTEGER_IDENTITY or (e.func == "abs" and x.dtype.kind != "i"):
                return x
            if e.func == "abs":
                zero = const(0, x.dtype)
                return select(lt(x, zero), binary("sub", zero, x), x)
            # numpy computes exp/log/... of an integer in float64; the IR casts back.
            return legal_cast(call(e.func, cast(x, F64), *args[1:]), e.dtype)
        return e if all(n is o for n, o in zip(args, e.args)) else dataclasses.replace(e, args=args)  # type: ignore[no-any-return]

    def visit_Binary(self, e: Any) -> Expr:
        a, b = self.visit_expr(e.a), self.visit_expr(e.b)
        dtype, op = e.dtype, e.op
        if dtype.kind in "iu":
            signed = dtype.kind == "i"
            if op == "div":
                return _quot_rem(a, b, signed)[0]
            if op in _FLOOR_OPS:
                return _int_floor(op, a, b, signed)
            if op in ("shr", "shl") and not _amount_in_range(b, dtype):
                return _shift(op, a, b, signed)
        elif dtype.kind == "f" and not is_storage(dtype):
            if op in _FLOOR_OPS:
                return _float_floor(op, a, b)
            if op in ("min", "max") and not self.native.ieee_minmax:
                return _nan_extreme(op, a, b)
        return e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)  # type: ignore[no-any-return]


def _dot4_u8s8(acc: Expr, a: Expr, b: Expr) -> Expr:
    """``acc`` plus the four products of ``a``'s bytes zero-extended and ``b``'s
    sign-extended, in ``acc``'s (wrapping) integer type."""
    dtype = acc.dtype
    total = acc
    for k in range(4):
        unsigned = binary("bit_and", binary("shr", a, const(8 * k, dtype)), const(0xFF, dtype))
        up = binary("shl", b, const(24 - 8 * k, dtype)) if k < 3 else b
        signed = binary("shr", up, const(24, dtype))
        total = binary("add", total, binary("mul", unsigned, signed))
    return total


def _quot_rem(a: Expr, b: Expr, signed: bool) -> tuple[Expr, Expr]:
    """Truncating quotient and remainder with the IR's answers where ``tdiv``/``trem``
    are undefined: 0 for a zero divisor; ``-a`` (wrapped) and 0 for a divisor of -1."""
    dtype = a.dtype
    zero, one = const(0, dtype), const(1, dtype)
    if isinstance(b, Const) and b.value != 0 and not (signed and b.value == -1):
        return binary("tdiv", a, b), binary("trem", a, b)
    is_zero = eq(b, zero)
    if not signed:
        safe = select(is_zero, one, b)
        q, r = binary("tdiv", a, safe), binary("trem", a, safe)
    else:
        minus_one = eq(b, const(-1, dtype))
        safe = select(logical_or(is_zero, minus_one), one, b)
        q = select(minus_one, binary("sub", zero, a), binary("tdiv", a, safe))
        r = select(minus_one, zero, binary("trem", a, safe))
    return select(is_zero, zero, q), select(is_zero, zero, r)


def _int_floor(op: str, a: Expr, b: Expr, signed: bool) -> Expr:
    """Floored quotient or remainder: one step down where the remainder's sign differs from b's."""
    q, r = _quot_rem(a, b, signed)
    if not signed:
        return q if op == "floordiv" else r
    zero = const(0, a.dtype)
    if isinstance(b, Const):
        fix = lt(r, zero) if b.value > 0 else gt(r, zero)
    else:
        fix = logical_and(ne(r, zero), ne(lt(r, zero), lt(b, zero)))
    if op == "floordiv":
        return binary("sub", q, cast(fix, a.dtype))
    return select(fix, binary("add", r, b), r)


def _shift(op: str, a: Expr, b: Expr, signed: bool) -> Expr:
    """The IR's total shifts from shifts whose amount is below the bit width: an amount of
    the width or more (read as unsigned) gives 0, or the sign for a signed ``shr``."""
    dtype = a.dtype
    top = 8 * dtype.itemsize - 1
    unsigned = np.dtype(f"uint{8 * dtype.itemsize}")
    past = gt(cast(b, unsigned), const(top, unsigned))
    if op == "shr" and signed:
        return binary("shr", a, binary("bit_and", select(past, const(top, dtype), b), top))
    return select(past, const(0, dtype), binary(op, a, binary("bit_and", b, top)))


def _copysign_zero(x: Expr) -> Expr:
    """A zero with ``x``'s sign bit."""
    bits = _BITS[x.dtype.itemsize]
    sign = binary("bit_and", bitcast(x, bits), 1 << (8 * x.dtype.itemsize - 1))
    return bitcast(sign, x.dtype)


def _float_floor(op: str, a: Expr, b: Expr) -> Expr:
    """numpy's float divmod: the remainder takes the divisor's sign; the quotient is the
    floor of the exact quotient, with the sign of zero that ``a / b`` has; a zero
    divisor gives ``a / b`` (an infinity or NaN) as the quotient."""
    dtype = a.dtype
    zero, one = const(0.0, dtype), const(1.0, dtype)
    raw = binary("trem", a, b)
    fix = logical_and(ne(raw, zero), ne(lt(b, zero), lt(raw, zero)))
    if op == "mod":
        mod = select(fix, binary("add", raw, b), raw)
        return select(eq(mod, zero), _copysign_zero(b), mod)
    div = binary("div", binary("sub", a, raw), b)
    div = select(fix, binary("sub", div, one), div)
    floor = call("floor", div)
    floor = select(gt(binary("sub", div, floor), const(0.5, dtype)), binary("add", floor, one), floor)
    quotient = binary("div", a, b)
    floor = select(eq(div, zero), _copysign_zero(quotient), floor)
    return select(eq(b, zero), quotient, floor)


def _nan_extreme(op: str, a: Expr, b: Expr) -> Expr:
    """The IR's float ``min``/``max`` in compares and selects: a NaN operand wins."""
    pick_b = lt(b, a) if op == "min" else gt(b, a)
    return select(ne(a, a), a, select(ne(b, b), b, select(pick_b, b, a)))


class _Checker(StmtExprVisitor):
    """Finds the first non-primitive expression, each object once."""

    def __init__(self, native: Native) -> None:
        self.native = native
        self.problem: str | None = None
        self._seen: set[int] = set()
        self._keep: list[Expr] = []

    def visit_expr(self, e: Expr) -> None:  # type: ignore[override]
        if self.problem is not None or id(e) in self._seen:
            return
        self._seen.add(id(e))
        self._keep.append(e)
        self.problem = why_not_primitive(e, self.native)
        if self.problem is None:
            ExprFunctor.visit_expr(self, e)
