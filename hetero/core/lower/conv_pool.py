"""Lowerings of the sliding-window ops: convolution and pooling (meanings:
:mod:`hetero.core.ir.ops.conv_pool`).

Every window op reads its input at ``o * stride + tap * dilation - pad_begin`` on each
spatial axis. Where that position can leave the input (padding, or a ceil-mode window
hanging past the end) the read becomes a ``select`` that yields the padding value
(0 for Conv and AveragePool, the lowest value for MaxPool), with the index clamped
into range since a renderer may evaluate both sides of a select. Axes whose windows
never leave the input carry no check at all.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import IterVar, Tensor, max_, min_, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    INDEX, Expr, binary, call, cast, const, eq, ge, logical_and, logical_or, lt, maximum,
    minimum, ne, select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers


def _window_read(x: Tensor, batch: Expr, channel: Expr, out: Sequence[Expr],
                 taps: Sequence[IterVar], attrs: dict[str, Any], out_spatial: Sequence[int],
                 fill: Any) -> Expr:
    """``x`` at the taps of the window at output position ``out``; ``fill`` off the input."""
    index, inside = _window_position(x, batch, channel, out, taps, attrs, out_spatial)
    load = x[tuple(index)]
    return load if inside is None else select(inside, load, const(fill, x.dtype))


def _window_position(x: Tensor, batch: Expr, channel: Expr, out: Sequence[Expr],
                     taps: Sequence[IterVar], attrs: dict[str, Any], out_spatial: Sequence[int]
                     ) -> tuple[list[Expr], Expr | None]:
    """The (clamped) index of ``x`` that a window's tap reads, and the condition that it
    lies on ``x`` (None where it always does)."""
    index: list[Expr] = [batch, channel]
    inside: Expr | None = None
    for i, tap in enumerate(taps):
        size, stride, dilation, begin = (
            x.shape[2 + i], attrs["strides"][i], attrs["dilations"][i], attrs["pads"][i]
        )
        p = out[i] * stride + tap.var * dilation - begin
        last = (out_spatial[i] - 1) * stride + (tap.extent - 1) * dilation - begin
        checks = ([ge(p, 0)] if begin > 0 else []) + ([lt(p, size)] if last >= size else [])
        if begin > 0:
            p = maximum(p, 0)
        if last >= size:
            p = minimum(p, size - 1)
        index.append(p)
        for check in checks:
            inside = check if inside is None else logical_and(inside, check)
    return index, inside


def _taps(kernel: Sequence[int], name: str) -> list[IterVar]:
    return [reduce_axis(k, f"{name}_k{i}") for i, k in enumerate(kernel)]


@lowers("Conv")
def lower_conv(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """Y[n, co, o...] = sum over the group's input channels and the kernel taps of
    X (zero-padded) times W, plus B[co]."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    out = out_types[0].shape
    acc, group = accumulator_dtype(x.dtype), attrs["group"]
    per_group_in, per_group_out = w.shape[1], w.shape[0] // group
    rc = reduce_axis(per_group_in, f"{names[0]}_rc")
    taps = _taps(w.shape[2:], names[0])

    def element(idx: Indices) -> Expr:
        batch, co, o = idx[0], idx[1], idx[2:]
        ci = rc.var if group == 1 else co // per_group_out * per_group_in + rc.var
        xv = _window_read(x, batch, ci, o, taps, attrs, out[2:], 0)
        wv = w[(co, rc.var) + tuple(t.var for t in taps)]
        y = sum_(cast(xv, acc) * cast(wv, acc), [rc, *taps])
        if b is not None:
            y = y + cast(b[co], acc)
        return cast(y, x.dtype)

    return [compute_nd(out, element, names[0])]


@lowers("MaxPool")
def lower_max_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                   out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The maximum over each window; padding reads as the lowest value, so never wins."""
    x = inputs[0]
    assert x is not None
    out = out_types[0].shape
    taps = _taps(attrs["kernel_shape"], names[0])
    lowest = -math.inf if x.dtype.kind == "f" else int(np.iinfo(x.dtype).min)

    def element(idx: Indices) -> Expr:
        batch, c, o = idx[0], idx[1], idx[2:]
        return max_(_window_read(x, batch, c, o, taps, attrs, out[2:], lowest), taps)

    y = compute_nd(out, element, names[0])
    if not attrs["indices"]:
        return [y]
    return [y, _max_pool_indices(x, y, attrs, out, names[1])]


def _max_pool_indices(x: Tensor, y: Tensor, attrs: dict[str, Any], out: tuple[int, ...],
                      name: str) -> Tensor:
    """The first tap (row-major over the kernel) on ``x`` holding the window's maximum (a
    NaN when that is NaN), as ArgMax finds it; then that tap's flat index into ``x``."""
    kernel, spatial = tuple(attrs["kernel_shape"]), x.shape[2:]
    taps = _taps(kernel, f"{name}_t")
    count = math.prod(kernel)

    def first(idx: Indices) -> Expr:
        _, inside = _window_position(x, idx[0], idx[1], idx[2:], taps, attrs, out[2:])
        v = _window_read(x, idx[0], idx[1], idx[2:], taps, attrs, out[2:], 0)
        hit = eq(v, y[idx])
        if x.dtype.kind == "f":
            hit = logical_or(hit, ne(v, v))  # only a NaN differs from itself
        if inside is not None:
            hit = logical_and(inside, hit)
        tap: Expr = const(0, INDEX)
        for t in taps:
            tap = tap * t.extent + cast(t.var, INDEX)
        return min_(select(hit, tap, const(count, INDEX)), taps)

    found = compute_nd(out, first, f"{name}_tap", INDEX)
    order = range(len(spatial)) if attrs["storage_order"] else reversed(range(len(spatial)))
    step, strides = 1, [0] * len(spatial)
    for i in order:
        strides[i], step = step, step * spatial[i]

    def element(idx: Indices) -> Expr:
        tap = found[idx]
        flat = (cast(idx[0], INDEX) * x.shape[1] + idx[1]) * math.prod(spatial)
        for i, k in enumerate(kernel):
            k_i = tap // math.prod(kernel[i + 1:]) % k
            position = (idx[2 + i] * attrs["strides"][i] + k_i * attrs["dilations"][i]
                        - attrs["pads"][i])
            flat = flat + position * strides[i]
        return select(lt(tap, count), flat, const(-1, INDEX))

    return compute_nd(out, element, name, INDEX)


