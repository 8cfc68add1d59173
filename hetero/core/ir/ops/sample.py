"""Sampling at computed coordinates: GridSample.

GridSample reads ``X`` (N, C, D1, ..., Dr) at the points a ``grid`` (N, O1, ..., Or, r)
gives in normalised coordinates (-1 and 1 the edges of each axis; the grid's last
axis lists them innermost axis first: x, y, z). Along each spatial axis a point
becomes a pixel coordinate (:func:`denormalize`), is brought inside by the padding
mode (:func:`pad_coordinate`), and selects taps, each an input index with a weight
(:func:`axis_taps`): nearest one (rounded half to even, as onnx's reference and
PyTorch), linear two, cubic four (Keys' cubic convolution, a = -0.75). A tap outside
the axis reads 0 (``zeros``), the edge (``border``) or its mirror image
(``reflection``, :func:`reflect`). The output is the sum over every combination of
taps of the product of their weights times the input there.

The coordinates are computed in the grid's precision (float32 for float16 and
bfloat16 grids, float64 for float64 ones), with the operations of onnx's reference
and onnxruntime in their order; reflection in float64, as onnx's reference does.
A grid coordinate that is NaN reads as one far below the axis (-4 pixels): zeros
padding gives 0 there, border the edge, reflection its mirror image (onnx's
reference fails on it; onnxruntime's result is undefined).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from hetero.core.ir.ops.common import require_dtype, require_spatial
from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import OpAttributeError, ShapeError

MODES = ("linear", "nearest", "cubic")
PADDING_MODES = ("zeros", "border", "reflection")
TAPS = {"nearest": 1, "linear": 2, "cubic": 4}
#: Keys' a, which GridSample fixes.
CUBIC_A = -0.75
#: Where a NaN, or a point further below an axis, is moved before it becomes an index:
#: far enough below 0 that no tap of any mode reaches the axis (a point more than 3
#: above it moves to ``n + 3``, as far above).
FAR = -4.0
#: How far beyond an axis reflection reflects (see :func:`reflect`).
REFLECT_REACH = 2.0 ** 22

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def coordinate_dtype(grid: np.dtype) -> np.dtype:
    """The precision the coordinates of a ``grid`` of this dtype are computed in."""
    return _F64 if grid == _F64 else _F32


def accumulator(dtype: np.dtype) -> np.dtype:
    """The precision the weighted taps of an ``X`` of this dtype are summed in."""
    return _F64 if dtype == _F64 else _F32


def bounds(n: int, align_corners: int) -> tuple[float, float]:
    """The lowest and highest coordinate inside an axis of ``n`` pixels."""
    return (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)


def denormalize(g: Any, n: int, align_corners: int) -> Any:
    """The pixel coordinate of normalised ``g`` along an axis of ``n`` (onnx's order)."""
    if align_corners:
        return (g + 1.0) / 2.0 * float(n - 1)
    return ((g + 1.0) * float(n) - 1.0) / 2.0


def reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``x`` (float64) mirrored at ``lo`` and ``hi`` until it lies between them.

    A point more than :data:`REFLECT_REACH` beyond the axis is first brought to that
    distance: there every step below is exact, so the result does not depend on how a
    backend rounds ``dx - k * span`` (fused or not); further out a float32 coordinate
    has no fraction left to reflect.
    """
    span = hi - lo
    if span == 0:
        return np.zeros_like(x) + lo
    x = np.clip(x, lo - REFLECT_REACH, hi + REFLECT_REACH)
    with np.errstate(invalid="ignore"):
        below = x < lo
        dx = np.where(below, lo - x, x - hi)
        k = np.floor(dx / span)
        r = dx - k * span
        even = k - 2.0 * np.floor(k / 2.0) == 0
        inside_low = lo + r
        inside_high = hi - r
        mirrored = np.where(below, np.where(even, inside_low, inside_high),
                            np.where(even, inside_high, inside_low))
        return np.where(below | (x > hi), mirrored, x)


def pad_coordinate(x: np.ndarray, n: int, attrs: dict[str, Any]) -> np.ndarray:
    """Coordinate ``x`` brought inside the axis as the padding mode says (zeros, and
    border for cubic: as is, only the taps are clamped)."""
    lo, hi = bounds(n, attrs["align_corners"])
    padding = attrs["padding_mode"]
    with np.errstate(invalid="ignore"):
        outside = (x < lo) | (x > hi)
    if padding == "border" and attrs["mode"] != "cubic":
        return np.where(outside, np.clip(x, 0, n - 1), x).astype(x.dtype)
    if padding == "reflection":
        return np.where(outside, reflect(x.astype(_F64), lo, hi).astype(x.dtype), x)
    return x


def pad_index(i: np.ndarray, n: int, attrs: dict[str, Any]) -> np.ndarray:
    """Tap indices (int64) as the padding mode maps them; -1 where a tap reads 0."""
    padding = attrs["padding_mode"]
    if padding == "zeros":
        return np.where((i >= 0) & (i < n), i, -1)
    if padding == "border":
        return np.clip(i, 0, n - 1)
    lo, hi = bounds(n, attrs["align_corners"])
    return np.clip(reflect(i.astype(_F64), lo, hi).astype(np.int64), 0, n - 1)


def cubic_weights(r: Any) -> list[Any]:
    """Keys' four weights at fraction ``r`` in [0, 1) (onnx's formula, term by term)."""
    a = CUBIC_A
    s = 1 - r
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]


def axis_taps(g: np.ndarray, n: int, attrs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """For normalised coordinates ``g`` along an axis of ``n``: the taps' indices
    ``g.shape + (taps,)`` (-1 for a tap that reads 0) and their weights (None for nearest)."""
    mode = attrs["mode"]
    x = denormalize(g, n, attrs["align_corners"])
    if mode == "nearest":
        x = np.rint(x)
    x = pad_coordinate(x, n, attrs)
    with np.errstate(invalid="ignore"):
        x = np.where(x > n + 3.0, x.dtype.type(n + 3.0), np.where(x >= FAR, x, x.dtype.type(FAR)))
    first = np.floor(x)
    base = first.astype(np.int64)
    if mode == "nearest":
        return pad_index(base, n, attrs)[..., None], None
    r = x - first
    if mode == "linear":
        weights, offsets = [1 - r, r], (0, 1)
    else:
        weights, offsets = cubic_weights(r), (-1, 0, 1, 2)
    index = np.stack([pad_index(base + k, n, attrs) for k in offsets], axis=-1)
    return index, np.stack(weights, axis=-1)


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    for key, allowed in (("mode", MODES), ("padding_mode", PADDING_MODES)):
        if attrs[key] not in allowed:
            raise OpAttributeError(f"GridSample {key} {attrs[key]!r} is not one of {list(allowed)}")
    return attrs


def _infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, grid = ins
    r = require_spatial(x, "GridSample")
    require_dtype(grid, FLOAT_DTYPES, "GridSample grid")
    if grid.rank != r + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != r:
        raise ShapeError(f"GridSample grid must be (N, O1, ..., O{r}, {r}) for X {x}, got {grid}")
    if attrs["mode"] != "nearest" and x.dtype.kind != "f":
        raise ShapeError(f"GridSample {attrs['mode']} interpolates floats, not {x.dtype}; "
                         "nearest moves any dtype")
    if x.size == 0 and grid.size > 0:
        raise ShapeError(f"GridSample cannot sample {x}: it has no elements")
    return [TensorType(x.shape[:2] + grid.shape[1:-1], x.dtype)]


def _reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, grid = ins
    r = x.ndim - 2
    out_shape = x.shape[:2] + grid.shape[1:-1]
    g = grid.astype(coordinate_dtype(grid.dtype))
    taps = [axis_taps(g[..., r - 1 - d], x.shape[2 + d], attrs) for d in range(r)]
    lead = (slice(None), None)  # index tables are (N, O...): the channel axis broadcasts
    n_index = np.arange(x.shape[0]).reshape((-1,) + (1,) * (r + 1))
    c_index = np.arange(x.shape[1]).reshape((1, -1) + (1,) * r)
    nearest = attrs["mode"] == "nearest"
    total = np.zeros(out_shape, x.dtype if nearest else np.float64)
    for combo in itertools.product(*(range(t[0].shape[-1]) for t in taps)):
        index = [t[0][lead + (Ellipsis, k)] for t, k in zip(taps, combo)]
        valid = np.logical_and.reduce([i >= 0 for i in index])
        values = x[(n_index, c_index) + tuple(np.maximum(i, 0) for i in index)]
        if nearest:
            total = np.where(valid, values, np.zeros((), x.dtype))
            continue
        weight = np.prod([t[1][lead + (Ellipsis, k)].astype(np.float64)
                          for t, k in zip(taps, combo)], axis=0)
        total = total + np.where(valid, weight * values.astype(np.float64), 0.0)
    return [np.ascontiguousarray(total.astype(x.dtype))]


def _flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    if attrs["mode"] == "nearest":
        return 0
    return 2 * TAPS[attrs["mode"]] ** (ins[0].rank - 2) * outs[0].size


register(OpDef(
    "GridSample", ("X", "grid"), ("Y",), _infer, _reference,
    attrs={
        "mode": Attr("str", "linear", "nearest, linear (n-linear) or cubic (n-cubic)"),
        "padding_mode": Attr("str", "zeros", "what a tap outside the input reads: zeros, "
                                             "border (the edge) or reflection"),
        "align_corners": Attr("int", 0, "1: -1 and 1 are the centres of the edge pixels; "
                                        "0: their outer edges"),
    },
    flops=_flops, complete=_complete,
    doc="sample X at the grid's normalised coordinates (ONNX GridSample; see the module doc)",
))
