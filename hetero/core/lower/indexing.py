"""Lowering the indexing ops (meanings: :mod:`hetero.core.ir.ops.indexing`).

Gathers, tiles, triangles and block rearrangements map each output element to one
input element. Scatters are written from the output's side, as gathers: element p
of the output scans the updates that could land on it (ScatterElements: those along
the indexed axis at p's other coordinates; ScatterND: every index tuple) in the
reference's order. With a reduction that scan is a reduction whose accumulator
starts at ``data[p]`` and takes each matching update in turn, so duplicates combine
exactly as the reference's serial loop combines them; with ``reduction="none"`` a
first stage finds the last matching update (a ``max`` over its position) and a
second reads it. CumSum is a sum over the axis with the terms outside the prefix
masked out, accumulated in :func:`accumulator_dtype`.

Every index read from a tensor is wrapped (negative counts from the end) and clamped
into range, so no load leaves its buffer; indices out of range are an error checked
outside the kernel (the ops' ``index_bounds``), as for Gather.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import IterVar, Reduce, Tensor, max_, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    INDEX, Expr, as_expr, cast, const, eq, ge, gt, le, logical_and, lt, maximum, minimum, select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers


def _index(t: Tensor, at: Sequence[Expr | int], dim: int) -> Expr:
    """``t[at]`` as an index into an axis of ``dim``: wrapped if negative, clamped into range."""
    j = cast(t[tuple(at)], INDEX)
    j = select(lt(j, 0), j + dim, j)
    return minimum(maximum(j, 0), dim - 1)


def _all(conds: Sequence[Expr]) -> Expr:
    result: Expr = as_expr(True)
    for c in conds:
        result = logical_and(result, c)
    return result


_COMBINERS = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}


def _identity(reduction: str, dtype: np.dtype) -> Any:
    if reduction == "add":
        return 0
    if reduction == "mul":
        return 1
    low = reduction == "max"
    if dtype.kind == "f":
        return -np.inf if low else np.inf
    info = np.iinfo(dtype)
    return int(info.min if low else info.max)


def _scatter(data: Tensor, reduction: str, axes: list[IterVar], keyed: int, match: Any,
             update_at: Any, name: str) -> Tensor:
    """The scatter written as a gather: output element p scans ``axes`` (the updates, in
    the reference's order); ``match(p)`` says whether the update at the scan position
    lands on p, and depends on p's first ``keyed`` coordinates only; ``update_at(p,
    position)`` reads the update."""
    dtype, shape = data.dtype, data.shape
    if reduction == "none":
        # The position of the last update that lands on p (-1: none does), found once
        # for each of the keyed coordinates (a whole slice for ScatterND), then its value.
        flat: Expr = as_expr(0)
        for a in axes:
            flat = flat * a.extent + a.var
        last = compute_nd(shape[:keyed], lambda p: max_(select(match(p), flat, -1), axes), f"{name}_last")

        def pick(p: Indices) -> Expr:
            found = last[p[:keyed]]
            k = maximum(found, 0)
            position: list[Expr] = []
            for a in reversed(axes):
                position.insert(0, k % a.extent)
                k = k // a.extent
            return select(ge(found, 0), update_at(p, position), data[p])

        return compute_nd(shape, pick, name, dtype)

    def element(p: Indices) -> Expr:
        identity = const(_identity(reduction, dtype), dtype)
        source = select(match(p), update_at(p, [a.var for a in axes]), identity)
        # The accumulator starts at data[p] and takes the updates in order: the
        # reference's serial loop, one rounding per update.
        return Reduce(_COMBINERS[reduction], source, tuple(axes), data[p], dtype)

    return compute_nd(shape, element, name, dtype)


@lowers("GatherElements")
def lower_gather_elements(inputs: list[Tensor | None], attrs: dict[str, Any],
                          out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """``data`` at the output's position with the index on ``axis``."""
    data, indices = inputs
    assert data is not None and indices is not None
    axis, out, dim = attrs["axis"], out_types[0], data.shape[attrs["axis"]]

    def element(i: Indices) -> Expr:
        return data[i[:axis] + (_index(indices, i, dim),) + i[axis + 1:]]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("ScatterElements")
