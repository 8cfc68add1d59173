"""Elementwise ops: unary maths and activations, binary arithmetic and comparisons.

Binary ops broadcast like numpy (ONNX's multidirectional broadcasting) and need
both operands of one dtype. Float-only ops reject integer inputs at inference time.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

import ml_dtypes
import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, no_flops, register
from hetero.core.ir.ops.common import broadcast_shapes, require_dtype, same_dtype
from hetero.core.ir.types import (
    ALL_DTYPES, FLOAT_DTYPES, NARROW_FLOAT_DTYPES, NUMERIC_DTYPES, TensorType, is_float,
)
from hetero.errors import OpAttributeError, ShapeError

_BOOL = (np.dtype(bool),)
_SIGNED = tuple(d for d in NUMERIC_DTYPES if d.kind != "u")


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _unary(
    name: str,
    fn: Callable[..., np.ndarray],
    allowed: tuple[np.dtype, ...] = FLOAT_DTYPES,
    attrs: dict[str, Attr] | None = None,
    doc: str = "",
    check: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        require_dtype(ins[0], allowed, f"{name} input")
        if check is not None:
            check(attrs)
        return [ins[0]]

    def reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        return [np.asarray(fn(ins[0], **attrs)).astype(ins[0].dtype)]

    register(OpDef(name, ("X",), ("Y",), infer, reference, attrs=attrs or {}, doc=doc))


def _hard_sigmoid(x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    return np.clip(alpha * x + beta, 0, 1)


def _check_gelu(attrs: dict[str, Any]) -> None:
    if attrs["approximate"] not in ("none", "tanh"):
        raise OpAttributeError(
            f"Gelu approximate must be 'none' or 'tanh', got {attrs['approximate']!r}"
        )


def _int_bound(bound: float, dtype: np.dtype, rounding: Callable[[float], int]) -> np.generic:
    """``bound`` rounded into ``dtype``'s range, as a scalar of that dtype."""
    info = np.iinfo(dtype)
    if bound <= info.min:
        return dtype.type(info.min)
    if bound >= info.max:
        return dtype.type(info.max)
    return dtype.type(rounding(bound))


def _clip(x: np.ndarray, min: float, max: float) -> np.ndarray:  # noqa: A002 - ONNX's names
    if x.dtype.kind in "iu":
        # Integer bounds keep the comparison in x's dtype: int64 values beyond 2**53
        # must not round-trip through float64.
        return np.clip(x, _int_bound(min, x.dtype, math.ceil), _int_bound(max, x.dtype, math.floor))
    return np.clip(x, min, max)


_unary("Relu", lambda x: np.maximum(x, 0), _SIGNED, doc="max(x, 0)")
_unary("LeakyRelu", lambda x, alpha: np.where(x >= 0, x, alpha * x),
       attrs={"alpha": Attr("float", 0.01, "slope for x < 0")}, doc="x if x >= 0 else alpha*x")
_unary("Sigmoid", lambda x: 1 / (1 + np.exp(-x)), doc="1 / (1 + exp(-x))")
_unary("HardSigmoid", _hard_sigmoid,
       attrs={"alpha": Attr("float", 0.2, "slope"), "beta": Attr("float", 0.5, "offset")},
       doc="clip(alpha*x + beta, 0, 1)")
