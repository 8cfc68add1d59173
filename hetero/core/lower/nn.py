"""Lowerings of the neural-network ops beyond sliding windows: normalisation, matrix
products, softmax (meanings: :mod:`hetero.core.ir.ops.nn`).

Float work accumulates in :func:`accumulator_dtype` (float32 for the 16-bit floats,
whose own precision would lose a long sum) and rounds once to the output dtype, as
the references do with float64. Reductions that a later stage reads many times
(Softmax's maximum and sum, LayerNormalization's mean and deviation) are their own
stages with the reduced axes kept as size 1, so each is computed once per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, max_, min_, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    Expr, binary, call, cast, const, eq, ge, logical_and, logical_or, lt, maximum, minimum, ne,
    select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, broadcast_load, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers

_ZERO = const(0, "int64")


def _guarded_load(t: Tensor, index: Sequence[Expr], axis: int, fill: Any) -> Expr:
    """``t[index]``, or ``fill`` where ``index[axis]`` falls outside ``t``.

    The index is clamped into range as well: a renderer may evaluate both sides of a
    select, and the load must not leave the buffer.
    """
    i, size = index[axis], t.shape[axis]
    clamped = list(index)
    clamped[axis] = maximum(minimum(i, size - 1), 0)
    return select(logical_and(ge(i, 0), lt(i, size)), t[tuple(clamped)], const(fill, t.dtype))


# -- normalisation -----------------------------------------------------------------------


@lowers("LRN")
def lower_lrn(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
    """x / (bias + alpha/size * sum of squares over the channel window) ** beta."""
    x = inputs[0]
    assert x is not None
    acc, size = accumulator_dtype(x.dtype), attrs["size"]
    r = reduce_axis(size, f"{names[0]}_r")
    before = (size - 1) // 2

    def element(idx: Indices) -> Expr:
        window = list(idx)
        window[1] = idx[1] + r.var - before
        v = cast(_guarded_load(x, window, 1, 0), acc)
        denom = const(attrs["bias"], acc) + const(attrs["alpha"] / size, acc) * sum_(v * v, r)
        return cast(cast(x[idx], acc) / binary("pow", denom, const(attrs["beta"], acc)), x.dtype)

    return [compute_nd(x.shape, element, names[0])]


@lowers("BatchNormalization")
def lower_batch_norm(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """(x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c]."""
    x, scale, bias, mean, var = inputs
    assert x is not None and scale is not None and bias is not None
    assert mean is not None and var is not None
    acc = accumulator_dtype(x.dtype)

    def element(idx: Indices) -> Expr:
        c = idx[1]
        std = call("sqrt", cast(var[c], acc) + const(attrs["epsilon"], acc))
        y = (cast(x[idx], acc) - cast(mean[c], acc)) / std * cast(scale[c], acc)
        return cast(y + cast(bias[c], acc), x.dtype)

    return [compute_nd(x.shape, element, names[0])]


@lowers("LayerNormalization")
def lower_layer_norm(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Two passes over each row, its mean then its deviation; then normalise and scale.

    Two passes rather than E[x^2] - E[x]^2, which cancels badly when the mean is
    large against the spread.
    """
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert x is not None and scale is not None
    acc, axis, rank = accumulator_dtype(x.dtype), attrs["axis"], len(x.shape)
    count = const(int(np.prod(x.shape[axis:])), acc)
    row_shape = x.shape[:axis] + (1,) * (rank - axis)
    rs = [reduce_axis(d, f"{names[0]}_r{k}") for k, d in enumerate(x.shape[axis:])]

    def row_element(idx: Indices) -> Indices:
        return tuple(idx[:axis]) + tuple(r.var for r in rs)

    mean = compute_nd(row_shape, lambda idx: sum_(cast(x[row_element(idx)], acc), rs) / count,
                      f"{names[0]}_mean")

    def deviation(idx: Indices) -> Expr:
        centred = cast(x[row_element(idx)], acc) - mean[idx]
        return call("sqrt", sum_(centred * centred, rs) / count + const(attrs["epsilon"], acc))

    std = compute_nd(row_shape, deviation, f"{names[0]}_std")

    def element(idx: Indices) -> Expr:
        row = tuple(idx[:axis]) + (_ZERO,) * (rank - axis)
        y = (cast(x[idx], acc) - mean[row]) / std[row] * cast(broadcast_load(scale, idx), acc)
        if bias is not None:
            y = y + cast(broadcast_load(bias, idx), acc)
        return cast(y, x.dtype)

    y = compute_nd(x.shape, element, names[0])
    if not attrs["statistics"]:
        return [y]
    stash = attrs["stash_type"]
    mean_out = compute_nd(row_shape, lambda idx: cast(mean[idx], stash), names[1])
    inv_std = compute_nd(row_shape, lambda idx: cast(const(1.0, acc) / std[idx], stash), names[2])
    return [y, mean_out, inv_std]


