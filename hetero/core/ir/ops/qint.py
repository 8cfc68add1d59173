"""Integer quantised ops: int8 tensors in, int32 accumulation, int8 out.

These are hetero-internal ops, like TVM's qnn dialect: the ONNX frontend never
produces them; :mod:`hetero.core.passes.lower_qdq` replaces the float
DequantizeLinear → op → QuantizeLinear units of a QDQ model with them, and
backends that run integer arithmetic (an NPU) take them; they also lower to the
tensor IR (:mod:`hetero.core.lower.qint`), so the CPU fallback runs any region such a
backend declines, bit for bit. Their semantics are the
shared integer spec: quantisation is ``real = scale · (q − zero)``, every op
accumulates exactly and brings the sum to the output's scale with
:func:`~hetero.core.ir.ops.fixed_point.requantize` (multiply by an int32
``multiplier``, rounding shift right by ``shift``, add ``y_zero``, clamp to
``[y_min, y_max]``). A fused Relu or Clip is only that clamp.

Attributes are ints or tuples of ints, so nodes stay hashable and printable;
``multiplier`` and ``shift`` tuples hold one entry (per tensor) or one per output
channel.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, elementwise_flops, register
from hetero.core.ir.ops.common import (
    broadcast_shapes,
    normalize_axis,
    require_dtype,
    require_rank,
)
from hetero.core.ir.ops.conv_pool import (
    _complete_window,
    _conv_complete,
    _conv_infer,
    _conv_reference,
    _kernel_axes,
    _window_attrs,
    _window_out_dims,
    _windows,
)
from hetero.core.ir.ops.fixed_point import MAX_SHIFT, quantize_multiplier, requantize
from hetero.core.ir.types import TensorType
from hetero.errors import OpAttributeError, ShapeError

_INT8 = np.dtype("int8")
_INT32 = np.dtype("int32")
_I8_MIN, _I8_MAX = -128, 127

#: The integer ops this module defines: a backend that computes in int8 declares them
#: (the QDQ units it would take are lowered to them); the fallback takes them too.
INTEGER_OPS = frozenset({"QConv", "QMatMul", "QAdd", "QMul", "QAveragePool", "Requantize"})


def _zero_attr(what: str) -> Attr:
    return Attr("int", 0, f"zero point of {what} (int8 range)")


def _requant_attrs(channels: str) -> dict[str, Attr]:
    """``multiplier``/``shift`` (1 or one per ``channels``) and the output's zero and clamp."""
    return {
        "multiplier": Attr("ints", doc=f"int32 multipliers in [0, 2^31): 1 or one per {channels}"),
        "shift": Attr("ints", doc=f"right shifts in [1, 62]: 1 or one per {channels}"),
        **_output_attrs(),
    }


def _output_attrs() -> dict[str, Attr]:
    return {
        "y_zero": _zero_attr("the output Y"),
        "y_min": Attr("int", _I8_MIN, "lowest output value (a fused Relu or Clip raises it)"),
        "y_max": Attr("int", _I8_MAX, "highest output value (a fused Clip lowers it)"),
    }


def _check_int8_param(name: str, value: int) -> None:
    if not _I8_MIN <= value <= _I8_MAX:
        raise OpAttributeError(f"{name} {value} is outside the int8 range [-128, 127]")


def _check_output(attrs: dict[str, Any]) -> None:
    """OpAttributeError unless y_zero lies in int8 and y_min ≤ y_max within it."""
    _check_int8_param("y_zero", attrs["y_zero"])
    lo, hi = attrs["y_min"], attrs["y_max"]
    if not _I8_MIN <= lo <= hi <= _I8_MAX:
        raise OpAttributeError(
            f"the output clamp [y_min, y_max] = [{lo}, {hi}] must satisfy -128 <= y_min <= "
            f"y_max <= 127"
        )


def _check_multipliers(multiplier: tuple[int, ...], shift: tuple[int, ...], channels: int,
                       what: str) -> None:
    """OpAttributeError unless the fixed-point multipliers are well formed for ``channels``."""
    for key, values in (("multiplier", multiplier), ("shift", shift)):
        if len(values) not in (1, channels):
            raise OpAttributeError(
                f"{key} has {len(values)} entries; it needs 1 (per tensor) or {channels} "
                f"(one per {what})"
            )
    if any(not 0 <= m < 2**31 for m in multiplier):
        raise OpAttributeError(f"multiplier {list(multiplier)} must lie in [0, 2^31)")
    if any(not 1 <= s <= MAX_SHIFT for s in shift):
        raise OpAttributeError(f"shift {list(shift)} must lie in [1, {MAX_SHIFT}]")


