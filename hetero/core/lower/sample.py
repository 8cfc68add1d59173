"""Lowering GridSample: per-axis tables of taps, then one stage that combines them.

The taps do not depend on the channel, so each spatial axis gets small stages of its
own, over (N, O1, ..., Or): the pixel coordinate, with the operations of
:mod:`hetero.core.ir.ops.sample` in the same order and precision (so nearest picks
the reference's index), then the taps' indices (-1 where a tap reads 0) and, for
linear and cubic, their weights. The output stage (N, C, O...) only loads those
tables and the input at the taps, so its loops stay free of the coordinate maths.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from hetero.core.ir.ops.sample import (
    FAR,
    REFLECT_REACH,
    accumulator,
    bounds,
    coordinate_dtype,
    cubic_weights,
    denormalize,
)
from hetero.core.ir.tir.compute import Tensor
from hetero.core.ir.tir.expr import (
    INDEX,
    Expr,
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


def reflect(x: Expr, lo: float, hi: float) -> Expr:
    """``x`` (float64) mirrored into ``[lo, hi]`` (the op's ``reflect``)."""
    span = hi - lo
    if span == 0:
        return const(lo, _F64)
    x = minimum(maximum(x, lo - REFLECT_REACH), hi + REFLECT_REACH)
    below = lt(x, lo)
    dx = select(below, lo - x, x - hi)
    k = call("floor", dx / span)
    r = dx - k * span
    even = eq(k - 2.0 * call("floor", k / 2.0), 0.0)
    inside_low, inside_high = lo + r, hi - r
    mirrored = select(below, select(even, inside_low, inside_high),
                      select(even, inside_high, inside_low))
    return select(logical_or(below, gt(x, hi)), mirrored, x)


def _pad_coordinate(x: Expr, n: int, attrs: dict[str, Any]) -> Expr:
    lo, hi = bounds(n, attrs["align_corners"])
    outside = logical_or(lt(x, lo), gt(x, hi))
    if attrs["padding_mode"] == "border" and attrs["mode"] != "cubic":
        return select(outside, minimum(maximum(x, 0.0), float(n - 1)), x)
    if attrs["padding_mode"] == "reflection":
        return select(outside, cast(reflect(cast(x, _F64), lo, hi), x.dtype), x)
    return x


def _pad_index(i: Expr, n: int, attrs: dict[str, Any]) -> Expr:
    """Index ``i`` as the padding mode maps it; -1 where the tap reads 0."""
    if attrs["padding_mode"] == "zeros":
        return select(logical_and(ge(i, 0), lt(i, n)), i, const(-1, INDEX))
    if attrs["padding_mode"] == "border":
        return minimum(maximum(i, 0), n - 1)
    lo, hi = bounds(n, attrs["align_corners"])
    mirrored = cast(reflect(cast(i, _F64), lo, hi), INDEX)
    return minimum(maximum(mirrored, 0), n - 1)


def _pick(values: list[Expr], k: Expr) -> Expr:
    """``values[k]`` as a chain of selects."""
    result = values[-1]
    for j in reversed(range(len(values) - 1)):
        result = select(eq(k, j), values[j], result)
    return result


def _axis_tables(grid: Tensor, d: int, n: int, attrs: dict[str, Any], acc: np.dtype,
                 name: str) -> tuple[Tensor, Tensor | None]:
    """Axis ``d``'s tap indices ``(N, O..., taps)`` and weights (None for nearest)."""
    rank = len(grid.shape) - 2
    cdt = coordinate_dtype(grid.dtype)
    mode = attrs["mode"]
    sp = grid.shape[:-1]

    def coordinate(i: Indices) -> Expr:
        x = denormalize(cast(grid[tuple(i) + (rank - 1 - d,)], cdt), n, attrs["align_corners"])
        if mode == "nearest":
            x = call("round_even", x)
        x = _pad_coordinate(x, n, attrs)
        return select(gt(x, n + 3.0), const(n + 3.0, cdt), select(ge(x, FAR), x, const(FAR, cdt)))

    coord = compute_nd(sp, coordinate, f"{name}_x{d}", cdt)
    if mode == "nearest":
        index = compute_nd(sp + (1,), lambda i: _pad_index(
            cast(call("floor", coord[i[:-1]]), INDEX), n, attrs), f"{name}_i{d}", INDEX)
        return index, None
    offsets = (0, 1) if mode == "linear" else (-1, 0, 1, 2)

    def tap(i: Indices) -> Expr:
        base = cast(call("floor", coord[i[:-1]]), INDEX)
        return _pad_index(base + (i[-1] + offsets[0]), n, attrs)

    def weight(i: Indices) -> Expr:
        x = coord[i[:-1]]
        r = x - call("floor", x)
        weights = [1 - r, r] if mode == "linear" else cubic_weights(r)
        return cast(_pick(weights, i[-1]), acc)

    taps = len(offsets)
    index = compute_nd(sp + (taps,), tap, f"{name}_i{d}", INDEX)
    return index, compute_nd(sp + (taps,), weight, f"{name}_w{d}", acc)


@lowers("GridSample")
def lower_grid_sample(inputs: list[Tensor | None], attrs: dict[str, Any],
                      out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Nearest loads one element; linear and cubic sum weighted taps (module doc)."""
    x, grid = inputs
    assert x is not None and grid is not None
    out = out_types[0]
    rank = len(x.shape) - 2
    acc = accumulator(out.dtype)
    tables = [_axis_tables(grid, d, x.shape[2 + d], attrs, acc, names[0]) for d in range(rank)]
    nearest = attrs["mode"] == "nearest"

    def element(i: Indices) -> Expr:
        n, c, sp = i[0], i[1], tuple(i[2:])
        total: Expr | None = None
        for combo in itertools.product(*(range(t[0].shape[-1]) for t in tables)):
            index = [t[0][(n,) + sp + (k,)] for t, k in zip(tables, combo)]
            valid: Expr | None = None
            if attrs["padding_mode"] == "zeros":
                for j in index:
                    valid = ge(j, 0) if valid is None else logical_and(valid, ge(j, 0))
            value = x[(n, c) + tuple(maximum(j, 0) for j in index)]
            if nearest:
                zero = const(np.zeros((), out.dtype).item(), out.dtype)
                return value if valid is None else select(valid, value, zero)
            term = cast(value, acc)
            for t, k in zip(tables, combo):
                assert t[1] is not None
                term = t[1][(n,) + sp + (k,)] * term
            if valid is not None:
                term = select(valid, term, const(0.0, acc))
            total = term if total is None else total + term
        assert total is not None
        return cast(total, out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]