def _tap_count(o: Expr, tap: IterVar, size: int, out_extent: int, attrs: dict[str, Any],
               axis: int) -> Expr:
    """How many taps of the window at ``o`` count in AveragePool's divisor on one axis.

    The counted span is the input, widened by the explicit pads under
    count_include_pad; a ceil-mode overhang never counts. Taps ``r`` with
    ``lo <= start + r * d < hi`` run from ``ceil((lo - start) / d)`` to
    ``floor((hi - 1 - start) / d)``, clipped to the kernel.
    """
    n = len(attrs["kernel_shape"])
    stride, dilation = attrs["strides"][axis], attrs["dilations"][axis]
    begin, end = attrs["pads"][axis], attrs["pads"][axis + n]
    lo, hi = (-begin, size + end) if attrs["count_include_pad"] else (0, size)
    last = (out_extent - 1) * stride + (tap.extent - 1) * dilation - begin
    if -begin >= lo and last < hi:
        return const(tap.extent, "int64")
    start = o * stride - begin
    first_tap = maximum((lo - start + dilation - 1) // dilation, 0)
    last_tap = minimum((hi - 1 - start) // dilation, tap.extent - 1)
    return maximum(last_tap - first_tap + 1, 0)


@lowers("AveragePool")
def lower_average_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                       out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The window's sum over its counted taps; the count is index arithmetic, not a
    second pass (0 taps, possible with dilation, averages to 0)."""
    x = inputs[0]
    assert x is not None
    out = out_types[0].shape
    acc = accumulator_dtype(x.dtype)
    taps = _taps(attrs["kernel_shape"], names[0])

    def element(idx: Indices) -> Expr:
        batch, c, o = idx[0], idx[1], idx[2:]
        total = sum_(cast(_window_read(x, batch, c, o, taps, attrs, out[2:], 0), acc), taps)
        count: Expr = const(1, "int64")
        for i, tap in enumerate(taps):
            count = count * _tap_count(o[i], tap, x.shape[2 + i], out[2 + i], attrs, i)
        return cast(total / cast(maximum(count, 1), acc), x.dtype)

    return [compute_nd(out, element, names[0])]


def _global_taps(x: Tensor, name: str) -> list[IterVar]:
    return [reduce_axis(d, f"{name}_r{i}") for i, d in enumerate(x.shape[2:])]


@lowers("GlobalAveragePool")
def lower_global_average_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                              out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The mean over all spatial axes."""
    x = inputs[0]
    assert x is not None
    acc, taps = accumulator_dtype(x.dtype), _global_taps(x, names[0])
    count = const(math.prod(x.shape[2:]), acc)

    def element(idx: Indices) -> Expr:
        total = sum_(cast(x[idx[:2] + tuple(t.var for t in taps)], acc), taps)
        return cast(total / count, x.dtype)

    out = out_types[0].shape
    return [compute_nd(out, element, names[0])]


@lowers("GlobalMaxPool")
def lower_global_max_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                          out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The maximum over all spatial axes."""
    x = inputs[0]
    assert x is not None
    taps = _global_taps(x, names[0])

    def element(idx: Indices) -> Expr:
        return max_(x[idx[:2] + tuple(t.var for t in taps)], taps)

    out = out_types[0].shape
    return [compute_nd(out, element, names[0])]


def _lp_term(v: Expr, p: int) -> Expr:
    """``|v| ** p``, by multiplication for the common orders."""
    a = call("abs", v)
    if p == 1:
        return a
    if p == 2:
        return v * v
    return binary("pow", a, const(float(p), v.dtype))


def _lp_root(total: Expr, p: int) -> Expr:
    if p == 1:
        return total
    if p == 2:
        return call("sqrt", total)
    return binary("pow", total, const(1.0 / p, total.dtype))


@lowers("LpPool")
def lower_lp_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                  out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """(sum of |x| ** p over each window) ** (1 / p); padding reads as 0."""
    x = inputs[0]
    assert x is not None
    out, p = out_types[0].shape, attrs["p"]
    acc = accumulator_dtype(x.dtype)
    taps = _taps(attrs["kernel_shape"], names[0])

    def element(idx: Indices) -> Expr:
        batch, c, o = idx[0], idx[1], idx[2:]
        v = cast(_window_read(x, batch, c, o, taps, attrs, out[2:], 0), acc)
        return cast(_lp_root(sum_(_lp_term(v, p), taps), p), x.dtype)

    return [compute_nd(out, element, names[0])]


@lowers("GlobalLpPool")
def lower_global_lp_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """(sum of |x| ** p over all spatial axes) ** (1 / p)."""
    x = inputs[0]
    assert x is not None
    acc, taps, p = accumulator_dtype(x.dtype), _global_taps(x, names[0]), attrs["p"]

    def element(idx: Indices) -> Expr:
        v = cast(x[idx[:2] + tuple(t.var for t in taps)], acc)
        return cast(_lp_root(sum_(_lp_term(v, p), taps), p), x.dtype)

    return [compute_nd(out_types[0].shape, element, names[0])]
