"""Lowering tensor-manipulation ops: each output element is one input element, found by an index map.

Reshape-like ops (Reshape, Flatten) go through the row-major linear offset;
Squeeze, Unsqueeze, Transpose, Expand, Slice, Split, Gather and Pad (clamped, periodic
or mirrored indices; constant mode selects its fill) map indices axis by axis; Concat picks its source with a chain of selects. Shape and ConstantOfShape
write values known when the function is built; BitCast reads each element's bits as its
new dtype. The attributes arrive canonical
(see :mod:`hetero.core.ir.ops.tensor`): axes non-negative and sorted, Slice bounds
clamped, so no ONNX index rule is re-derived here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, compute
from hetero.core.ir.tir.expr import (
    INDEX,
    Expr,
    as_expr,
    bitcast,
    cast,
    const,
    eq,
    ge,
    logical_and,
    lt,
    maximum,
    minimum,
    select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, broadcast_load, compute_nd
from hetero.core.lower.registry import lowers


def _strides(shape: tuple[int, ...]) -> list[int]:
    return [math.prod(shape[k + 1:]) for k in range(len(shape))]


def _unflatten(offset: Expr, shape: tuple[int, ...]) -> Indices:
    """The indices of row-major ``offset`` in ``shape``."""
    indices = []
    for k, (stride, dim) in enumerate(zip(_strides(shape), shape)):
        index = offset // stride
        # The leading index needs no wrap: offset < prod(shape) bounds it already.
        indices.append(index if k == 0 else index % dim)
    return tuple(indices)


@lowers("Reshape", "Flatten")
def lower_reshape(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                  names: list[str]) -> list[Tensor]:
    """The same row-major elements under the output's shape."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    strides = _strides(out.shape)

    def element(i: Indices) -> Expr:
        offset: Expr = as_expr(0)
        for index, stride in zip(i, strides):
            offset = offset + index * stride
        return x[_unflatten(offset, x.shape)]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("Squeeze")
def lower_squeeze(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                  names: list[str]) -> list[Tensor]:
    """Each kept axis reads its output index; squeezed axes (size 1) read 0."""
    x = inputs[0]
    assert x is not None
    out, axes = out_types[0], attrs["axes"]

    def element(i: Indices) -> Expr:
        kept = iter(i)
        return x[tuple(0 if a in axes else next(kept) for a in range(len(x.shape)))]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("Unsqueeze")
def lower_unsqueeze(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                    names: list[str]) -> list[Tensor]:
    """The input is read at the output's indices minus the new size-1 axes."""
    x = inputs[0]
    assert x is not None
    out, axes = out_types[0], attrs["axes"]
    return [compute_nd(out.shape, lambda i: x[tuple(v for a, v in enumerate(i) if a not in axes)],
                       names[0], out.dtype)]


@lowers("Transpose")
def lower_transpose(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                    names: list[str]) -> list[Tensor]:
    """Output axis k is input axis ``perm[k]``."""
    x = inputs[0]
    assert x is not None
    out, perm = out_types[0], attrs["perm"]

    def element(i: Indices) -> Expr:
        source: list[Expr] = [as_expr(0)] * len(perm)
        for k, p in enumerate(perm):
            source[p] = i[k]
        return x[tuple(source)]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("Expand")
def lower_expand(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                 names: list[str]) -> list[Tensor]:
    """The input broadcast to the output's shape."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    return [compute_nd(out.shape, lambda i: broadcast_load(x, i), names[0], out.dtype)]


@lowers("Slice")
def lower_slice(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """Sliced axis a reads ``start + i * step`` (canonical bounds are exact Python slices)."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    rows = {a: (s, st) for a, s, st in zip(attrs["axes"], attrs["starts"], attrs["steps"])}

    def element(i: Indices) -> Expr:
        return x[tuple(rows[a][0] + v * rows[a][1] if a in rows else v for a, v in enumerate(i))]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


def _shifted(i: Indices, axis: int, offset: Expr | int) -> Indices:
    return i[:axis] + (i[axis] + offset,) + i[axis + 1:]