def _requantize_out(acc: np.ndarray, attrs: dict[str, Any], axis: int | None) -> np.ndarray:
    return requantize(acc, attrs["multiplier"], attrs["shift"], attrs["y_zero"],
                      attrs["y_min"], attrs["y_max"], axis)


def _exact_int(y: np.ndarray) -> np.ndarray:
    # Float64 (BLAS) products of the shifted int8 operands are exact: each term is an
    # integer of magnitude at most 255·128 < 2^15, so every partial sum stays an integer
    # below 2^53 for any K < 2^38; casting back to int64 loses nothing.
    return np.rint(y).astype(np.int64)


def _as_float_type(t: TensorType | None) -> TensorType | None:
    return None if t is None else TensorType(t.shape, np.float32)


# -- QConv -------------------------------------------------------------------------------


def _qconv_infer(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[TensorType]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    require_dtype(x, (_INT8,), "QConv input X")
    require_dtype(w, (_INT8,), "QConv weight W")
    if b is not None:
        require_dtype(b, (_INT32,), "QConv bias B")
    _check_int8_param("x_zero", attrs["x_zero"])
    _check_output(attrs)
    # Conv's own shape rules, applied to float stand-ins of the same shapes.
    conv_attrs = {k: v for k, v in attrs.items() if k in _CONV_ATTRS}
    y = _conv_infer([_as_float_type(t) for t in ins], conv_attrs)[0]
    _check_multipliers(attrs["multiplier"], attrs["shift"], w.shape[0], "output channel")
    return [TensorType(y.shape, _INT8)]


def _qconv_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    # Padding must contribute (x_zero - x_zero) = 0, so shift first and pad with 0.
    shifted = x.astype(np.float64) - attrs["x_zero"]
    conv_attrs = {k: v for k, v in attrs.items() if k in _CONV_ATTRS}
    acc = _exact_int(_conv_reference([shifted, w.astype(np.float64)], conv_attrs)[0])
    if b is not None:
        acc = acc + b.astype(np.int64).reshape((-1,) + (1,) * (x.ndim - 2))
    return [_requantize_out(acc, attrs, axis=1)]


def _qconv_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    x, w, y = ins[0], ins[1], outs[0]
    macs = y.size * (x.shape[1] // attrs["group"]) * math.prod(w.shape[2:])
    has_bias = len(ins) > 2 and ins[2] is not None
    return 2 * macs + (y.size if has_bias else 0)


_CONV_ATTRS = {
    **_window_attrs(Attr("ints", None, "kernel spatial shape (derived: W.shape[2:])")),
    "group": Attr("int", 1, "number of channel groups; C_in for a depthwise convolution"),
}

register(OpDef(
    "QConv", ("X", "W", "B?"), ("Y",), _qconv_infer, _qconv_reference,
    attrs={**_CONV_ATTRS, "x_zero": _zero_attr("the input X"), **_requant_attrs("output channel")},
    flops=_qconv_flops, complete=_conv_complete,
    doc="int8 convolution: acc = sum((X - x_zero) * W) + B in int32 (padding contributes 0), "
        "Y = requantize(acc, multiplier[m], shift[m], y_zero, y_min, y_max) per output channel m",
))


# -- QMatMul -----------------------------------------------------------------------------


def _qmatmul_infer(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    require_dtype(a, (_INT8,), "QMatMul input A")
    require_dtype(b, (_INT8,), "QMatMul weight B")
    require_rank(b, 2, "QMatMul weight B")
    k, n = b.shape
    if a.rank < 1 or a.shape[-1] != k:
        raise ShapeError(f"QMatMul input A {a} must end in K={k}, the rows of B {b}")
    if bias is not None:
        require_dtype(bias, (_INT32,), "QMatMul Bias")
        if bias.shape != (n,):
            raise ShapeError(f"QMatMul Bias must have shape [{n}] (N), got {bias}")
    _check_int8_param("a_zero", attrs["a_zero"])
    _check_multipliers(attrs["multiplier"], attrs["shift"], n, "output column")
    _check_output(attrs)
    return [TensorType(a.shape[:-1] + (n,), _INT8)]


def _qmatmul_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    a, b = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    acc = _exact_int(np.matmul(a.astype(np.float64) - attrs["a_zero"], b.astype(np.float64)))
    if bias is not None:
        acc = acc + bias.astype(np.int64)
    return [_requantize_out(acc, attrs, axis=acc.ndim - 1)]


register(OpDef(
    "QMatMul", ("A", "B", "Bias?"), ("Y",), _qmatmul_infer, _qmatmul_reference,
    attrs={"a_zero": _zero_attr("the input A"), **_requant_attrs("output column")},
    flops=lambda ins, outs, attrs: 2 * outs[0].size * ins[1].shape[0],
    doc="int8 matrix product A [..., K] @ B [K, N]: acc = (A - a_zero) @ B + Bias in int32, "
        "Y = requantize(acc, multiplier[n], shift[n], y_zero, y_min, y_max) per column n",
))


# -- QAdd and QMul -----------------------------------------------------------------------


def quantize_add_multipliers(a_ratio: float, b_ratio: float) -> tuple[int, int, int]:
    """``(a_multiplier, b_multiplier, shift)`` for QAdd, with ``M·2^-shift ≈ ratio`` for each.

    The shared shift comes from the larger ratio, whose multiplier lies in [2^14, 2^15);
    the smaller one is just smaller. Fifteen bits keep ``(A - a_zero)·Ma + (B - b_zero)·Mb``
    below 2^24, inside an int32 accumulator, which is how integer hardware (a simulated NPU's
    vector unit) adds; they err by at most 2^-15 relative, under 0.01 of a step on an
    int8 result. ``a_ratio`` is ``a_scale / y_scale``. ValueError when the larger ratio
    is 2^14 or more (no shift of at least 1 is left).
    """
    big, shift = quantize_multiplier(max(a_ratio, b_ratio))
    if shift < 17 and big:
        raise ValueError(f"QAdd ratio {max(a_ratio, b_ratio)!r} is too large for 15-bit multipliers")
    # Drop 16 bits, rounding: [2^30, 2^31) becomes [2^14, 2^15] (2^15 when it rounds up).
    big, shift = (big + 2**15) >> 16, shift - 16
    if big == 2**15:
        big, shift = 2**14, shift - 1
    small = round(min(a_ratio, b_ratio) * 2**shift)
    return (big, small, shift) if a_ratio >= b_ratio else (small, big, shift)


def _binary_infer(op: str) -> Any:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        a, b = ins
        require_dtype(a, (_INT8,), f"{op} input A")
        require_dtype(b, (_INT8,), f"{op} input B")
        _check_int8_param("a_zero", attrs["a_zero"])
        _check_int8_param("b_zero", attrs["b_zero"])
        if op == "QAdd":
            _check_multipliers((attrs["a_multiplier"], attrs["b_multiplier"]),
                               (attrs["shift"],), 2, "operand")
        else:
            _check_multipliers((attrs["multiplier"],), (attrs["shift"],), 1, "tensor")
        _check_output(attrs)
        return [TensorType(broadcast_shapes(a.shape, b.shape), _INT8)]

    return infer


def _qadd_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    a = (ins[0].astype(np.int64) - attrs["a_zero"]) * attrs["a_multiplier"]
    b = (ins[1].astype(np.int64) - attrs["b_zero"]) * attrs["b_multiplier"]
    # Both terms are already scaled by their multipliers: one rounding shift remains.
    return [requantize(a + b, 1, attrs["shift"], attrs["y_zero"], attrs["y_min"], attrs["y_max"])]


def _qmul_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    a = ins[0].astype(np.int64) - attrs["a_zero"]
    product = a * (ins[1].astype(np.int64) - attrs["b_zero"])
    return [_requantize_out(product, attrs, axis=None)]


_OPERAND_ZEROS = {"a_zero": _zero_attr("input A"), "b_zero": _zero_attr("input B")}

register(OpDef(
    "QAdd", ("A", "B"), ("C",), _binary_infer("QAdd"), _qadd_reference,
    attrs={
        **_OPERAND_ZEROS,
        "a_multiplier": Attr("int", doc="A's multiplier: a_multiplier·2^-shift ≈ a_scale/y_scale"),
        "b_multiplier": Attr("int", doc="B's multiplier: b_multiplier·2^-shift ≈ b_scale/y_scale"),
        "shift": Attr("int", doc="the one right shift both multipliers share, in [1, 62]"),
        **_output_attrs(),
    },
    flops=lambda ins, outs, attrs: 3 * outs[0].size,
    doc="int8 addition with numpy broadcasting: C = clip((((A - a_zero)·a_multiplier + "
        "(B - b_zero)·b_multiplier + 2^(shift-1)) >> shift) + y_zero, y_min, y_max)",
))

register(OpDef(
    "QMul", ("A", "B"), ("C",), _binary_infer("QMul"), _qmul_reference,
    attrs={
        **_OPERAND_ZEROS,
        "multiplier": Attr("int", doc="multiplier·2^-shift ≈ a_scale·b_scale/y_scale"),
        "shift": Attr("int", doc="right shift in [1, 62]"),
        **_output_attrs(),
    },
    flops=lambda ins, outs, attrs: 2 * outs[0].size,
    doc="int8 multiplication with numpy broadcasting: C = requantize((A - a_zero)·(B - b_zero), "
        "multiplier, shift, y_zero, y_min, y_max)",
))


# -- QAveragePool ------------------------------------------------------------------------


def _qpool_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    return _complete_window(ins[0], attrs, "QAveragePool")


def _qpool_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_dtype(x, (_INT8,), "QAveragePool input X")
    _check_int8_param("x_zero", attrs["x_zero"])
    _check_multipliers((attrs["multiplier"],), (attrs["shift"],), 1, "tensor")
    _check_output(attrs)
    return [TensorType(x.shape[:2] + _window_out_dims(x, attrs), _INT8)]


def _qpool_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    out = _window_out_dims(TensorType.of(x), attrs)
    # Padded taps hold x_zero, so after the shift they add 0 yet still count in the divisor.
    shifted = x.astype(np.int64) - attrs["x_zero"]
    total = _windows(shifted, attrs["pads"], attrs, out, 0).sum(axis=_kernel_axes(len(out)))
    return [_requantize_out(total, attrs, axis=None)]


register(OpDef(
    "QAveragePool", ("X",), ("Y",), _qpool_infer, _qpool_reference,
    attrs={
        **_window_attrs(Attr("ints", doc="window spatial shape")),
        "x_zero": _zero_attr("the input X"),
        "multiplier": Attr("int", doc="multiplier·2^-shift ≈ x_scale / (y_scale · window size)"),
        "shift": Attr("int", doc="right shift in [1, 62]"),
        **_output_attrs(),
    },
    flops=lambda ins, outs, attrs: outs[0].size * (math.prod(attrs["kernel_shape"]) + 1),
    complete=_qpool_complete,
    doc="int8 average pool, count_include_pad semantics (padding counts, as x_zero): "
        "Y = requantize(sum over the window of (X - x_zero), multiplier, shift, y_zero, "
        "y_min, y_max); the division by the window size is folded into the multiplier",
))


# -- Requantize --------------------------------------------------------------------------


def _requantize_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    per_channel = len(attrs["multiplier"]) > 1 or len(attrs["shift"]) > 1
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank) if per_channel else 1
    return attrs


def _requantize_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_dtype(x, (_INT8, _INT32), "Requantize input X")
    if x.dtype == _INT8:
        _check_int8_param("x_zero", attrs["x_zero"])
    per_channel = len(attrs["multiplier"]) > 1 or len(attrs["shift"]) > 1
    channels = x.shape[attrs["axis"]] if per_channel else 1
    _check_multipliers(attrs["multiplier"], attrs["shift"], channels,
                       f"slice of axis {attrs['axis']}")
    _check_output(attrs)
    return [TensorType(x.shape, _INT8)]


def _requantize_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    shifted = ins[0].astype(np.int64) - attrs["x_zero"]
    return [_requantize_out(shifted, attrs, axis=attrs["axis"])]


register(OpDef(
    "Requantize", ("X",), ("Y",), _requantize_infer, _requantize_reference,
    attrs={
        "x_zero": Attr("int", 0, "zero point of X"),
        **_requant_attrs("slice of axis"),
        "axis": Attr("int", 1, "the channel axis of per-channel multipliers (canonical: "
                               "non-negative; 1 when per tensor)"),
    },
    flops=elementwise_flops, complete=_requantize_complete,
    doc="change an int8 (or int32) tensor's scale and zero point: Y = requantize(X - x_zero, "
        "multiplier, shift, y_zero, y_min, y_max), per slice of axis when per-channel; a "
        "standalone Relu or Clip on int8 is a Requantize whose clamp does the work",
))
