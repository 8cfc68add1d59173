"""Lowering GridSample and RoiAlign: per-axis tables of taps or samples, then a stage
that combines them.

The taps do not depend on the channel, so each spatial axis gets small stages of its
own, over (N, O1, ..., Or): the pixel coordinate, with the operations of
:mod:`hetero.core.ir.ops.sample` in the same order and precision (so nearest picks
the reference's index), then the taps' indices (-1 where a tap reads 0) and, for
linear and cubic, their weights. The output stage (N, C, O...) only loads those
tables and the input at the taps, so its loops stay free of the coordinate maths.

AffineGrid is one stage: each grid entry sums theta's row against the pixel's
homogeneous coordinates, in float64.

RoiAlign's sample count per bin may depend on the rois, which arrive at run time, so
its accumulation is written as loops (an extern stage) over a window of samples per
axis that holds every sample inside the image, skipping those that are not.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from hetero.core.ir.ops.sample import (
    FAR,
    MAX_SAMPLES,
    REFLECT_REACH,
    accumulator,
    bounds,
    coordinate_dtype,
    cubic_weights,
    denormalize,
)
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import Tensor, extern, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    INDEX,
    Expr,
    Var,
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
from hetero.core.ir.tir.stmt import For, IfThenElse, Stmt, Store, seq
from hetero.core.lower.elementwise import Indices, compute_nd, serial_nest
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
    cdt = coordinate_dtype(grid.dtype, acc)
    mode = attrs["mode"]
    sp = grid.shape[:-1]

    def coordinate(i: Indices) -> Expr:
        x = denormalize(cast(grid[tuple(i) + (rank - 1 - d,)], cdt), n, attrs["align_corners"],
                        fence=lambda v: call("fence", v))
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
        r = cast(x - call("floor", x), acc)
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


# -- RoiAlign ---------------------------------------------------------------------------
def _window(ratio: int, size: int) -> int:
    """How many samples per bin along an axis of ``size`` the accumulation visits: all
    ``ratio`` of them, or for an adaptive count the most that can lie within one pixel of
    the image (more than one sample a bin means samples over half a pixel apart), with
    slack for the window's conservative start."""
    return ratio if ratio > 0 else 2 * size + 8


def _roi_tables(rois: Tensor, attrs: dict[str, Any], cdt: np.dtype, name: str
                ) -> tuple[Tensor, Tensor, Tensor]:
    """Per roi: ``(start_h, start_w, bin_h, bin_w)`` (R, 4), the samples per bin
    ``(grid_h, grid_w)`` (R, 2) and, per roi and bin, the first sample the window visits
    ``(R, 2, max(oh, ow))``."""
    half = attrs["half_pixel"]
    scale, offset = const(attrs["spatial_scale"], cdt), const(0.5 if half else 0.0, cdt)
    pooled = (attrs["output_height"], attrs["output_width"])

    def geometry(i: Indices) -> Expr:
        r, j = i
        coord = [cast(rois[(r, k)], cdt) * scale - offset for k in range(4)]
        start = [coord[1], coord[0]]
        lengths = [coord[3] - start[0], coord[2] - start[1]]
        if not half:
            lengths = [maximum(v, const(1.0, cdt)) for v in lengths]
        bins = [lengths[a] / const(float(pooled[a]), cdt) for a in range(2)]
        return _pick(start + bins, j)

    geo = compute_nd((rois.shape[0], 4), geometry, f"{name}_geo", cdt)
    ratio = attrs["sampling_ratio"]
    limit = float(MAX_SAMPLES)

    def grid(i: Indices) -> Expr:
        if ratio > 0:
            return const(ratio, INDEX)
        b = call("ceil", cast(geo[(i[0], i[1] + 2)], _F64))
        return cast(select(gt(b, limit), const(limit, _F64),
                           select(ge(b, -limit), b, const(0.0, _F64))), INDEX)

    grids = compute_nd((rois.shape[0], 2), grid, f"{name}_grid", INDEX)

    def first(i: Indices) -> Expr:
        r, a, p = i
        if ratio > 0:
            return const(0, INDEX)
        start, size = cast(geo[(r, a)], _F64), cast(geo[(r, a + 2)], _F64)
        g = grids[(r, a)]
        # The sample index where y reaches -1, in float64, less a margin for rounding.
        t = (-1.0 - start - cast(p, _F64) * size) * cast(g, _F64) / size - 2.5
        t = select(gt(t, 0.0), select(lt(t, limit), t, const(limit, _F64)), const(0.0, _F64))
        return select(ge(g, 2), cast(call("floor", t), INDEX), const(0, INDEX))

    starts = compute_nd((rois.shape[0], 2, max(pooled)), first, f"{name}_lo", INDEX)
    return geo, grids, starts


