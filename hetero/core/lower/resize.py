"""Lowering Resize: per-axis tables of taps, then one stage that combines them.

Each resized axis gets small stages of its own: the source coordinate of every
output index, in float64 with the operations of
:func:`hetero.core.ir.ops.resize.source_coordinate` in the same order (so the
coordinates, hence the indices nearest picks, are the reference's bit for bit), then
the clamped indices of its taps and, for linear and cubic, their weights (the same
window and weights as the reference, antialias and exclude_outside included). The
output stage loads those tables: nearest loads the chosen element and computes
nothing with it; linear and cubic sum the products of the taps' weights and values,
accumulating in float32 for float16 and float32 data and in float64 otherwise
(integers round half to even and saturate, as ONNX's reference does).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from hetero.core.ir.ops.resize import (
    antialias_start,
    cubic_weights,
    resized_axes,
    source_coordinate,
    tap_count,
)
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
    le,
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


def _first_tap(x: Expr, taps: int) -> tuple[Expr, Expr]:
    """The index of the first of ``taps`` taps around coordinate ``x`` (the window
    onnx's reference takes: the nearest taps, ties to the smaller index) and the
    fraction ``ratio`` (1 at an integer ``x``)."""
    pad = (taps + 1) // 2
    floor = call("floor", x)
    ratio = select(eq(x, floor), const(1.0, _F64), x - floor)
    padded = x + float(pad)
    p = call("floor", padded)
    start = p + select(eq(padded, p), const(-(taps // 2), _F64), const(-(taps // 2) + 1, _F64))
    return cast(start, INDEX) - pad, ratio


def _pick(values: list[Expr], k: Expr) -> Expr:
    """``values[k]`` as a chain of selects."""
    result = values[-1]
    for j in reversed(range(len(values) - 1)):
        result = select(eq(k, j), values[j], result)
    return result


def _axis_tables(a: int, n: int, out: int, scale: float, attrs: dict[str, Any],
                 roi: tuple[float, float], acc: np.dtype, name: str
                 ) -> tuple[Tensor, Tensor, Tensor | None]:
    """The stages of one resized axis: its source coordinates ``(out,)``, and the
    clamped tap indices ``(out,)`` (nearest) or ``(out, taps)`` with the taps'
    weights ``(out, taps)`` (linear, cubic)."""
    mode = attrs["mode"]
    coord = compute_nd((out,), lambda i: source_coordinate(
        cast(i[0], _F64), n, out, scale, attrs["coordinate_transformation_mode"], roi,
        attrs["roi_dtype"]), f"{name}_x{a}", _F64)
    taps = tap_count(attrs, scale)

    def clamp(index: Expr) -> Expr:
        return minimum(maximum(index, 0), n - 1)

    if mode == "nearest":
        def nearest(i: Indices) -> Expr:
            first, ratio = _first_tap(coord[i], taps)
            after = _after(ratio, attrs["nearest_mode"], scale)
            return clamp(first + select(after, as_expr(1), as_expr(0)))

        return coord, compute_nd((out,), nearest, f"{name}_i{a}", INDEX), None

    def weights_of(x: Expr) -> tuple[Expr, list[Expr]]:
        first, ratio = _first_tap(x, taps)
        if attrs["antialias"]:
            weights = _antialias_weights(ratio, mode, scale, attrs["cubic_coeff_a"])
        elif mode == "linear":
            weights = [1 - ratio, ratio]
        else:
            weights = cubic_weights(ratio, attrs["cubic_coeff_a"])
        if attrs["exclude_outside"]:
            weights = [select(logical_and(ge(first + j, 0), lt(first + j, n)), w, const(0.0, _F64))
                       for j, w in enumerate(weights)]
            total = weights[0]
            for w in weights[1:]:
                total = total + w
            total = select(eq(total, 0.0), const(1.0, _F64), total)
            weights = [w / total for w in weights]
        return first, weights

    index = compute_nd((out, taps), lambda i: clamp(weights_of(coord[i[:1]])[0] + i[1]),
                       f"{name}_i{a}", INDEX)
    weight = compute_nd((out, taps), lambda i: cast(_pick(weights_of(coord[i[:1]])[1], i[1]), acc),
                        f"{name}_w{a}", acc)
    return coord, index, weight


def _antialias_weights(ratio: Expr, mode: str, scale: float, a: float) -> list[Expr]:
    """The widened filter's weights, normalised (the op's ``_antialias_weights``)."""
    start = antialias_start(mode, scale)
    scale = min(scale, 1.0)
    weights = []
    for i in range(start, 2 - start):
        if mode == "linear":
            w = 1 - call("abs", (float(i) - ratio) * scale)
            weights.append(minimum(maximum(w, 0.0), 1.0))
            continue
        d = call("abs", scale * (float(i) - ratio))
        d2 = d * d
        d3 = d * d2
        near = (a + 2) * d3 - (a + 3) * d2 + 1
        far = a * d3 - 5 * a * d2 + 8 * a * d - 4 * a
        weights.append(select(le(d, 1.0), near, select(lt(d, 2.0), far, const(0.0, _F64))))
    total = weights[0]
    for w in weights[1:]:
        total = total + w
    return [w / total for w in weights]


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

    tables = {a: _axis_tables(a, x.shape[a], out.shape[a], attrs["scales"][a], attrs,
                              (roi[a], roi[rank + a]), acc, names[0]) for a in axes}
    transform = attrs["coordinate_transformation_mode"]

    def element(i: Indices) -> Expr:
        outside = None
        if transform == "tf_crop_and_resize":
            for a in axes:
                c = tables[a][0][(i[a],)]
                off = logical_or(lt(c, 0.0), gt(c, float(x.shape[a] - 1)))
                outside = off if outside is None else logical_or(outside, off)
        if nearest:
            load = x[tuple(tables[a][1][(v,)] if a in tables else v for a, v in enumerate(i))]
            if outside is None:
                return load
            return select(outside, const(np.array(fill).astype(dtype).item(), dtype), load)
        total: Expr | None = None
        counts = [tables[a][1].shape[1] for a in axes]
        for combo in itertools.product(*(range(c) for c in counts)):
            chosen = dict(zip(axes, combo))
            source = tuple(tables[a][1][(v, chosen[a])] if a in chosen else v for a, v in enumerate(i))
            term = cast(x[source], acc)
            for a, k in chosen.items():
                term = tables[a][2][(i[a], k)] * term
            total = term if total is None else total + term
        assert total is not None
        if outside is not None:
            total = select(outside, const(fill, acc), total)
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            total = minimum(maximum(call("round_even", total), float(info.min)), float(info.max))
        return cast(total, dtype)

    return [compute_nd(out.shape, element, names[0], dtype)]
