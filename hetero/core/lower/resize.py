"""Lowering Resize: each output element computes its taps from its own indices.

Along each resized axis the kernel maps the output index to a source coordinate in
float64 with the operations of :func:`hetero.core.ir.ops.resize.source_coordinate`,
in the same order, so the coordinates, hence the indices nearest picks, are the
reference's bit for bit. It then takes the same window of taps as the reference
(clamped into the axis) with the same weights; linear and cubic sum the products of
the taps' weights and values, accumulating in float32 for float16 and float32 data
and in float64 otherwise (integers round half to even and saturate, as ONNX's
reference does). Nearest loads the chosen element and computes nothing with it.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from hetero.core.ir.ops.resize import TAPS, cubic_weights, resized_axes, source_coordinate
from hetero.core.ir.tir.compute import Tensor
from hetero.core.ir.tir.expr import (
    INDEX,
    Expr,
    as_expr,
    call,
    cast,
    const,
    eq,
    ge,
    gt,
    logical_and,
    logical_or,
    lt,
    maximum,
    minimum,
    select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.registry import lowers

_F64 = np.dtype(np.float64)


def _after(ratio: Expr, nearest_mode: str, scale: float) -> Expr:
    """Whether nearest takes the second of its two taps (see the op's ``_nearest_after``)."""
    if nearest_mode == "simple":
        nearest_mode = "ceil" if scale < 1 else "floor"
    if nearest_mode == "round_prefer_floor":
        return gt(ratio, 0.5)
    if nearest_mode == "round_prefer_ceil":
        return ge(ratio, 0.5)
    if nearest_mode == "floor":
        return eq(ratio, 1.0)
    return as_expr(True)


def _axis(y: Expr, n: int, out: int, scale: float, attrs: dict[str, Any], roi: tuple[float, float],
          acc: np.dtype) -> tuple[list[tuple[Expr, Expr | None]], Expr | None]:
    """The taps ``(index, weight)`` of output index ``y`` along one axis, and for
    tf_crop_and_resize whether it lies outside the input."""
    mode, transform = attrs["mode"], attrs["coordinate_transformation_mode"]
    x = source_coordinate(cast(y, _F64), n, out, scale, transform, roi, attrs["roi_dtype"])
    outside = logical_or(lt(x, 0.0), gt(x, float(n - 1))) if transform == "tf_crop_and_resize" \
        else None
    taps = TAPS[mode]
    pad = (taps + 1) // 2
    floor = call("floor", x)
    ratio = select(eq(x, floor), const(1.0, _F64), x - floor)
    padded = x + float(pad)
    p = call("floor", padded)
    start = p + select(eq(padded, p), const(-(taps // 2), _F64), const(-(taps // 2) + 1, _F64))
    first = cast(start, INDEX) - pad

    def clamp(index: Expr) -> Expr:
        return minimum(maximum(index, 0), n - 1)

    if mode == "nearest":
        chosen = first + select(_after(ratio, attrs["nearest_mode"], scale), as_expr(1), as_expr(0))
        return [(clamp(chosen), None)], outside
    weights = [1 - ratio, ratio] if mode == "linear" else cubic_weights(ratio, attrs["cubic_coeff_a"])
    indices = [first + k for k in range(taps)]
    if attrs["exclude_outside"]:
        weights = [select(logical_and(ge(j, 0), lt(j, n)), w, const(0.0, _F64))
                   for j, w in zip(indices, weights)]
        total = weights[0]
        for w in weights[1:]:
            total = total + w
        total = select(eq(total, 0.0), const(1.0, _F64), total)
        weights = [w / total for w in weights]
    return [(clamp(j), cast(w, acc)) for j, w in zip(indices, weights)], outside


@lowers("Resize")
def lower_resize(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                 names: list[str]) -> list[Tensor]:
    """Nearest loads one element; linear and cubic sum weighted taps (module doc)."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    dtype = out.dtype
    rank, roi = len(x.shape), attrs["roi"]
    axes = resized_axes(x.shape, attrs)
    acc = np.dtype(np.float32) if dtype in (np.float16, np.float32) else _F64
    nearest = attrs["mode"] == "nearest"
    fill = attrs["extrapolation_value"]

    def element(i: Indices) -> Expr:
        per_axis, outside = {}, None
        for a in axes:
            taps, off = _axis(i[a], x.shape[a], out.shape[a], attrs["scales"][a], attrs,
                              (roi[a], roi[rank + a]), acc)
            per_axis[a] = taps
            if off is not None:
                outside = off if outside is None else logical_or(outside, off)
        total: Expr | None = None
        for combo in itertools.product(*(per_axis[a] for a in axes)):
            chosen = dict(zip(axes, combo))
            load = x[tuple(chosen[a][0] if a in chosen else v for a, v in enumerate(i))]
            if nearest:
                total = load
                continue
            term = cast(load, acc)
            for _, w in combo:
                assert w is not None
                term = w * term
            total = term if total is None else total + term
        assert total is not None
        if nearest:
            if outside is None:
                return total
            return select(outside, const(np.array(fill).astype(dtype).item(), dtype), total)
        if outside is not None:
            total = select(outside, const(fill, acc), total)
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            total = minimum(maximum(call("round_even", total), float(info.min)), float(info.max))
        return cast(total, dtype)

    return [compute_nd(out.shape, element, names[0], dtype)]