def lower_scatter_elements(inputs: list[Tensor | None], attrs: dict[str, Any],
                           out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Output element p scans the updates along ``axis`` at p's other coordinates."""
    data, indices, updates = inputs
    assert data is not None and indices is not None and updates is not None
    axis, dim = attrs["axis"], data.shape[attrs["axis"]]
    r = reduce_axis(indices.shape[axis], f"{names[0]}_r")

    def at(p: Indices, position: list[Expr]) -> tuple[Expr, ...]:
        # Coordinates past the indices' extent never match; clamped, their loads stay inside.
        return tuple(position[0] if k == axis else minimum(v, indices.shape[k] - 1)
                     for k, v in enumerate(p))

    def match(p: Indices) -> Expr:
        inside = [lt(v, indices.shape[k]) for k, v in enumerate(p)
                  if k != axis and indices.shape[k] < data.shape[k]]
        return _all(inside + [eq(_index(indices, at(p, [r.var]), dim), p[axis])])

    def update_at(p: Indices, position: list[Expr]) -> Expr:
        return updates[at(p, position)]

    return [_scatter(data, attrs["reduction"], [r], len(data.shape), match, update_at, names[0])]


@lowers("GatherND")
def lower_gather_nd(inputs: list[Tensor | None], attrs: dict[str, Any],
                    out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Output (batch, k, rest) reads data at (batch, the index tuple at k, rest)."""
    data, indices = inputs
    assert data is not None and indices is not None
    b, q, out = attrs["batch_dims"], indices.shape[-1], out_types[0]
    lead = len(indices.shape) - 1

    def element(i: Indices) -> Expr:
        tuple_at = i[:lead]
        picked = tuple(_index(indices, tuple_at + (j,), data.shape[b + j]) for j in range(q))
        return data[i[:b] + picked + i[lead:]]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("ScatterND")
def lower_scatter_nd(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Output element p scans every index tuple; one equal to p's leading q coordinates lands."""
    data, indices, updates = inputs
    assert data is not None and indices is not None and updates is not None
    q, lead = indices.shape[-1], indices.shape[:-1]
    axes = [reduce_axis(n, f"{names[0]}_r{k}") for k, n in enumerate(lead)]

    def match(p: Indices) -> Expr:
        k = tuple(a.var for a in axes)
        return _all([eq(_index(indices, k + (j,), data.shape[j]), p[j]) for j in range(q)])

    def update_at(p: Indices, position: list[Expr]) -> Expr:
        return updates[tuple(position) + p[q:]]

    return [_scatter(data, attrs["reduction"], axes, q, match, update_at, names[0])]


@lowers("Tile")
def lower_tile(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """Each axis reads its index modulo the input's extent."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    return [compute_nd(out.shape, lambda i: x[tuple(v % d for v, d in zip(i, x.shape))],
                       names[0], out.dtype)]


@lowers("Trilu")
def lower_trilu(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """The input where column - row is >= k (upper) or <= k (lower), else zero."""
    x = inputs[0]
    assert x is not None
    k, keep = attrs["k"], ge if attrs["upper"] else le

    def element(i: Indices) -> Expr:
        return select(keep(i[-1] - i[-2], k), x[i], const(0, x.dtype))

    return [compute_nd(x.shape, element, names[0], x.dtype)]


@lowers("EyeLike")
def lower_eye_like(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                   names: list[str]) -> list[Tensor]:
    """One where column - row == k."""
    out, k = out_types[0], attrs["k"]

    def element(i: Indices) -> Expr:
        return select(eq(i[1] - i[0], k), const(1, out.dtype), const(0, out.dtype))

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("OneHot")
def lower_one_hot(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                  names: list[str]) -> list[Tensor]:
    """on_value where the position on the new axis equals the (wrapped) index."""
    indices, values = inputs
    assert indices is not None and values is not None
    axis, depth, out = attrs["axis"], attrs["depth"], out_types[0]

    def element(i: Indices) -> Expr:
        j = cast(indices[i[:axis] + i[axis + 1:]], INDEX)  # float indices truncate toward zero
        j = select(lt(j, 0), j + depth, j)
        return select(eq(j, i[axis]), values[1], values[0])

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("DepthToSpace")
def lower_depth_to_space(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The index map of the reference's reshape-transpose-reshape."""
    x = inputs[0]
    assert x is not None
    out, bs, dcr = out_types[0], attrs["blocksize"], attrs["mode"] == "DCR"
    channels = out.shape[1]

    def element(i: Indices) -> Expr:
        n, c, y, w = i
        by, bx = y % bs, w % bs
        source = (by * bs + bx) * channels + c if dcr else (c * bs + by) * bs + bx
        return x[n, source, y // bs, w // bs]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("SpaceToDepth")
def lower_space_to_depth(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The index map of the reference's reshape-transpose-reshape."""
    x = inputs[0]
    assert x is not None
    out, bs, dcr = out_types[0], attrs["blocksize"], attrs["mode"] == "DCR"
    channels = x.shape[1]

    def element(i: Indices) -> Expr:
        n, c, y, w = i
        block, c_in = (c // channels, c % channels) if dcr else (c % (bs * bs), c // (bs * bs))
        return x[n, c_in, y * bs + block // bs, w * bs + block % bs]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("ReverseSequence")
def lower_reverse_sequence(inputs: list[Tensor | None], attrs: dict[str, Any],
                           out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Time step t of batch entry b reads step len[b] - 1 - t while t < len[b]."""
    x, lens = inputs
    assert x is not None and lens is not None
    b, t = attrs["batch_axis"], attrs["time_axis"]
    steps = x.shape[t]

    def element(i: Indices) -> Expr:
        n = minimum(maximum(lens[i[b]], 0), steps)
        source = select(lt(i[t], n), n - 1 - i[t], i[t])
        return x[tuple(source if k == t else v for k, v in enumerate(i))]

    return [compute_nd(x.shape, element, names[0], x.dtype)]


@lowers("CumSum")
def lower_cumsum(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                 names: list[str]) -> list[Tensor]:
    """A sum over the axis of the terms in the (exclusive, reversed) prefix."""
    x = inputs[0]
    assert x is not None
    axis, n = attrs["axis"], x.shape[attrs["axis"]]
    acc = accumulator_dtype(x.dtype)
    r = reduce_axis(n, f"{names[0]}_r")
    before = gt if attrs["reverse"] else lt
    inclusive = ge if attrs["reverse"] else le

    def element(i: Indices) -> Expr:
        keep = (before if attrs["exclusive"] else inclusive)(r.var, i[axis])
        term = cast(x[i[:axis] + (r.var,) + i[axis + 1:]], acc)
        return cast(sum_(select(keep, term, const(0, acc)), r), x.dtype)

    return [compute_nd(x.shape, element, names[0], x.dtype)]

