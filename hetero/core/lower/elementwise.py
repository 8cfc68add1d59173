"""Lowering elementwise ops: unary maths and activations, binary arithmetic, Where, Cast.

Each op becomes one compute stage whose element is an expression of the operands'
elements at the same (broadcast) position. The index helpers here, :func:`compute_nd`
and :func:`broadcast_load`, serve every family: a stage of any rank, and numpy's
broadcasting written as an index map (a size-1 dim is read at 0, missing leading
dims are dropped).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from hetero.core.ir.ops.elementwise import saturation_bound
from hetero.core.ir.tir.compute import Tensor, compute
from hetero.core.ir.tir.expr import (
    BOOL,
    Expr,
    Load,
    Not,
    Var,
    binary,
    bitcast,
    call,
    cast,
    const,
    eq,
    ge,
    gt,
    le,
    logical_and,
    logical_or,
    lt,
    maximum,
    minimum,
    ne,
    select,
)
from hetero.core.ir.tir.stmt import For, Stmt
from hetero.core.ir.types import TensorType, is_float
from hetero.core.lower.narrow import wide_dtype
from hetero.core.lower.registry import Lowering, lowers

Indices = tuple[Expr, ...]


def serial_nest(shape: Sequence[int], prefix: str, body: Callable[[Indices], Stmt]) -> Stmt:
    """``body(i)`` inside serial loops over ``shape``, the variables named ``prefix0, ...``
    (for stages written as loops, :func:`hetero.core.ir.tir.compute.extern`)."""
    idx = tuple(Var(f"{prefix}{k}") for k in range(len(shape)))
    stmt = body(idx)
    for var, extent in reversed(list(zip(idx, shape))):
        stmt = For(var, extent, stmt)
    return stmt


def compute_nd(shape: Sequence[int], fn: Callable[[Indices], Any], name: str,
               dtype: Any = None, inline: bool = False) -> Tensor:
    """:func:`compute` for any rank: ``fn`` takes the tuple of loop variables ``i0, i1, ...``."""

    def body(*idx: Expr) -> Any:
        return fn(idx)

    # compute() names its loop variables after fcompute's parameters; a varargs function
    # has none, so give it one positional parameter per dim.
    body.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f"i{k}", inspect.Parameter.POSITIONAL_ONLY) for k in range(len(shape))]
    )
    return compute(tuple(shape), body, name, dtype, inline)


def broadcast_load(t: Tensor, idx: Indices) -> Load:
    """``t``'s element at output position ``idx`` under numpy broadcasting (ranks right-aligned)."""
    lead = len(idx) - len(t.shape)
    return t[tuple(0 if d == 1 else idx[lead + k] for k, d in enumerate(t.shape))]


def _float_const(value: float, like: Expr) -> Expr:
    return const(value, like.dtype)


def _hard_sigmoid(x: Expr, alpha: float, beta: float) -> Expr:
    linear = _float_const(alpha, x) * x + _float_const(beta, x)
    return minimum(maximum(linear, _float_const(0.0, x)), _float_const(1.0, x))


def _gelu(x: Expr, approximate: str) -> Expr:
    half, one = _float_const(0.5, x), _float_const(1.0, x)
    if approximate == "tanh":
        inner = _float_const(math.sqrt(2 / math.pi), x) * (x + _float_const(0.044715, x) * (x * x * x))
        return half * x * (one + call("tanh", inner))
    return half * x * (one + call("erf", x / _float_const(math.sqrt(2), x)))


def _abs(x: Expr) -> Expr:
    if x.dtype.kind == "f":
        return call("abs", x)
    if x.dtype.kind == "u":
        return x
    # Integers: no intrinsic needed, and the most negative value wraps as numpy's does.
    return select(lt(x, const(0, x.dtype)), -x, x)


def _int_bounds(lo: float, hi: float, dtype: np.dtype) -> tuple[int | None, int | None]:
    """Clip's float bounds as ``dtype`` integers, None where the bound cuts nothing."""
    info = np.iinfo(dtype)
    low = None if lo <= info.min else min(math.ceil(lo), int(info.max))
    high = None if hi >= info.max else max(math.floor(hi), int(info.min))
    return low, high


