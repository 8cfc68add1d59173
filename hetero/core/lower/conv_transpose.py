"""Lowering ConvTranspose (meaning: :mod:`hetero.core.ir.ops.conv_transpose`) as a gather.

Each output element sums over its group's input channels and every kernel tap whose
input position is whole: on each axis ``t = o + pad_begin - tap * dilation`` must be a
multiple of the stride with ``t / stride`` inside the input. No scatter, so every output
is written once and the loop nest schedules like a Conv. Off-grid taps read a clamped
position under a ``select`` (a renderer may evaluate both sides); a stride of 1 needs
no divisibility check, and an axis whose taps never leave the input needs no bounds.
"""

from __future__ import annotations

from typing import Any

from hetero.core.ir.tir.compute import Tensor, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    Expr, cast, const, eq, ge, logical_and, lt, maximum, minimum, select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers


@lowers("ConvTranspose")
def lower_conv_transpose(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Y[n, co, o...] = sum over ci in co's group and the taps landing on o of X * W, + B."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    out = out_types[0].shape
    acc, group = accumulator_dtype(x.dtype), attrs["group"]
    per_in, per_out = x.shape[1] // group, w.shape[1]
    rc = reduce_axis(per_in, f"{names[0]}_rc")
    taps = [reduce_axis(k, f"{names[0]}_k{i}") for i, k in enumerate(w.shape[2:])]

    def element(idx: Indices) -> Expr:
        batch, co, o = idx[0], idx[1], idx[2:]
        ci = rc.var if group == 1 else co // per_out * per_in + rc.var
        position: list[Expr] = []
        inside: Expr | None = None
        for i, tap in enumerate(taps):
            size, stride = x.shape[2 + i], attrs["strides"][i]
            dilation, begin = attrs["dilations"][i], attrs["pads"][i]
            t = o[i] + begin - tap.var * dilation
            checks = [ge(t, 0)] if begin - (tap.extent - 1) * dilation < 0 else []
            if stride > 1:
                checks.append(eq(t % stride, 0))
            p = t // stride
            if (out[2 + i] - 1 + begin) // stride >= size:
                checks.append(lt(p, size))
            position.append(maximum(minimum(p, size - 1), 0) if checks else p)
            for check in checks:
                inside = check if inside is None else logical_and(inside, check)
        xv = cast(x[(batch, ci, *position)], acc)
        wv = cast(w[(ci, co % per_out if group > 1 else co) + tuple(t.var for t in taps)], acc)
        term = xv * wv if inside is None else select(inside, xv * wv, const(0, acc))
        y = sum_(term, [rc, *taps])
        if b is not None:
            y = y + cast(b[co], acc)
        return cast(y, x.dtype)

    return [compute_nd(out, element, names[0])]