def _sample_table(geo: Tensor, grids: Tensor, starts: Tensor, a: int, pooled: int, size: int,
                  window: int, cdt: np.dtype, name: str) -> Tensor:
    """Axis ``a``'s samples ``(R, pooled, window, 4)``: the lower pixel (-1 for a sample
    that does not exist or lies outside), the upper one, and their weights as bit-exact
    floats of the roi arithmetic (see the op's ``roi_samples``)."""
    def entry(i: Indices) -> Expr:
        r, p, k, field = i
        g = grids[(r, a)]
        index = starts[(r, a, p)] + k
        start, bin_size = geo[(r, a)], geo[(r, a + 2)]
        y = (start + cast(p, cdt) * bin_size
             + (cast(index, cdt) + 0.5) * bin_size / cast(maximum(g, 1), cdt))
        inside = logical_and(lt(index, g), logical_and(ge(y, -1.0), le(y, float(size))))
        y = select(inside, maximum(y, const(0.0, cdt)), const(0.0, cdt))
        low = cast(y, INDEX)
        top = ge(low, size - 1)
        low = select(top, const(size - 1, INDEX), low)
        high = select(top, const(size - 1, INDEX), low + 1)
        frac = select(top, const(0.0, cdt), y - cast(low, cdt))
        fields = [cast(select(inside, low, const(-1, INDEX)), cdt), cast(high, cdt),
                  1.0 - frac, frac]
        return _pick(fields, field)

    return compute_nd((geo.shape[0], pooled, window, 4), entry, f"{name}_s{a}", cdt)