def _clip(x: Expr, lo: float, hi: float) -> Expr:
    if x.dtype.kind in "iu":
        low, high = _int_bounds(lo, hi, x.dtype)
    else:
        low = None if lo == -math.inf else lo
        high = None if hi == math.inf else hi
    if low is not None:
        x = maximum(x, const(low, x.dtype))
    if high is not None:
        x = minimum(x, const(high, x.dtype))
    return x


def _sign(x: Expr) -> Expr:
    zero, one = const(0, x.dtype), const(1, x.dtype)
    if x.dtype.kind == "u":
        return select(gt(x, zero), one, zero)
    rest = select(eq(x, zero), zero, x) if x.dtype.kind == "f" else zero  # NaN stays NaN
    return select(gt(x, zero), one, select(lt(x, zero), const(-1, x.dtype), rest))


def _is_inf(x: Expr, positive: int, negative: int) -> Expr:
    tests = ([eq(x, const(math.inf, x.dtype))] if positive else []) + (
        [eq(x, const(-math.inf, x.dtype))] if negative else [])
    if not tests:
        return const(False, BOOL)
    return tests[0] if len(tests) == 1 else logical_or(*tests)


def _softplus(x: Expr) -> Expr:
    """``log(1 + exp(x))`` as ``max(x, 0) + log1p(exp(-|x|))``: no overflow, and exact in the
    tail where ``log(1 + exp(x))`` would round ``exp(x)`` away."""
    return maximum(x, _float_const(0.0, x)) + call("log1p", call("exp", -call("abs", x)))


def _shrink(x: Expr, lambd: float, bias: float) -> Expr:
    # Integers compute in float64 and truncate back, as the reference does.
    v = cast(x, np.float64) if x.dtype.kind in "iu" else x
    low, high = lt(v, _float_const(-lambd, v)), gt(v, _float_const(lambd, v))
    out = select(low, v + _float_const(bias, v),
                 select(high, v - _float_const(bias, v), _float_const(0.0, v)))
    return cast(out, x.dtype)


def _bit_not(x: Expr) -> Expr:
    ones = -1 if x.dtype.kind == "i" else int(np.iinfo(x.dtype).max)
    return binary("bit_xor", x, const(ones, x.dtype))


def _to_e8m0(x: Expr, saturate: int, round_mode: str) -> Expr:
    """ONNX's float-to-float8_e8m0 conversion (see ``to_e8m0_bits``) on float32 bits."""
    u32 = np.dtype(np.uint32)
    bits = bitcast(cast(x, np.float32), u32)

    def mask(m: int) -> Expr:
        return ne(binary("bit_and", bits, const(m, u32)), const(0, u32))

    exponent = binary("bit_and", binary("shr", bits, const(23, u32)), const(0xFF, u32))
    special = eq(exponent, const(0xFF, u32))
    if round_mode == "nearest":
        up = logical_and(mask(0x400000), logical_or(logical_or(mask(0x200000), mask(0x1FFFFF)),
                                                    gt(exponent, const(0, u32))))
    elif round_mode == "up":
        up = mask(0x7FFFFF)
    else:
        up = None
    if up is not None and saturate:
        up = logical_and(up, ne(exponent, const(0xFE, u32)))
    rounded = exponent if up is None else exponent + cast(up, u32)
    out = select(special, const(0xFF, u32), rounded)
    return bitcast(cast(out, np.uint8), np.dtype(ml_dtypes.float8_e8m0fnu))


def _cast(x: Expr, to: np.dtype, saturate: int = 0, round_mode: str = "up") -> Expr:
    if to == BOOL and x.dtype != BOOL:
        x = x if wide_dtype(x.dtype) is None else cast(x, wide_dtype(x.dtype))
        return ne(x, const(0, x.dtype))
    if to.name == "float8_e8m0fnu" and is_float(x.dtype):
        return _to_e8m0(x, saturate, round_mode)
    bound = saturation_bound(to)
    if bound is not None and saturate and is_float(x.dtype):
        wide = cast(x, np.float64 if x.dtype == np.float64 else np.float32)
        x = minimum(maximum(wide, const(-bound, wide.dtype)), const(bound, wide.dtype))
    return cast(x, to)


