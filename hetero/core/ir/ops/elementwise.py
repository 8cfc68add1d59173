"""Elementwise ops: unary maths and activations, binary arithmetic and comparisons.

Binary ops broadcast like numpy (ONNX's multidirectional broadcasting) and need
both operands of one dtype. Float-only ops reject integer inputs at inference time.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, no_flops, register
from hetero.core.ir.ops.common import broadcast_shapes, require_dtype, same_dtype
from hetero.core.ir.types import FLOAT_DTYPES, NUMERIC_DTYPES, TensorType
from hetero.errors import OpAttributeError

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
_unary("Identity", lambda x: x, NUMERIC_DTYPES + _BOOL, doc="x")
_unary("Dropout", lambda x: x, FLOAT_DTYPES,
       doc="inference-mode dropout: the identity (the mask output is not part of the op)")
_unary("Clip", _clip, NUMERIC_DTYPES,
       attrs={"min": Attr("float", -math.inf, "lower bound"),
              "max": Attr("float", math.inf, "upper bound")},
       doc="min(max(x, min), max); ReLU6 is Clip(min=0, max=6)")


def _cast_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    return [TensorType(ins[0].shape, attrs["to"])]


register(OpDef(
    "Cast", ("X",), ("Y",), _cast_infer,
    lambda ins, attrs: [ins[0].astype(attrs["to"])],
    attrs={"to": Attr("dtype", doc="target dtype")}, flops=no_flops,
    doc="convert to dtype ``to`` (float to int truncates toward zero, as numpy does)",
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
_binary("Pow", np.power, FLOAT_DTYPES, doc="a ** b")
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