_unary("HardSwish", lambda x: x * _hard_sigmoid(x, 1 / 6, 0.5), doc="x * clip(x/6 + 1/2, 0, 1)")
_unary("Tanh", np.tanh, doc="tanh(x)")
_unary("Erf", _erf, doc="the Gauss error function")
_unary("Gelu", lambda x, approximate: (
    0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    if approximate == "tanh" else 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    attrs={"approximate": Attr("str", "none", "'none' (exact, with erf) or 'tanh'")},
    doc="x * Phi(x), Phi the standard normal CDF", check=_check_gelu)
_unary("Sqrt", np.sqrt, doc="square root")
_unary("Exp", np.exp, doc="e**x")
_unary("Log", np.log, doc="natural logarithm")
_unary("Reciprocal", lambda x: 1 / x, doc="1 / x")
_unary("Floor", np.floor, doc="round down")
_unary("Ceil", np.ceil, doc="round up")
_unary("Neg", np.negative, _SIGNED, doc="-x")
_unary("Abs", np.abs, NUMERIC_DTYPES, doc="|x|")
_unary("Not", np.logical_not, _BOOL, doc="logical not")
_unary("Identity", lambda x: x, ALL_DTYPES, doc="x")
_unary("Dropout", lambda x: x, FLOAT_DTYPES,
       doc="inference-mode dropout: the identity (the mask output is not part of the op)")
_unary("Clip", _clip, NUMERIC_DTYPES,
       attrs={"min": Attr("float", -math.inf, "lower bound"),
              "max": Attr("float", math.inf, "upper bound")},
       doc="min(max(x, min), max); ReLU6 is Clip(min=0, max=6)")


_ROUND_MODES = ("up", "down", "nearest")


def _cast_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    if attrs["round_mode"] not in _ROUND_MODES:
        raise OpAttributeError(f"Cast round_mode must be one of {_ROUND_MODES}, got {attrs['round_mode']!r}")
    return [TensorType(ins[0].shape, attrs["to"])]


def to_e8m0_bits(x: np.ndarray, saturate: int, round_mode: str) -> np.ndarray:
    """ONNX's conversion of float ``x`` (as float32) to float8_e8m0 bits: the exponent of
    |x|, rounded by ``round_mode`` from its significand; NaN and infinities give NaN
    (0xFF); saturation keeps 2**127 from rounding up to NaN."""
    bits = np.asarray(x, np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "nearest":
        round_up = ((bits & 0x400000) != 0) & (((bits & 0x200000) != 0) | ((bits & 0x1FFFFF) != 0)
                                               | (exponent > 0))
    elif round_mode == "up":
        round_up = (bits & 0x7FFFFF) != 0
    else:
        round_up = np.zeros(bits.shape, bool)
    round_up &= ~special
    if saturate:
        round_up &= exponent != 0xFE
    return np.where(special, 0xFF, exponent + round_up).astype(np.uint8)


def saturation_bound(to: np.dtype) -> float | None:
    """The bound a saturating Cast to ``to`` clips to: float8 types only (float4 always
    saturates, float8_e8m0 has its own rule)."""
    if to in NARROW_FLOAT_DTYPES and to.name.startswith("float8") and to.name != "float8_e8m0fnu":
        return float(ml_dtypes.finfo(to).max)
    return None


def _cast_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, to = ins[0], np.dtype(attrs["to"])
    if to.name == "float8_e8m0fnu" and is_float(x.dtype):
        return [to_e8m0_bits(x, attrs["saturate"], attrs["round_mode"]).view(to)]
    bound = saturation_bound(to)
    if bound is not None and attrs["saturate"] and is_float(x.dtype):
        # ONNX's saturate: out-of-range values (infinities too) clip; NaN stays NaN.
        wide = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
        x = np.clip(wide, -bound, bound)
    # A NaN or an out-of-range value cast to an integer, or past a narrow float's range, is
    # what this cast means (ONNX leaves the integer result undefined; numpy's is the one
    # hetero keeps): numpy's warning about it says nothing to the user.
    with np.errstate(invalid="ignore", over="ignore"):
        return [x.astype(to)]


register(OpDef(
    "Cast", ("X",), ("Y",), _cast_infer, _cast_reference,
    attrs={"to": Attr("dtype", doc="target dtype"),
           "saturate": Attr("int", 1, "float8 targets: 1 clips out-of-range values (and "
                                      "infinities) to the largest finite value, 0 gives inf or NaN"),
           "round_mode": Attr("str", "up", "float8_e8m0 targets from floats: 'up', 'down' or "
                                          "'nearest' power of two")},
    flops=no_flops,
    doc="convert to dtype ``to`` (float to int truncates toward zero, as numpy does; narrow "
        "types as ml_dtypes converts them, to nearest even)",
))


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
            allowed: tuple[np.dtype, ...], result: np.dtype | None = None, doc: str = "") -> None:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        dtype = same_dtype(ins, f"{name} inputs")
        require_dtype(ins[0], allowed, f"{name} input")
        return [TensorType(broadcast_shapes(ins[0].shape, ins[1].shape), result or dtype)]

    def reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        out = np.asarray(fn(ins[0], ins[1]))
        return [out.astype(result or ins[0].dtype)]

    register(OpDef(name, ("A", "B"), ("C",), infer, reference, doc=doc))


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        # ONNX integer Div truncates toward zero, like C. Floor division stays exact in
        # integers (a detour through float64 is not, beyond 2**53); it rounds down
        # where truncation rounds up: inexact quotients of operands of opposite signs.
        quotient = np.floor_divide(a, b)
        return quotient + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
    return a / b


_ANY = NUMERIC_DTYPES
_binary("Add", np.add, _ANY, doc="a + b")
_binary("Sub", np.subtract, _ANY, doc="a - b")
_binary("Mul", np.multiply, _ANY, doc="a * b")
_binary("Div", _int_div, _ANY, doc="a / b (integers truncate toward zero)")
def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        # Integers wrap; a negative exponent gives trunc(1 / a**-b): 0 unless |a| is 1
        # (numpy refuses negative integer exponents, ONNX leaves them to the kernel).
        a, b = np.broadcast_arrays(a, b)
        positive = np.power(a, np.maximum(b, 0))
        odd = (b % 2 != 0).astype(a.dtype)
        recip = np.where(a == 1, 1, np.where(a == -1, 1 - 2 * odd, 0)) if a.dtype.kind == "i" \
            else (a == 1).astype(a.dtype)
        return np.where(b < 0, recip, positive).astype(a.dtype)
    return np.power(a, b)


_binary("Pow", _power, _ANY, doc="a ** b (integers wrap; a negative integer exponent truncates 1 / a**-b)")
_binary("Max", np.maximum, _ANY, doc="elementwise maximum")
_binary("Min", np.minimum, _ANY, doc="elementwise minimum")
_binary("Equal", np.equal, _ANY + _BOOL, np.dtype(bool), doc="a == b")
_binary("Less", np.less, _ANY, np.dtype(bool), doc="a < b")
_binary("LessOrEqual", np.less_equal, _ANY, np.dtype(bool), doc="a <= b")
_binary("Greater", np.greater, _ANY, np.dtype(bool), doc="a > b")
_binary("GreaterOrEqual", np.greater_equal, _ANY, np.dtype(bool), doc="a >= b")
_binary("And", np.logical_and, _BOOL, doc="logical and")
_binary("Or", np.logical_or, _BOOL, doc="logical or")


def _where_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    require_dtype(ins[0], _BOOL, "Where condition")
    dtype = same_dtype(ins[1:], "Where's X and Y")
    return [TensorType(broadcast_shapes(*(t.shape for t in ins)), dtype)]


register(OpDef(
    "Where", ("condition", "X", "Y"), ("output",), _where_infer,
    lambda ins, attrs: [np.where(ins[0], ins[1], ins[2])],
    doc="X where condition else Y, broadcasting all three",
))


# -- trigonometric and hyperbolic functions, rounding, sign, float classes ------------------

for _name, _fn in (("Sin", np.sin), ("Cos", np.cos), ("Tan", np.tan), ("Asin", np.arcsin),
                   ("Acos", np.arccos), ("Atan", np.arctan), ("Sinh", np.sinh), ("Cosh", np.cosh),
                   ("Asinh", np.arcsinh), ("Acosh", np.arccosh), ("Atanh", np.arctanh)):
    _unary(_name, _fn, doc=f"{_fn.__name__}(x), NaN outside its domain")
_unary("Round", np.rint, doc="round to the nearest integer, halves to even")
_unary("Sign", np.sign, NUMERIC_DTYPES, doc="-1, 0 or 1 by the sign of x (NaN stays NaN; -0 gives 0)")


def _float_class(name: str, fn: Callable[..., np.ndarray], attrs: dict[str, Attr] | None,
                 doc: str) -> None:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        require_dtype(ins[0], FLOAT_DTYPES, f"{name} input")
        return [TensorType(ins[0].shape, np.dtype(bool))]

    register(OpDef(name, ("X",), ("Y",), infer,
                   lambda ins, attrs: [np.asarray(fn(ins[0], **attrs), dtype=bool)],
                   attrs=attrs or {}, flops=no_flops, doc=doc))


def _is_inf(x: np.ndarray, detect_positive: int, detect_negative: int) -> np.ndarray:
    return ((x == np.inf) & bool(detect_positive)) | ((x == -np.inf) & bool(detect_negative))


_float_class("IsNaN", np.isnan, None, "whether x is NaN")
_float_class("IsInf", _is_inf,
             {"detect_positive": Attr("int", 1, "whether +inf counts"),
              "detect_negative": Attr("int", 1, "whether -inf counts")},
             "whether x is an infinity (of the signs the attributes select)")


def _mod_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    dtype = same_dtype(ins, "Mod inputs")
    require_dtype(ins[0], NUMERIC_DTYPES, "Mod input")
    if attrs["fmod"] not in (0, 1):
        raise OpAttributeError(f"Mod fmod must be 0 or 1, got {attrs['fmod']}")
    return [TensorType(broadcast_shapes(ins[0].shape, ins[1].shape), dtype)]


def _mod(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    a, b = ins
    with np.errstate(all="ignore"):  # a zero divisor gives NaN (floats) or 0 (integers)
        out = np.fmod(a, b) if attrs["fmod"] else np.mod(a, b)
    return [np.asarray(out).astype(a.dtype)]


register(OpDef(
    "Mod", ("A", "B"), ("C",), _mod_infer, _mod,
    attrs={"fmod": Attr("int", 0, "0: the remainder of floored division (the sign of B), "
                                  "1: C's fmod (the remainder of truncated division, the sign of A)")},
    doc="a mod b, for integers and floats alike (ONNX Mod-28's semantics)",
))


# -- activations --------------------------------------------------------------------------------

def _softplus(x: np.ndarray) -> np.ndarray:
    # log(1 + exp(x)) without overflow: max(x, 0) + log1p(exp(-|x|)).
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _shrink(x: np.ndarray, lambd: float, bias: float) -> np.ndarray:
    v = x.astype(np.float64) if x.dtype.kind in "iu" else x
    return np.where(v < -lambd, v + bias, np.where(v > lambd, v - bias, 0))


_unary("Elu", lambda x, alpha: np.where(x < 0, alpha * np.expm1(x), x),
       attrs={"alpha": Attr("float", 1.0, "scale of the negative part")},
       doc="x if x >= 0 else alpha*(exp(x) - 1)")
_unary("Selu", lambda x, alpha, gamma: np.where(x > 0, gamma * x, (alpha * gamma) * np.expm1(x)),
       attrs={"alpha": Attr("float", 1.6732632423543772, "scale of the negative part"),
              "gamma": Attr("float", 1.0507009873554805, "scale of the whole")},
       doc="gamma*x if x > 0 else gamma*alpha*(exp(x) - 1)")
_unary("Celu", lambda x, alpha: np.maximum(x, 0) + np.minimum(alpha * np.expm1(x / alpha), 0),
       attrs={"alpha": Attr("float", 1.0, "the ELU's alpha, also dividing x")},
       doc="max(0, x) + min(0, alpha*(exp(x/alpha) - 1))")
_unary("Softplus", _softplus, doc="log(1 + exp(x))")
_unary("Softsign", lambda x: x / (1 + np.abs(x)), doc="x / (1 + |x|)")
_unary("Mish", lambda x: x * np.tanh(_softplus(x)), doc="x * tanh(softplus(x))")
_unary("Swish", lambda x, alpha: x * (1 / (1 + np.exp(-(alpha * x)))),
       attrs={"alpha": Attr("float", 1.0, "scale of x inside the sigmoid")},
       doc="x * sigmoid(alpha*x)")
_unary("ThresholdedRelu", lambda x, alpha: np.where(x > alpha, x, 0),
       attrs={"alpha": Attr("float", 1.0, "threshold")}, doc="x if x > alpha else 0")
_unary("Shrink", _shrink, NUMERIC_DTYPES,
       attrs={"lambd": Attr("float", 0.5, "half width of the zeroed band"),
              "bias": Attr("float", 0.0, "moved toward zero outside the band")},
       doc="x + bias if x < -lambd, x - bias if x > lambd, else 0 (integers in float64)")

_PRELU_DTYPES = FLOAT_DTYPES + tuple(np.dtype(d) for d in ("int32", "int64", "uint32", "uint64"))


def _prelu_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    same_dtype(ins, "PRelu's X and slope")
    require_dtype(ins[0], _PRELU_DTYPES, "PRelu input")
    x, slope = ins
    if broadcast_shapes(x.shape, slope.shape) != tuple(x.shape):
        raise ShapeError(f"PRelu slope of shape {list(slope.shape)} does not broadcast to "
                         f"X's shape {list(x.shape)} (unidirectional broadcasting)")
    return [x]


register(OpDef(
    "PRelu", ("X", "slope"), ("Y",), _prelu_infer,
    lambda ins, attrs: [np.where(ins[0] < 0, ins[1] * ins[0], ins[0]).astype(ins[0].dtype)],
    doc="x if x >= 0 else slope*x, slope broadcast to x's shape",
))


# -- booleans and bits ---------------------------------------------------------------------

_INTS = tuple(d for d in NUMERIC_DTYPES if d.kind in "iu")
_binary("Xor", np.logical_xor, _BOOL, doc="logical exclusive or")
_binary("BitwiseAnd", np.bitwise_and, _INTS, doc="bitwise and")
_binary("BitwiseOr", np.bitwise_or, _INTS, doc="bitwise or")
_binary("BitwiseXor", np.bitwise_xor, _INTS, doc="bitwise exclusive or")
_unary("BitwiseNot", np.invert, _INTS, doc="bitwise not")


def _bit_shift(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, y = ins
    bits = 8 * x.dtype.itemsize
    y = y.astype(np.int64) if y.dtype != np.uint64 else y
    valid = (y >= 0) & (y < bits)
    amount = np.where(valid, y, 0).astype(x.dtype)
    if attrs["direction"] == "LEFT":
        out = np.where(valid, np.left_shift(x, amount), 0)
    else:
        fill = np.where(x < 0, -1, 0) if x.dtype.kind == "i" else 0
        out = np.where(valid, np.right_shift(x, amount), fill)
    return [np.asarray(out).astype(x.dtype)]


def _bit_shift_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    if attrs["direction"] not in ("LEFT", "RIGHT"):
        raise OpAttributeError(f"BitShift direction must be 'LEFT' or 'RIGHT', got {attrs['direction']!r}")
    dtype = same_dtype(ins, "BitShift inputs")
    require_dtype(ins[0], _INTS, "BitShift input")
    return [TensorType(broadcast_shapes(ins[0].shape, ins[1].shape), dtype)]


register(OpDef(
    "BitShift", ("X", "Y"), ("Z",), _bit_shift_infer, _bit_shift,
    attrs={"direction": Attr("str", doc="'LEFT' or 'RIGHT'")},
    doc="x shifted by y bits (BitShift-28: a signed right shift fills with the sign; a shift "
        "by a negative amount or by the bit width or more gives what the fill alone gives)",
))