#: Each one-input op's element as a function of the input's element and the node's attributes.
UNARY: dict[str, Callable[[Expr, dict[str, Any]], Expr]] = {
    "Relu": lambda x, a: maximum(x, const(0, x.dtype)),
    "LeakyRelu": lambda x, a: select(ge(x, const(0, x.dtype)), x, _float_const(a["alpha"], x) * x),
    "Sigmoid": lambda x, a: _float_const(1.0, x) / (_float_const(1.0, x) + call("exp", -x)),
    "HardSigmoid": lambda x, a: _hard_sigmoid(x, a["alpha"], a["beta"]),
    "HardSwish": lambda x, a: x * _hard_sigmoid(x, 1 / 6, 0.5),
    "Tanh": lambda x, a: call("tanh", x),
    "Erf": lambda x, a: call("erf", x),
    "Gelu": lambda x, a: _gelu(x, a["approximate"]),
    "Sqrt": lambda x, a: call("sqrt", x),
    "Exp": lambda x, a: call("exp", x),
    "Log": lambda x, a: call("log", x),
    "Reciprocal": lambda x, a: _float_const(1.0, x) / x,
    "Floor": lambda x, a: call("floor", x),
    "Ceil": lambda x, a: call("ceil", x),
    "Neg": lambda x, a: -x,
    "Abs": lambda x, a: _abs(x),
    "Not": lambda x, a: Not(x),
    "Identity": lambda x, a: x,
    "Dropout": lambda x, a: x,
    "Clip": lambda x, a: _clip(x, a["min"], a["max"]),
    "Cast": lambda x, a: _cast(x, np.dtype(a["to"]), a["saturate"], a["round_mode"]),
    "Sin": lambda x, a: call("sin", x),
    "Cos": lambda x, a: call("cos", x),
    "Tan": lambda x, a: call("tan", x),
    "Asin": lambda x, a: call("asin", x),
    "Acos": lambda x, a: call("acos", x),
    "Atan": lambda x, a: call("atan", x),
    "Sinh": lambda x, a: call("sinh", x),
    "Cosh": lambda x, a: call("cosh", x),
    "Asinh": lambda x, a: call("asinh", x),
    "Acosh": lambda x, a: call("acosh", x),
    "Atanh": lambda x, a: call("atanh", x),
    "Round": lambda x, a: call("round_even", x),
    "Sign": lambda x, a: _sign(x),
    "IsNaN": lambda x, a: ne(x, x),
    "IsInf": lambda x, a: _is_inf(x, a["detect_positive"], a["detect_negative"]),
    "Elu": lambda x, a: select(lt(x, _float_const(0.0, x)),
                               _float_const(a["alpha"], x) * call("expm1", x), x),
    "Selu": lambda x, a: select(gt(x, _float_const(0.0, x)), _float_const(a["gamma"], x) * x,
                                _float_const(a["alpha"] * a["gamma"], x) * call("expm1", x)),
    "Celu": lambda x, a: maximum(x, _float_const(0.0, x)) + minimum(
        _float_const(a["alpha"], x) * call("expm1", x / _float_const(a["alpha"], x)),
        _float_const(0.0, x)),
    "Softplus": lambda x, a: _softplus(x),
    "Softsign": lambda x, a: x / (_float_const(1.0, x) + call("abs", x)),
    "Mish": lambda x, a: x * call("tanh", _softplus(x)),
    "Swish": lambda x, a: x * (_float_const(1.0, x) / (
        _float_const(1.0, x) + call("exp", -(_float_const(a["alpha"], x) * x)))),
    "ThresholdedRelu": lambda x, a: select(gt(x, _float_const(a["alpha"], x)), x,
                                           _float_const(0.0, x)),
    "Shrink": lambda x, a: _shrink(x, a["lambd"], a["bias"]),
    "BitwiseNot": lambda x, a: _bit_not(x),
}

