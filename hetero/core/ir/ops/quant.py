"""Linear quantisation: QuantizeLinear and DequantizeLinear (ONNX opset-18 semantics).

A scale is *per tensor* when it holds one element (a scalar or a 1-element 1-D
tensor) and *per axis* when it is 1-D with one entry per slice of ``axis``. The
zero point has the scale's shape and the integer dtype of the quantised side.
``axis`` only means something for a per-axis scale: its canonical form is the
non-negative axis then, and the default ``1`` for a per-tensor scale, so two nodes
that quantise alike carry equal attributes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import normalize_axis, require_dtype, require_float
from hetero.core.ir.types import TensorType
from hetero.errors import ShapeError

_QUANT_DTYPES = (np.dtype("int8"), np.dtype("uint8"))
_DEQUANT_DTYPES = _QUANT_DTYPES + (np.dtype("int32"),)
_AXIS_DOC = "the axis a 1-D per-axis scale runs along (canonical: non-negative; 1 if per-tensor)"


def _per_axis(scale: TensorType) -> bool:
    return scale.rank == 1 and scale.size != 1


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    x, scale = ins[0], ins[1]
    if _per_axis(scale):
        attrs["axis"] = normalize_axis(attrs["axis"], x.rank)
    else:
        attrs["axis"] = 1
    return attrs


def _check_params(op: str, x: TensorType, scale: TensorType, zero: TensorType | None,
                  axis: int) -> None:
    """ShapeError unless scale and zero point fit ``x`` per tensor or per ``axis``."""
    if scale.rank > 1:
        raise ShapeError(f"{op} scale must be a scalar or 1-D, got {scale}")
    if _per_axis(scale) and scale.shape[0] != x.shape[axis]:
        raise ShapeError(
            f"{op} per-axis scale {scale} needs one entry per slice of axis {axis} of {x}"
        )
    if zero is not None and zero.shape != scale.shape:
        raise ShapeError(f"{op} zero point {zero} must have the scale's shape {list(scale.shape)}")


def _broadcastable(param: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """``param`` shaped to broadcast against a rank-``rank`` tensor along ``axis``."""
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
    _check_params("QuantizeLinear", x, scale, zero, attrs["axis"])
    return [TensorType(x.shape, zero.dtype)]


def _quantize_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale, zero = ins
    dtype = _compute_dtype(x.dtype)
    scale = _broadcastable(scale, x.ndim, attrs["axis"]).astype(dtype)
    zero = _broadcastable(zero, x.ndim, attrs["axis"])
    # np.rint rounds half to even, as ONNX requires; the division stays in `dtype`
    # so that a quotient landing on .5 rounds exactly as onnxruntime's does.
    q = np.rint(x.astype(dtype) / scale) + zero.astype(dtype)
    limits = np.iinfo(zero.dtype)
    return [np.clip(q, limits.min, limits.max).astype(zero.dtype)]


register(OpDef(
    "QuantizeLinear", ("x", "y_scale", "y_zero_point"), ("y",), _quantize_infer,
    _quantize_reference,
    attrs={"axis": Attr("int", 1, _AXIS_DOC)},
    # Per element: a division and an addition (rounding and saturation are free).
    flops=lambda ins, outs, attrs: 2 * outs[0].size,
    complete=_complete,
    doc="saturate(round_half_to_even(x / y_scale) + y_zero_point); the zero point's dtype "
        "(int8 or uint8) is the output dtype",
))


def _dequantize_infer(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale = ins[0], ins[1]
    zero = ins[2] if len(ins) > 2 else None
    require_dtype(x, _DEQUANT_DTYPES, "DequantizeLinear input x")
    require_float(scale, "DequantizeLinear x_scale")
    if zero is not None and zero.dtype != x.dtype:
        raise ShapeError(f"DequantizeLinear x_zero_point {zero} must have x's dtype {x.dtype.name}")
    _check_params("DequantizeLinear", x, scale, zero, attrs["axis"])
    return [TensorType(x.shape, scale.dtype)]


def _dequantize_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale = ins[0], ins[1]
    zero = ins[2] if len(ins) > 2 else None
    dtype = _compute_dtype(scale.dtype)
    shifted = x.astype(np.int64)
    if zero is not None:
        shifted = shifted - _broadcastable(zero, x.ndim, attrs["axis"]).astype(np.int64)
    y = shifted.astype(dtype) * _broadcastable(scale, x.ndim, attrs["axis"]).astype(dtype)
    return [y.astype(scale.dtype)]


register(OpDef(
    "DequantizeLinear", ("x", "x_scale", "x_zero_point?"), ("y",), _dequantize_infer,
    _dequantize_reference,
    attrs={"axis": Attr("int", 1, _AXIS_DOC)},
    # Per element: a subtraction (when there is a zero point) and a multiplication.
    flops=lambda ins, outs, attrs: outs[0].size * (2 if len(ins) > 2 and ins[2] is not None else 1),
    complete=_complete,
    doc="(x - x_zero_point) * x_scale; the zero point defaults to 0 and the output has "
        "the scale's dtype",
))
