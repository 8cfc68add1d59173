"""Lowering DeformConv (meaning: :mod:`hetero.core.ir.ops.deform`): two stages.

The first samples every tap of every input channel at its moved position (bilinear,
corners outside the image counting 0, times the mask), ``[n, c, kh, kw, oh, ow]``;
the second is the grouped convolution's sum of those samples with the weights.
Positions are computed in float64 (the reference's precision) whatever X's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    Expr, call, cast, const, ge, logical_and, lt, maximum, minimum, select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers

_F64, _I64 = np.dtype("float64"), np.dtype("int64")


@lowers("DeformConv")
def lower_deform_conv(inputs: list[Tensor | None], attrs: dict[str, Any],
                      out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    x, w, offset, b, mask = inputs
    assert x is not None and w is not None and offset is not None
    n, c, height, width = x.shape
    oc, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    per_offset, per_out = c // attrs["offset_group"], oc // attrs["group"]
    acc = accumulator_dtype(x.dtype)
    _, _, oh, ow = out_types[0].shape

    def sample(idx: Indices) -> Expr:
        bn, ch, i, j, y, z = idx
        tap = (ch // per_offset) * (kh * kw) + i * kw + j
        row = cast(i * dh + y * sh - pads[0], _F64) + cast(offset[bn, 2 * tap, y, z], _F64)
        col = cast(j * dw + z * sw - pads[1], _F64) + cast(offset[bn, 2 * tap + 1, y, z], _F64)
        top, left = call("floor", row), call("floor", col)
        total: Expr = const(0.0, _F64)
        for corner_row in (top, top + 1.0):
            for corner_col in (left, left + 1.0):
                weight = (1.0 - call("abs", row - corner_row)) * (1.0 - call("abs", col - corner_col))
                inside = logical_and(logical_and(ge(corner_row, 0.0), lt(corner_row, float(height))),
                                     logical_and(ge(corner_col, 0.0), lt(corner_col, float(width))))
                # Clamped before the cast: a far or non-finite position reads in bounds.
                r = cast(minimum(maximum(corner_row, 0.0), float(height - 1)), _I64)
                q = cast(minimum(maximum(corner_col, 0.0), float(width - 1)), _I64)
                total = total + select(inside, weight * cast(x[bn, ch, r, q], _F64), const(0.0, _F64))
        if mask is not None:
            total = total * cast(mask[bn, tap, y, z], _F64)
        return cast(total, acc)

    taps = compute_nd((n, c, kh, kw, oh, ow), sample, f"{names[0]}_taps")
    rc, ri, rj = (reduce_axis(e, f"{names[0]}_{s}") for e, s in ((cg, "c"), (kh, "i"), (kw, "j")))

    def output(idx: Indices) -> Expr:
        bn, o, y, z = idx
        channel = (o // per_out) * cg + rc.var
        total = sum_(cast(w[o, rc.var, ri.var, rj.var], acc) * taps[bn, channel, ri.var, rj.var, y, z],
                     [rc, ri, rj])
        if b is not None:
            total = total + cast(b[o], acc)
        return cast(total, x.dtype)

    return [compute_nd(out_types[0].shape, output, names[0])]