#: Each two-input op's element from its (broadcast) operands' elements.
BINARY: dict[str, Callable[[Expr, Expr], Expr]] = {
    "Add": lambda a, b: binary("add", a, b),
    "Sub": lambda a, b: binary("sub", a, b),
    "Mul": lambda a, b: binary("mul", a, b),
    # The IR's div truncates integers toward zero, which is ONNX's integer Div.
    "Div": lambda a, b: binary("div", a, b),
    "Pow": lambda a, b: binary("pow", a, b),
    "Max": maximum,
    "Min": minimum,
    "Equal": eq,
    "Less": lt,
    "LessOrEqual": le,
    "Greater": gt,
    "GreaterOrEqual": ge,
    "And": logical_and,
    "Or": logical_or,
    "Xor": ne,
    "BitwiseAnd": lambda a, b: binary("bit_and", a, b),
    "BitwiseOr": lambda a, b: binary("bit_or", a, b),
    "BitwiseXor": lambda a, b: binary("bit_xor", a, b),
    # The slope is broadcast to X's shape (PRelu's unidirectional broadcasting).
    "PRelu": lambda x, slope: select(lt(x, const(0, x.dtype)), slope * x, x),
}


def _fmod(a: Expr, b: Expr) -> Expr:
    """C's fmod, the remainder of truncated division (the sign of ``a``)."""
    if a.dtype.kind in "iu":
        # Truncating div, then a - q*b, is exact; a zero divisor gives 0, as numpy's does.
        zero = const(0, a.dtype)
        return select(eq(b, zero), zero, a - (a / b) * b)
    # On magnitudes floored and truncated remainders agree, and the IR's floored mod is
    # exact (LLVM's frem); the sign is then a's.
    m = call("abs", a) % call("abs", b)
    return select(lt(a, _float_const(0.0, a)), m * _float_const(-1.0, a), m)


#: Two-input ops with attributes: their element from the operands' elements and the attributes.
BINARY_ATTRS: dict[str, Callable[[Expr, Expr, dict[str, Any]], Expr]] = {
    "Mod": lambda a, b, at: _fmod(a, b) if at["fmod"] else a % b,
    "BitShift": lambda a, b, at: binary("shl" if at["direction"] == "LEFT" else "shr", a, b),
}


def _unary_lowering(fn: Callable[[Expr, dict[str, Any]], Expr]) -> Lowering:
    def lower_unary(inputs: list[Tensor | None], attrs: dict[str, Any],
                    out_types: list[TensorType], names: list[str]) -> list[Tensor]:
        x = inputs[0]
        assert x is not None
        out = out_types[0]
        return [compute_nd(out.shape, lambda i: fn(x[i], attrs), names[0], out.dtype)]

    return lower_unary


def _binary_lowering(fn: Callable[[Expr, Expr, dict[str, Any]], Expr]) -> Lowering:
    def lower_binary(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
        a, b = inputs
        assert a is not None and b is not None
        out = out_types[0]
        return [compute_nd(out.shape, lambda i: fn(broadcast_load(a, i), broadcast_load(b, i), attrs),
                           names[0], out.dtype)]

    return lower_binary


def _without_attrs(fn: Callable[[Expr, Expr], Expr]) -> Callable[[Expr, Expr, dict[str, Any]], Expr]:
    return lambda a, b, attrs: fn(a, b)


for _op, _fn in UNARY.items():
    lowers(_op)(_unary_lowering(_fn))
for _op, _bfn in BINARY.items():
    lowers(_op)(_binary_lowering(_without_attrs(_bfn)))
for _op, _afn in BINARY_ATTRS.items():
    lowers(_op)(_binary_lowering(_afn))


@lowers("Where")
def lower_where(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """``output[i] = X[i] if condition[i] else Y[i]``, all three broadcast."""
    cond, x, y = inputs
    assert cond is not None and x is not None and y is not None
    out = out_types[0]
    return [compute_nd(out.shape, lambda i: select(broadcast_load(cond, i), broadcast_load(x, i),
                                                   broadcast_load(y, i)), names[0], out.dtype)]
