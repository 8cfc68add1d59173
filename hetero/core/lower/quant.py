"""Lowering QuantizeLinear and DequantizeLinear.

The arithmetic follows the reference step by step, in the same compute dtype
(float32, or float64 for float64 data), so the lowered function gives the
reference's integers exactly: ``round_even`` is ONNX's round-half-to-even, and
saturation clamps to the output dtype's range before the (then exact) cast. A
float8 or float4 output is the IR's cast of the quotient (to nearest even), clamped
first when the float8 saturates; a blocked scale is read at ``i[axis] // block_size``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from hetero.core.ir.ops.quant import FLOAT8_QUANT, is_integer_quant
from hetero.core.ir.tir.compute import Tensor
from hetero.core.ir.tir.expr import INDEX, Expr, call, cast, const, maximum, minimum
from hetero.core.ir.types import TensorType, int_range
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.registry import lowers


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _param(p: Tensor, i: Indices, axis: int, block_size: int = 0) -> Expr:
    """A scale or zero point at element ``i``: its one entry, entry ``i[axis]`` per axis, or
    blocked: ``i`` with ``i[axis] // block_size``."""
    if block_size:
        return p[tuple(k // block_size if d == axis else k for d, k in enumerate(i))]
    if len(p.shape) == 0:
        return p[()]
    return p[0] if p.shape[0] == 1 else p[i[axis]]


@lowers("QuantizeLinear")
def lower_quantize(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                   names: list[str]) -> list[Tensor]:
    """``saturate(round_even(x / scale) + zero_point)``."""
    x, scale, zero = inputs
    assert x is not None and scale is not None and zero is not None
    out, axis, block = out_types[0], attrs["axis"], attrs["block_size"]
    dtype = _compute_dtype(x.dtype)

    def element(i: Indices) -> Expr:
        q = cast(x[i], dtype) / cast(_param(scale, i, axis, block), dtype)
        if out.dtype in FLOAT8_QUANT:
            if attrs["saturate"]:
                bound = float(ml_dtypes.finfo(out.dtype).max)
                q = minimum(maximum(q, const(-bound, dtype)), const(bound, dtype))
            return cast(q, out.dtype)
        if not is_integer_quant(out.dtype):  # float4: adds its zero point, always saturates
            return cast(q + cast(_param(zero, i, axis, block), dtype), out.dtype)
        low, high = int_range(out.dtype)
        q = call("round_even", q) + cast(_param(zero, i, axis, block), dtype)
        return cast(minimum(maximum(q, const(low, dtype)), const(high, dtype)), out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("DequantizeLinear")
def lower_dequantize(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """``(x - zero_point) * scale``; the subtraction in int64, so it never wraps."""
    x, scale = inputs[0], inputs[1]
    zero = inputs[2] if len(inputs) > 2 else None
    assert x is not None and scale is not None
    out, axis, block = out_types[0], attrs["axis"], attrs["block_size"]
    dtype = _compute_dtype(scale.dtype)

    def element(i: Indices) -> Expr:
        if not is_integer_quant(x.dtype):  # float8 and float4: no zero point to subtract
            return cast(cast(x[i], dtype) * cast(_param(scale, i, axis, block), dtype), out.dtype)
        shifted = cast(x[i], INDEX)
        if zero is not None:
            shifted = shifted - cast(_param(zero, i, axis, block), INDEX)
        return cast(cast(shifted, dtype) * cast(_param(scale, i, axis, block), dtype), out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]