# -- matrix products and softmax -------------------------------------------------------


@lowers("Gemm")
def lower_gemm(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """alpha * A' @ B' + beta * C, the scaling and C applied as the product is stored."""
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    assert a is not None and b is not None
    acc = accumulator_dtype(a.dtype)
    k = reduce_axis(a.shape[0] if attrs["transA"] else a.shape[1], f"{names[0]}_k")

    def element(idx: Indices) -> Expr:
        m, n = idx
        av = a[k.var, m] if attrs["transA"] else a[m, k.var]
        bv = b[n, k.var] if attrs["transB"] else b[k.var, n]
        y = sum_(cast(av, acc) * cast(bv, acc), k)
        if attrs["alpha"] != 1.0:
            y = const(attrs["alpha"], acc) * y
        if c is not None:
            cv = cast(broadcast_load(c, idx), acc)
            y = y + (cv if attrs["beta"] == 1.0 else const(attrs["beta"], acc) * cv)
        return cast(y, a.dtype)

    return [compute_nd(out_types[0].shape, element, names[0])]


@lowers("MatMul")
def lower_matmul(inputs: list[Tensor | None], attrs: dict[str, Any],
                 out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """numpy's matmul: a 1-D A is a row, a 1-D B a column; batch axes broadcast.

    Integer products accumulate in their own dtype and wrap around, as the
    reference's do.
    """
    a, b = inputs
    assert a is not None and b is not None
    acc = accumulator_dtype(a.dtype)
    out = out_types[0].shape
    k = reduce_axis(a.shape[-1], f"{names[0]}_k")
    batch = len(out) - (len(a.shape) > 1) - (len(b.shape) > 1)

    def element(idx: Indices) -> Expr:
        lead, rest = idx[:batch], list(idx[batch:])
        av = a[k.var] if len(a.shape) == 1 else _batched_load(a, lead, (rest.pop(0), k.var))
        bv = b[k.var] if len(b.shape) == 1 else _batched_load(b, lead, (k.var, rest[0]))
        return cast(sum_(cast(av, acc) * cast(bv, acc), k), a.dtype)

    return [compute_nd(out, element, names[0])]


def _batched_load(t: Tensor, batch: Indices, last: tuple[Expr, Expr]) -> Expr:
    """``t`` at ``(*batch, *last)``, its batch axes broadcast against ``batch``."""
    lead = len(batch) - (len(t.shape) - 2)
    return t[tuple(_ZERO if d == 1 else batch[lead + j] for j, d in enumerate(t.shape[:-2])) + last]


@lowers("Softmax")
def lower_softmax(inputs: list[Tensor | None], attrs: dict[str, Any],
                  out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """exp(x - max) / sum(exp(x - max)) along ``axis``: max, exp, sum and divide stages.

    Subtracting the row's maximum keeps every exp in (0, 1], so no row overflows.
    """
    x = inputs[0]
    assert x is not None
    acc, axis = accumulator_dtype(x.dtype), attrs["axis"]
    row_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    r = reduce_axis(x.shape[axis], f"{names[0]}_r")

    def along(idx: Indices, i: Expr) -> Indices:
        return tuple(idx[:axis]) + (i,) + tuple(idx[axis + 1:])

    peak = compute_nd(row_shape, lambda idx: max_(cast(x[along(idx, r.var)], acc), r),
                      f"{names[0]}_max")
    e = compute_nd(x.shape, lambda idx: call("exp", cast(x[idx], acc) - peak[along(idx, _ZERO)]),
                   f"{names[0]}_exp")
    total = compute_nd(row_shape, lambda idx: sum_(e[along(idx, r.var)], r), f"{names[0]}_sum")
    return [compute_nd(x.shape, lambda idx: cast(e[idx] / total[along(idx, _ZERO)], x.dtype),
                       names[0])]


# -- LogSoftmax and Hardmax --------------------------------------------------------------


def _along(idx: Indices, axis: int, i: Expr) -> Indices:
    return tuple(idx[:axis]) + (i,) + tuple(idx[axis + 1:])


@lowers("LogSoftmax")
def lower_log_softmax(inputs: list[Tensor | None], attrs: dict[str, Any],
                      out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """x - max - log(sum(exp(x - max))) along ``axis``: max, then log-sum stages, then subtract."""
    x = inputs[0]
    assert x is not None
    acc, axis = accumulator_dtype(x.dtype), attrs["axis"]
    if x.shape[axis] == 0:
        return [compute_nd(x.shape, lambda idx: cast(x[idx], x.dtype), names[0])]
    row_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    r = reduce_axis(x.shape[axis], f"{names[0]}_r")
    peak = compute_nd(row_shape, lambda idx: max_(cast(x[_along(idx, axis, r.var)], acc), r),
                      f"{names[0]}_max")

    def log_total(idx: Indices) -> Expr:
        shifted = cast(x[_along(idx, axis, r.var)], acc) - peak[idx]
        return call("log", sum_(call("exp", shifted), r))

    total = compute_nd(row_shape, log_total, f"{names[0]}_logsum")

    def element(idx: Indices) -> Expr:
        row = _along(idx, axis, _ZERO)
        return cast(cast(x[idx], acc) - peak[row] - total[row], x.dtype)

    return [compute_nd(x.shape, element, names[0])]


@lowers("Hardmax")
def lower_hardmax(inputs: list[Tensor | None], attrs: dict[str, Any],
                  out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The row's maximum (NaN-propagating), the first index holding it (or a NaN), then
    1 there and 0 elsewhere."""
    x = inputs[0]
    assert x is not None
    axis = attrs["axis"]
    size = x.shape[axis]
    if size == 0:
        return [compute_nd(x.shape, lambda idx: const(0, x.dtype), names[0], x.dtype)]
    row_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    r = reduce_axis(size, f"{names[0]}_r")
    peak = compute_nd(row_shape, lambda idx: max_(x[_along(idx, axis, r.var)], r),
                      f"{names[0]}_max")

    def first(idx: Indices) -> Expr:
        v = x[_along(idx, axis, r.var)]
        hit = logical_or(eq(v, peak[idx]), ne(v, v))  # only a NaN differs from itself
        return min_(select(hit, cast(r.var, "int64"), const(size, "int64")), r)

    index = compute_nd(row_shape, first, f"{names[0]}_argmax", "int64")

    def element(idx: Indices) -> Expr:
        hit = eq(cast(idx[axis], "int64"), index[_along(idx, axis, _ZERO)])
        return select(hit, const(1, x.dtype), const(0, x.dtype))

    return [compute_nd(x.shape, element, names[0], x.dtype)]


# -- instance, group, RMS and Lp normalisation -------------------------------------------


def _moments(x: Tensor, row_shape: tuple[int, ...], source: Any, rs: list[Any], acc: np.dtype,
             epsilon: float, name: str) -> tuple[Tensor, Tensor]:
    """Two-pass mean and sqrt(variance + epsilon) of ``x`` at ``source(idx)`` over ``rs``."""
    count = const(int(np.prod([r.extent for r in rs])), acc)
    mean = compute_nd(row_shape, lambda idx: sum_(cast(x[source(idx)], acc), rs) / count,
                      f"{name}_mean")

    def deviation(idx: Indices) -> Expr:
        centred = cast(x[source(idx)], acc) - mean[idx]
        return call("sqrt", sum_(centred * centred, rs) / count + const(epsilon, acc))

    return mean, compute_nd(row_shape, deviation, f"{name}_std")


@lowers("InstanceNormalization")
def lower_instance_norm(inputs: list[Tensor | None], attrs: dict[str, Any],
                        out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """GroupNormalization's lowering with one channel a group."""
    x = inputs[0]
    assert x is not None
    group_attrs = {"num_groups": x.shape[1], "epsilon": attrs["epsilon"]}
    return lower_group_norm(inputs, group_attrs, out_types, names)


@lowers("GroupNormalization")
def lower_group_norm(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Mean and deviation per (n, group) over the group's channels and the spatial axes
    (two passes), then normalise and apply the per-channel (or per-group) scale and bias."""
    x, scale, bias = inputs
    assert x is not None and scale is not None and bias is not None
    acc, groups = accumulator_dtype(x.dtype), attrs["num_groups"]
    per_group = x.shape[1] // groups
    rc = reduce_axis(per_group, f"{names[0]}_rc")
    rs = [reduce_axis(d, f"{names[0]}_r{k}") for k, d in enumerate(x.shape[2:])]

    def source(idx: Indices) -> Indices:
        return (idx[0], idx[1] * per_group + rc.var) + tuple(r.var for r in rs)

    mean, std = _moments(x, (x.shape[0], groups), source, [rc, *rs], acc, attrs["epsilon"],
                         names[0])

    def param(t: Tensor, c: Expr, g: Expr) -> Expr:
        return cast(t[g] if t.shape[0] != x.shape[1] else t[c], acc)

    def element(idx: Indices) -> Expr:
        c = idx[1]
        g = binary("floordiv", c, const(per_group, "int64"))
        y = (cast(x[idx], acc) - mean[idx[0], g]) / std[idx[0], g] * param(scale, c, g)
        return cast(y + param(bias, c, g), x.dtype)

    return [compute_nd(x.shape, element, names[0])]


@lowers("RMSNormalization")
def lower_rms_norm(inputs: list[Tensor | None], attrs: dict[str, Any],
                   out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """sqrt(mean(x**2) + epsilon) per row, then x / it * scale."""
    x, scale = inputs
    assert x is not None and scale is not None
    acc, axis, rank = accumulator_dtype(x.dtype), attrs["axis"], len(x.shape)
    count = const(int(np.prod(x.shape[axis:])), acc)
    row_shape = x.shape[:axis] + (1,) * (rank - axis)
    rs = [reduce_axis(d, f"{names[0]}_r{k}") for k, d in enumerate(x.shape[axis:])]

    def rms(idx: Indices) -> Expr:
        v = cast(x[tuple(idx[:axis]) + tuple(r.var for r in rs)], acc)
        return call("sqrt", sum_(v * v, rs) / count + const(attrs["epsilon"], acc))

    root = compute_nd(row_shape, rms, f"{names[0]}_rms")

    def element(idx: Indices) -> Expr:
        row = tuple(idx[:axis]) + (_ZERO,) * (rank - axis)
        return cast(cast(x[idx], acc) / root[row] * cast(broadcast_load(scale, idx), acc), x.dtype)

    return [compute_nd(x.shape, element, names[0])]


@lowers("LpNormalization")
def lower_lp_norm(inputs: list[Tensor | None], attrs: dict[str, Any],
                  out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The norm along ``axis`` as its own stage, then x / norm (0 where the norm is 0)."""
    x = inputs[0]
    assert x is not None
    acc, axis = accumulator_dtype(x.dtype), attrs["axis"]
    row_shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    r = reduce_axis(x.shape[axis], f"{names[0]}_r")

    def norm(idx: Indices) -> Expr:
        v = call("abs", cast(x[_along(idx, axis, r.var)], acc))
        if attrs["p"] == 1:
            return sum_(v, r)
        return call("sqrt", sum_(v * v, r))

    total = compute_nd(row_shape, norm, f"{names[0]}_norm")

    def element(idx: Indices) -> Expr:
        n = total[_along(idx, axis, _ZERO)]
        return cast(select(eq(n, const(0, acc)), const(0, acc), cast(x[idx], acc) / n), x.dtype)

    return [compute_nd(x.shape, element, names[0])]
