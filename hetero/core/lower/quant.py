"""Lowering QuantizeLinear and DequantizeLinear.

The arithmetic follows the reference step by step, in the same compute dtype
(float32, or float64 for float64 data), so the lowered function gives the
reference's integers exactly: ``round_even`` is ONNX's round-half-to-even, and
saturation clamps to the output dtype's range before the (then exact) cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor
from hetero.core.ir.tir.expr import INDEX, Expr, call, cast, const, maximum, minimum
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.registry import lowers


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _param(p: Tensor, i: Indices, axis: int) -> Expr:
    """A scale or zero point at element ``i``: its one entry, or entry ``i[axis]`` per axis."""
    if len(p.shape) == 0:
        return p[()]
    return p[0] if p.shape[0] == 1 else p[i[axis]]


@lowers("QuantizeLinear")
def lower_quantize(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                   names: list[str]) -> list[Tensor]:
    """``saturate(round_even(x / scale) + zero_point)``."""
    x, scale, zero = inputs
    assert x is not None and scale is not None and zero is not None
    out, axis = out_types[0], attrs["axis"]
    dtype = _compute_dtype(x.dtype)
    info = np.iinfo(out.dtype)

    def element(i: Indices) -> Expr:
        q = call("round_even", cast(x[i], dtype) / cast(_param(scale, i, axis), dtype))
        q = q + cast(_param(zero, i, axis), dtype)
        return cast(minimum(maximum(q, const(info.min, dtype)), const(info.max, dtype)), out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("DequantizeLinear")
def lower_dequantize(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """``(x - zero_point) * scale``; the subtraction in int64, so it never wraps."""
    x, scale = inputs[0], inputs[1]
    zero = inputs[2] if len(inputs) > 2 else None
    assert x is not None and scale is not None
    out, axis = out_types[0], attrs["axis"]
    dtype = _compute_dtype(scale.dtype)

    def element(i: Indices) -> Expr:
        shifted = cast(x[i], INDEX)
        if zero is not None:
            shifted = shifted - cast(_param(zero, i, axis), INDEX)
        return cast(cast(shifted, dtype) * cast(_param(scale, i, axis), dtype), out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]
