"""Linear quantisation: QuantizeLinear and DequantizeLinear (ONNX opset-25 semantics).

A scale is *per tensor* when it holds one element (a scalar or a 1-element 1-D
tensor), *per axis* when it is 1-D with one entry per slice of ``axis``, and
*blocked* when ``block_size`` is set: it has x's rank and shape except along
``axis``, where each entry covers ``block_size`` consecutive slices (the last block
may be short). The zero point has the scale's shape and the dtype of the quantised
side: int8/16, uint8/16, int4, uint4, int2, uint2, the float8 types or float4.
``axis`` only means something for a per-axis or blocked scale: its canonical form is
the non-negative axis then, and the default ``1`` for a per-tensor scale, so two
nodes that quantise alike carry equal attributes.

Integers round half to even and saturate to the type's range. float8 results are
``x / scale`` rounded to nearest even, clipped to the largest finite value first
when ``saturate`` (infinities too; NaN stays NaN); their zero point must be 0 and
is not read, as onnx's reference does. float4 adds its zero point and always
saturates. Dequantising a float8 or float4 ignores the zero point likewise.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import normalize_axis, require_dtype, require_float
from hetero.core.ir.types import NARROW_FLOAT_DTYPES, NARROW_INT_DTYPES, TensorType, int_range
from hetero.errors import ShapeError

_INT_QUANT = tuple(np.dtype(d) for d in ("int8", "uint8", "int16", "uint16")) + NARROW_INT_DTYPES
#: float8 types whose saturate attribute decides overflow; float4 always saturates.
FLOAT8_QUANT = tuple(d for d in NARROW_FLOAT_DTYPES if d.name.startswith("float8") and "e8m0" not in d.name)
_FLOAT_QUANT = FLOAT8_QUANT + tuple(d for d in NARROW_FLOAT_DTYPES if d.name == "float4_e2m1fn")
_QUANT_DTYPES = _INT_QUANT + _FLOAT_QUANT
_DEQUANT_DTYPES = _QUANT_DTYPES + (np.dtype("int32"),)
_AXIS_DOC = ("the axis a 1-D per-axis or a blocked scale runs along (canonical: non-negative; "
             "1 if per-tensor)")
_SATURATE_DOC = "float8 outputs: 1 clips to the largest finite value, 0 gives inf or NaN"
_BLOCK_DOC = "blocked quantisation: consecutive slices of axis one scale entry covers (0: not blocked)"


def is_integer_quant(dtype: np.dtype) -> bool:
    """Whether quantising to ``dtype`` rounds to an integer range (not to a float8/float4)."""
    return dtype in _INT_QUANT or dtype == np.int32


def _per_axis(scale: TensorType, block_size: int = 0) -> bool:
    return block_size > 0 or (scale.rank == 1 and scale.size != 1)


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    x, scale = ins[0], ins[1]
    if _per_axis(scale, attrs["block_size"]):
        attrs["axis"] = normalize_axis(attrs["axis"], x.rank)
    else:
        attrs["axis"] = 1
    return attrs


def _check_params(op: str, x: TensorType, scale: TensorType, zero: TensorType | None,
                  axis: int, block_size: int = 0) -> None:
    """ShapeError unless scale and zero point fit ``x`` per tensor, per ``axis`` or blocked."""
    if block_size < 0:
        raise ShapeError(f"{op} block_size must be positive (or 0: not blocked), got {block_size}")
    if block_size:
        want = list(x.shape)
        want[axis] = -(-x.shape[axis] // block_size)
        if list(scale.shape) != want:
            raise ShapeError(f"{op} blocked scale {scale} must have shape {want}: x's {list(x.shape)} "
                             f"with axis {axis} in blocks of {block_size}")
    elif scale.rank > 1:
        raise ShapeError(f"{op} scale must be a scalar or 1-D (or block_size set), got {scale}")
    elif _per_axis(scale) and scale.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"{op} per-axis scale {scale} needs one entry per slice of axis {axis} of {x}"
        )
    per_tensor = not block_size and zero is not None and zero.size == 1 and scale.size == 1
    if zero is not None and zero.shape != scale.shape and not per_tensor:
        raise ShapeError(f"{op} zero point {zero} must have the scale's shape {list(scale.shape)}")


def _broadcastable(param: np.ndarray, rank: int, axis: int, block_size: int = 0,
                   length: int = 0) -> np.ndarray:
    """``param`` shaped to broadcast against a rank-``rank`` tensor along ``axis`` (blocked:
    repeated ``block_size`` times along it and cut to ``length``)."""
    if block_size:
        return np.repeat(param, block_size, axis=axis).take(range(length), axis=axis)
    if param.size == 1:
        return param.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return param.reshape(shape)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    # Narrow floats are widened to float32 first, as onnxruntime does.
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _quantize_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale, zero = ins
    require_float(x, "QuantizeLinear input x")
    if scale.dtype != x.dtype:
        raise ShapeError(f"QuantizeLinear y_scale {scale} must have x's dtype {x.dtype.name}")
    require_dtype(zero, _QUANT_DTYPES, "QuantizeLinear y_zero_point")
    _check_params("QuantizeLinear", x, scale, zero, attrs["axis"], attrs["block_size"])
    return [TensorType(x.shape, zero.dtype)]


def _quantize_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale, zero = ins
    dtype = _compute_dtype(x.dtype)
    where = (x.ndim, attrs["axis"], attrs["block_size"],
             x.shape[attrs["axis"]] if attrs["block_size"] else 0)
    scale = _broadcastable(scale, *where).astype(dtype)
    zero = _broadcastable(zero, *where)
    # The division stays in `dtype` so that a quotient landing on .5 rounds exactly as
    # onnxruntime's does.
    q = x.astype(dtype) / scale
    if zero.dtype in FLOAT8_QUANT:
        if attrs["saturate"]:
            bound = float(ml_dtypes.finfo(zero.dtype).max)
            q = np.clip(q, -bound, bound)
        return [q.astype(zero.dtype)]
    if zero.dtype in _FLOAT_QUANT:
        return [(q + zero.astype(dtype)).astype(zero.dtype)]
    # np.rint rounds half to even, as ONNX requires.
    low, high = int_range(zero.dtype)
    return [np.clip(np.rint(q) + zero.astype(dtype), low, high).astype(zero.dtype)]


register(OpDef(
    "QuantizeLinear", ("x", "y_scale", "y_zero_point"), ("y",), _quantize_infer,
    _quantize_reference,
    attrs={"axis": Attr("int", 1, _AXIS_DOC), "saturate": Attr("int", 1, _SATURATE_DOC),
           "block_size": Attr("int", 0, _BLOCK_DOC)},
    # Per element: a division and an addition (rounding and saturation are free).
    flops=lambda ins, outs, attrs: 2 * outs[0].size,
    complete=_complete,
    doc="saturate(round_half_to_even(x / y_scale) + y_zero_point); the zero point's dtype "
        "(an integer, float8 or float4 type) is the output dtype",
))


def _dequantize_infer(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale = ins[0], ins[1]
    zero = ins[2] if len(ins) > 2 else None
    require_dtype(x, _DEQUANT_DTYPES, "DequantizeLinear input x")
    require_float(scale, "DequantizeLinear x_scale")
    if zero is not None and zero.dtype != x.dtype:
        raise ShapeError(f"DequantizeLinear x_zero_point {zero} must have x's dtype {x.dtype.name}")
    _check_params("DequantizeLinear", x, scale, zero, attrs["axis"], attrs["block_size"])
    return [TensorType(x.shape, scale.dtype)]


def _dequantize_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale = ins[0], ins[1]
    zero = ins[2] if len(ins) > 2 else None
    dtype = _compute_dtype(scale.dtype)
    where = (x.ndim, attrs["axis"], attrs["block_size"],
             x.shape[attrs["axis"]] if attrs["block_size"] else 0)
    if is_integer_quant(x.dtype):
        shifted = x.astype(np.int64)
        if zero is not None:
            shifted = shifted - _broadcastable(zero, *where).astype(np.int64)
        shifted = shifted.astype(dtype)
    else:  # float8 and float4: the zero point is 0 by the spec, and not read
        shifted = x.astype(dtype)
    y = shifted * _broadcastable(scale, *where).astype(dtype)
    return [y.astype(scale.dtype)]


register(OpDef(
    "DequantizeLinear", ("x", "x_scale", "x_zero_point?"), ("y",), _dequantize_infer,
    _dequantize_reference,
    attrs={"axis": Attr("int", 1, _AXIS_DOC), "block_size": Attr("int", 0, _BLOCK_DOC)},
    # Per element: a subtraction (when there is a zero point) and a multiplication.
    flops=lambda ins, outs, attrs: outs[0].size * (2 if len(ins) > 2 and ins[2] is not None else 1),
    complete=_complete,
    doc="(x - x_zero_point) * x_scale; the zero point defaults to 0 and the output has "
        "the scale's dtype",
))