@lowers("RoiAlign")
def lower_roi_align(inputs: list[Tensor | None], attrs: dict[str, Any],
                    out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Tables of each roi's samples along y and x, a serial accumulation over the samples
    that lie inside (each channel innermost, so the visit of a sample is paid once for all
    channels), then the average or maximum with the samples outside."""
    x, rois, batch = inputs
    assert x is not None and rois is not None and batch is not None
    out = out_types[0]
    n_img, channels, height, width = x.shape
    n_rois, _, oh, ow = out.shape
    cdt = accumulator(out.dtype)
    name = names[0]
    geo, grids, starts = _roi_tables(rois, attrs, cdt, name)
    ratio = attrs["sampling_ratio"]
    kh, kw = _window(ratio, height), _window(ratio, width)
    ys = _sample_table(geo, grids, starts, 0, oh, height, kh, cdt, name)
    xs = _sample_table(geo, grids, starts, 1, ow, width, kw, cdt, name)
    is_max = attrs["mode"] == "max"

    def image(r: Expr) -> Expr:
        return minimum(maximum(cast(batch[(r,)], INDEX), 0), n_img - 1)

    jh, jw, c = Var(f"{name}_kh"), Var(f"{name}_kw"), Var(f"{name}_c")

    def build(acc: Buffer) -> Stmt:
        def cell(i: Indices) -> Stmt:
            r, ph, pw = i
            at = (r, ph, pw, c)
            b = image(r)
            y = [ys.buffer[(r, ph, jh, f)] for f in range(4)]
            xw = [xs.buffer[(r, pw, jw, f)] for f in range(4)]
            rows = [cast(y[0], INDEX), cast(y[1], INDEX)]
            cols = [cast(xw[0], INDEX), cast(xw[1], INDEX)]
            terms = [(y[2 + u] * xw[2 + v]) * cast(x.buffer[(b, c, rows[u], cols[v])], cdt)
                     for u in range(2) for v in range(2)]
            if is_max:
                value = maximum(maximum(maximum(terms[0], terms[1]), terms[2]), terms[3])
                update = maximum(acc[at], value)
            else:
                update = acc[at] + (((terms[0] + terms[1]) + terms[2]) + terms[3])
            init = const(-np.inf if is_max else 0.0, cdt)
            visit = For(jw, kw, IfThenElse(ge(xw[0], 0.0),
                                           For(c, channels, Store(acc, at, update))))
            return seq(For(c, channels, Store(acc, at, init)),
                       For(jh, kh, IfThenElse(ge(y[0], 0.0), visit)))

        return serial_nest((n_rois, oh, ow), f"{name}_p", cell)

    # Channels innermost, so the accumulation's loads and stores are contiguous.
    sums = extern((n_rois, oh, ow, channels), cdt, f"{name}_acc", (x, batch, ys, xs), build)
    k = reduce_axis(kh, f"{name}_vh")
    inside_h = compute_nd((n_rois, oh), lambda i: sum_(
        select(ge(ys[(i[0], i[1], k.var, 0)], 0.0), const(1, INDEX), const(0, INDEX)), k),
        f"{name}_nh", INDEX)
    k2 = reduce_axis(kw, f"{name}_vw")
    inside_w = compute_nd((n_rois, ow), lambda i: sum_(
        select(ge(xs[(i[0], i[1], k2.var, 0)], 0.0), const(1, INDEX), const(0, INDEX)), k2),
        f"{name}_nw", INDEX)

    def element(i: Indices) -> Expr:
        r, ch, ph, pw = i
        gh, gw = grids[(r, 0)], grids[(r, 1)]
        total = maximum(gh, 0) * maximum(gw, 0)
        outside = gt(total, inside_h[(r, ph)] * inside_w[(r, pw)])
        # A sample outside weighs 0 against pixel (0, 0), as the references compute it.
        zero = const(0.0, cdt) * cast(x[(image(r), ch, 0, 0)], cdt)
        acc = sums[(r, ph, pw, ch)]
        if is_max:
            value = select(outside, maximum(acc, zero), acc)
            value = select(eq(total, 0), const(0.0, cdt), value)
        else:
            value = (acc + select(outside, zero, const(0.0, cdt))) / cast(maximum(gh * gw, 1), cdt)
        return cast(value, out.dtype)

    return [compute_nd(out.shape, element, name, out.dtype)]


# -- AffineGrid -------------------------------------------------------------------------
def _base(i: Expr, n: int, align_corners: int) -> Expr:
    """Pixel ``i``'s normalised coordinate (the op's ``base_coordinates``), float64."""
    index = cast(i, _F64)
    if align_corners:
        return const(-1.0, _F64) if n == 1 else index * (2.0 / (n - 1)) + -1.0
    step = 2.0 / n
    return index * step + (-1.0 + step / 2)


@lowers("AffineGrid")
def lower_affine_grid(inputs: list[Tensor | None], attrs: dict[str, Any],
                      out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """One stage: theta's row dotted with (x, y[, z], 1) at each pixel."""
    theta = inputs[0]
    assert theta is not None
    out = out_types[0]
    spatial = tuple(attrs["size"][2:])
    r = len(spatial)

    def element(i: Indices) -> Expr:
        n, sp, k = i[0], tuple(i[1:-1]), i[-1]
        total = cast(theta[(n, k, r)], _F64)
        for j in range(r):
            axis = r - 1 - j  # component j reads the j-th axis from the innermost
            total = cast(theta[(n, k, j)], _F64) * _base(sp[axis], spatial[axis],
                                                        attrs["align_corners"]) + total
        return cast(total, out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]