@lowers("Split")
def lower_split(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """Output k reads the input along ``axis`` from the sum of the sizes before it."""
    x = inputs[0]
    assert x is not None
    axis = attrs["axis"]
    offsets = np.cumsum((0,) + tuple(attrs["split"]))
    return [compute_nd(t.shape, lambda i, o=int(o): x[_shifted(i, axis, o)], name, t.dtype)
            for t, o, name in zip(out_types, offsets, names)]


@lowers("Concat")
def lower_concat(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                 names: list[str]) -> list[Tensor]:
    """A chain of selects on the index along ``axis``, one branch per input.

    Every branch of a select may be evaluated, so each input's index is clamped into
    its own extent: the loads not chosen still stay inside their buffers.
    """
    axis, out = attrs["axis"], out_types[0]
    parts = [t for t in inputs if t is not None and t.shape[axis] > 0]
    offsets = np.cumsum([0] + [t.shape[axis] for t in parts])

    def element(i: Indices) -> Expr:
        value: Expr | None = None
        for t, start in reversed(list(zip(parts, offsets[:-1]))):
            size, start = t.shape[axis], int(start)
            index = i[axis] - start
            # Only the sides a branch can overrun need the clamp: the first input's
            # index is never negative, the last one's never past its end.
            if start > 0:
                index = maximum(index, 0)
            if value is not None:
                index = minimum(index, size - 1)
            load = t[i[:axis] + (index,) + i[axis + 1:]]
            value = load if value is None else select(lt(i[axis], start + size), load, value)
        assert value is not None
        return value

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("Gather")
def lower_gather(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                 names: list[str]) -> list[Tensor]:
    """``data`` along ``axis`` at ``indices``, a negative index counting from the end.

    An index out of range is an error by the op's definition, and generated code
    cannot raise, so the error is raised outside the kernel: constant indices are
    refused when the node is built (the op's ``index_bounds``), run-time ones are
    checked by the backend on the host before the kernel runs
    (:func:`hetero.core.ir.graph.index_checks`; the CPU backend raises an InputError naming
    the node). The kernel still clamps each index into range, so that even indices
    nobody checked never make it read outside ``data``.
    """
    data, indices = inputs
    assert data is not None and indices is not None
    axis, out = attrs["axis"], out_types[0]
    dim, rank = data.shape[axis], len(indices.shape)

    def element(i: Indices) -> Expr:
        j = cast(indices[i[axis:axis + rank]], INDEX)
        j = select(lt(j, 0), j + dim, j)
        j = minimum(maximum(j, 0), dim - 1)
        return data[i[:axis] + (j,) + i[axis + rank:]]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


def _table(values: list[Any], i: Expr, dtype: np.dtype) -> Expr:
    """``values[i]`` for a literal list, as a chain of selects."""
    result: Expr = const(values[-1], dtype)
    for k in reversed(range(len(values) - 1)):
        result = select(eq(i, k), const(values[k], dtype), result)
    return result


@lowers("Shape")
def lower_shape(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """The input's dims ``[start, end)``, known when the function is built."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    dims = list(x.shape[attrs["start"]:attrs["end"]])
    return [compute_nd(out.shape, lambda i: _table(dims, i[0], out.dtype), names[0], out.dtype)]


@lowers("Size")
def lower_size(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """The input's element count, known when the function is built."""
    x = inputs[0]
    assert x is not None
    return [compute((), lambda: const(x.buffer.size, "int64"), names[0], "int64")]


@lowers("ConstantOfShape")
def lower_constant_of_shape(inputs: list[Tensor | None], attrs: dict[str, Any],
                            out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Every element is the one value of ``value``."""
    out = out_types[0]
    value = attrs["value"].reshape(()).item()
    return [compute_nd(out.shape, lambda i: const(value, out.dtype), names[0], out.dtype)]


def _pad_source(o: Expr, n: int, begin: int, end: int, mode: str) -> tuple[Expr, Expr | None]:
    """The input index output index ``o`` reads along one axis, and for constant mode
    the condition that it lies inside the (cropped) input."""
    start, stop = max(-begin, 0), n + min(end, 0)  # the part negative pads leave
    size = stop - start
    k = o - begin - start  # the position in the cropped axis
    if mode == "constant":
        inside = logical_and(ge(k, 0), lt(k, size))
        return minimum(maximum(k, 0), size - 1) + start, inside
    if mode == "edge":
        return minimum(maximum(k, 0), size - 1) + start, None
    # k runs over [-before, size + after): within one period of the axis, selects do
    # what the floored mod does (and keep the loop vectorizable).
    before, after = max(begin, 0), max(end, 0)
    if mode == "wrap":
        if max(before, after) <= size:
            return select(lt(k, 0), k + size, select(ge(k, size), k - size, k)) + start, None
        return k % size + start, None
    if size == 1:  # reflect
        return as_expr(start), None
    period = 2 * (size - 1)
    if max(before, after) <= size - 1:
        return select(lt(k, 0), -k, select(ge(k, size), period - k, k)) + start, None
    t = k % period
    return select(lt(t, size), t, period - t) + start, None


@lowers("Pad")
def lower_pad(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
    """Each padded axis reads a clamped (edge), periodic (wrap) or mirrored (reflect)
    index; constant mode selects ``value`` outside the input, its load clamped inside."""
    x = inputs[0]
    assert x is not None
    out, pads, mode = out_types[0], attrs["pads"], attrs["mode"]
    rank = len(x.shape)
    value = const(attrs["value"].reshape(()).astype(out.dtype).item(), out.dtype)
    if any(n + min(pads[a], 0) + min(pads[rank + a], 0) == 0 for a, n in enumerate(x.shape)):
        # Crops took a whole axis (constant mode): there is nothing to load.
        return [compute_nd(out.shape, lambda i: value, names[0], out.dtype)]

    def element(i: Indices) -> Expr:
        source, inside = [], None
        for a, o in enumerate(i):
            begin, end = pads[a], pads[rank + a]
            if begin == 0 and end == 0:
                source.append(o)
                continue
            j, ok = _pad_source(o, x.shape[a], begin, end, mode)
            source.append(j)
            if ok is not None:
                inside = ok if inside is None else logical_and(inside, ok)
        load = x[tuple(source)]
        return load if inside is None else select(inside, load, value)

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("BitCast")
def lower_bitcast(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                  names: list[str]) -> list[Tensor]:
    """Each element's bits read as ``to``."""
    x = inputs[0]
    assert x is not None
    return [compute_nd(x.shape, lambda idx: bitcast(x[idx], attrs["to"]), names[0], attrs["to"])]
