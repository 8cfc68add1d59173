"""Sampling at computed coordinates: GridSample and RoiAlign; AffineGrid, the grid of
an affine map.

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

The coordinates are computed in float32 (float64 where the grid or X is float64), with
the operations of onnx's reference and onnxruntime in their order; reflection in
float64, as onnx's reference does; the weights from the coordinate's fraction in X's
precision (float32, float64 for float64), as onnx's reference computes them in X's dtype.
A grid coordinate that is NaN reads as one far below the axis (-4 pixels): zeros
padding gives 0 there, border the edge, reflection its mirror image (onnx's
reference fails on it; onnxruntime's result is undefined).

RoiAlign pools each region of interest ``rois[r]`` (x1, y1, x2, y2, scaled by
``spatial_scale``) of image ``batch_indices[r]`` into ``output_height`` by
``output_width`` bins. Each bin averages (``avg``) or takes the largest of
(``max``) ``sampling_ratio`` by ``sampling_ratio`` bilinear samples, or, when
``sampling_ratio`` is 0, ``ceil(bin size)`` of them along each axis: how many then
depends on the rois, which arrive at run time (:func:`roi_samples`). A sample more
than one pixel outside the image weighs 0 against pixel (0, 0), and in ``max`` mode
the value of a sample is the largest of its four weighted corners, both as onnx's
reference and onnxruntime compute them; all of it in float32 (float64 for float64
inputs), with their operations in their order.

AffineGrid maps the normalised coordinates of every pixel centre of an output of
``size`` (N, C, D1, ..., Dr), r of 2 or 3 (:func:`base_coordinates`: -1 and 1 the
outer edges, or with ``align_corners`` the centres of the edge pixels), through each
``theta[n]`` (r, r + 1); the result is a grid for GridSample, in float64 and then
rounded to theta's dtype.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from hetero.core.ir.ops.common import require_dtype, require_spatial
from hetero.core.ir.opdef import Attr, OpDef, index_problem, register
from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import InputError, OpAttributeError, ShapeError

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


def coordinate_dtype(grid: np.dtype, x: np.dtype) -> np.dtype:
    """The precision the coordinates of a ``grid`` of this dtype into an ``x`` of that one
    are computed in: float64 if either is, else float32."""
    return _F64 if _F64 in (grid, x) else _F32


def accumulator(dtype: np.dtype) -> np.dtype:
    """The precision the weighted taps of an ``X`` of this dtype are summed in."""
    return _F64 if dtype == _F64 else _F32


def bounds(n: int, align_corners: int) -> tuple[float, float]:
    """The lowest and highest coordinate inside an axis of ``n`` pixels."""
    return (0.0, n - 1.0) if align_corners else (-0.5, n - 0.5)


def denormalize(g: Any, n: int, align_corners: int, fence: Any = None) -> Any:
    """The pixel coordinate of normalised ``g`` along an axis of ``n`` (onnx's order).

    ``fence`` (the lowering's) keeps the product rounded before the subtraction, as the
    reference rounds it: a fused multiply-add moves exact half-pixel ties."""
    if align_corners:
        return (g + 1.0) / 2.0 * float(n - 1)
    product = (g + 1.0) * float(n)
    return ((product if fence is None else fence(product)) - 1.0) / 2.0


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


def axis_taps(g: np.ndarray, n: int, attrs: dict[str, Any], acc: np.dtype
              ) -> tuple[np.ndarray, np.ndarray | None]:
    """For normalised coordinates ``g`` along an axis of ``n``: the taps' indices
    ``g.shape + (taps,)`` (-1 for a tap that reads 0) and their weights (None for
    nearest), computed in ``acc``, X's precision, from the coordinate's fraction."""
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
    r = (x - first).astype(acc)
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
    if attrs["mode"] != "nearest" and x.dtype not in FLOAT_DTYPES:
        raise ShapeError(f"GridSample {attrs['mode']} interpolates floats, not {x.dtype}; "
                         "nearest moves any dtype")
    if x.size == 0 and grid.size > 0:
        raise ShapeError(f"GridSample cannot sample {x}: it has no elements")
    return [TensorType(x.shape[:2] + grid.shape[1:-1], x.dtype)]


def _reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, grid = ins
    r = x.ndim - 2
    out_shape = x.shape[:2] + grid.shape[1:-1]
    g = grid.astype(coordinate_dtype(grid.dtype, x.dtype))
    acc = accumulator(x.dtype)
    taps = [axis_taps(g[..., r - 1 - d], x.shape[2 + d], attrs, acc) for d in range(r)]
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


# -- RoiAlign ---------------------------------------------------------------------------
ROI_MODES = ("avg", "max")
#: The most samples per bin along an axis (a roi of a billion pixels is not an image's).
MAX_SAMPLES = 2 ** 30


def roi_geometry(roi: np.ndarray, attrs: dict[str, Any], cdt: np.dtype
                 ) -> tuple[tuple[Any, Any], tuple[Any, Any], tuple[int, int]]:
    """One roi's ``(start_h, start_w)``, bin sizes ``(bin_h, bin_w)`` (in ``cdt``) and
    samples per bin ``(grid_h, grid_w)`` (0 or negative: none), as onnxruntime computes them."""
    f = cdt.type
    scale, offset = f(attrs["spatial_scale"]), f(0.5 if attrs["half_pixel"] else 0.0)
    x1, y1, x2, y2 = (f(v) for v in roi)
    start_w, start_h = x1 * scale - offset, y1 * scale - offset
    width, height = x2 * scale - offset - start_w, y2 * scale - offset - start_h
    if not attrs["half_pixel"]:
        width, height = max(width, f(1.0)), max(height, f(1.0))
    bin_h, bin_w = height / f(attrs["output_height"]), width / f(attrs["output_width"])
    ratio = attrs["sampling_ratio"]
    grids = tuple(ratio if ratio > 0 else _ceil_count(b) for b in (bin_h, bin_w))
    return (start_h, start_w), (bin_h, bin_w), grids  # type: ignore[return-value]


def _ceil_count(bin_size: Any) -> int:
    """``ceil(bin_size)`` as a count, at most :data:`MAX_SAMPLES`; a NaN bin (a NaN roi)
    has no samples."""
    value = float(bin_size)
    return int(np.clip(np.ceil(value), -MAX_SAMPLES, MAX_SAMPLES)) if not math.isnan(value) else 0


def roi_samples(start: Any, bin_size: Any, grid: int, pooled: int, size: int, cdt: np.dtype
                ) -> tuple[np.ndarray, ...]:
    """Along one axis of ``size`` pixels, for each of ``pooled`` bins and ``grid``
    samples: whether the sample lies inside (within one pixel of) the image, its lower
    and upper pixel and their weights (``(pooled, grid)`` each; 0 outside)."""
    f = cdt.type
    p = np.arange(pooled, dtype=cdt)[:, None]
    i = np.arange(max(grid, 0), dtype=cdt)[None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        y = start + p * bin_size + (i + f(0.5)) * bin_size / f(max(grid, 1))
        inside = (y >= -1) & (y <= size)  # NaN is outside
    y = np.where(inside, np.maximum(y, f(0.0)), f(0.0))
    low = y.astype(np.int64)
    top = low >= size - 1
    low = np.where(top, size - 1, low)
    high = np.where(top, size - 1, low + 1)
    y = np.where(top, low.astype(cdt), y)
    frac = y - low.astype(cdt)
    zero = np.zeros((), cdt)
    return (inside, np.where(inside, low, 0), np.where(inside, high, 0),
            np.where(inside, f(1.0) - frac, zero), np.where(inside, frac, zero))


def _roi_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    if attrs["mode"] not in ROI_MODES:
        raise OpAttributeError(f"RoiAlign mode {attrs['mode']!r} is not one of {list(ROI_MODES)}")
    for key in ("output_height", "output_width"):
        if attrs[key] < 1:
            raise OpAttributeError(f"RoiAlign {key} must be positive, got {attrs[key]}")
    if attrs["sampling_ratio"] < 0:
        raise OpAttributeError(f"RoiAlign sampling_ratio must be 0 (adaptive) or positive, "
                               f"got {attrs['sampling_ratio']}")
    return attrs


def _roi_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, rois, batch = ins
    require_dtype(x, FLOAT_DTYPES, "RoiAlign X")
    if x.rank != 4:
        raise ShapeError(f"RoiAlign X must be (N, C, H, W), got {x}")
    if rois.rank != 2 or rois.shape[1] != 4 or rois.dtype != x.dtype:
        raise ShapeError(f"RoiAlign rois must be (num_rois, 4) of X's dtype {x.dtype}, got {rois}")
    if batch.shape != rois.shape[:1] or batch.dtype.kind not in "iu":
        raise ShapeError(f"RoiAlign batch_indices must be ({rois.shape[0]},) integers, got {batch}")
    if x.size == 0 and rois.shape[0] > 0:
        raise ShapeError(f"RoiAlign cannot pool {x}: it has no elements")
    return [TensorType((rois.shape[0], x.shape[1], attrs["output_height"], attrs["output_width"]),
                       x.dtype)]


def _roi_index_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(2, 0, ins[0].shape[0], False)]


def _roi_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, rois, batch = ins
    problem = index_problem(batch, 0, x.shape[0], wraps=False)
    if problem is not None:
        raise InputError(f"RoiAlign batch_indices: {problem}")
    cdt = accumulator(x.dtype)
    _, c, h, w = x.shape
    oh, ow = attrs["output_height"], attrs["output_width"]
    out = np.zeros((rois.shape[0], c, oh, ow), np.float64)
    for r in range(rois.shape[0]):
        (sh, sw), (bh, bw), (gh, gw) = roi_geometry(rois[r], attrs, cdt)
        ys = roi_samples(sh, bh, gh, oh, h, cdt)
        xs = roi_samples(sw, bw, gw, ow, w, cdt)
        if gh <= 0 or gw <= 0:
            continue  # no samples: 0, in either mode
        data = x[int(batch[r])].reshape(c, h * w).astype(cdt)
        inside = ys[0][:, :, None, None] & xs[0][None, None]
        terms = []
        for ya, yw in ((1, 3), (2, 4)):
            for xa, xw in ((1, 3), (2, 4)):
                weight = np.where(inside, ys[yw][:, :, None, None] * xs[xw][None, None], 0)
                pos = np.where(inside, ys[ya][:, :, None, None] * w + xs[xa][None, None], 0)
                terms.append(weight.astype(cdt)[None] * data[:, pos])  # (C, oh, gh, ow, gw)
        if attrs["mode"] == "avg":
            total = sum(t.astype(np.float64) for t in terms).sum(axis=(2, 4))
            out[r] = total / max(gh * gw, 1)
        else:
            value = np.maximum(np.maximum(np.maximum(terms[0], terms[1]), terms[2]), terms[3])
            out[r] = value.max(axis=(2, 4))
    return [out.astype(x.dtype)]


def _roi_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    ratio = attrs["sampling_ratio"] or 2  # adaptive: a typical count, the real one comes at run time
    return 8 * ratio * ratio * outs[0].size


register(OpDef(
    "RoiAlign", ("X", "rois", "batch_indices"), ("Y",), _roi_infer, _roi_reference,
    attrs={
        "mode": Attr("str", "avg", "avg or max of the samples of each bin"),
        "output_height": Attr("int", 1, "bins along y"),
        "output_width": Attr("int", 1, "bins along x"),
        "sampling_ratio": Attr("int", 0, "samples per bin along each axis; 0: ceil(bin size), "
                                         "per roi at run time"),
        "spatial_scale": Attr("float", 1.0, "what the roi coordinates are multiplied by"),
        "half_pixel": Attr("int", 1, "1: shift the rois by half a pixel (ONNX's half_pixel); "
                                     "0: not, and make each at least 1 by 1 (output_half_pixel)"),
    },
    flops=_roi_flops, complete=_roi_complete, index_bounds=_roi_index_bounds,
    doc="pool regions of interest into bins of bilinear samples (ONNX RoiAlign; see the "
        "module doc)",
))


# -- AffineGrid -------------------------------------------------------------------------
def base_coordinates(n: int, align_corners: int) -> np.ndarray:
    """The normalised coordinates of an axis of ``n`` pixels (onnx's reference's ``arange``)."""
    if align_corners:
        return np.array([-1.0]) if n == 1 else -1.0 + np.arange(n) * (2.0 / (n - 1))
    step = 2.0 / n
    return -1.0 + step / 2 + np.arange(n) * step


def _affine_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    theta, size = ins[0], attrs["size"]
    require_dtype(theta, FLOAT_DTYPES, "AffineGrid theta")
    r = len(size) - 2
    if r not in (2, 3) or any(d < 0 for d in size):
        raise ShapeError(f"AffineGrid size {list(size)} must be (N, C, H, W) or (N, C, D, H, W)")
    if theta.shape != (size[0], r, r + 1):
        raise ShapeError(f"AffineGrid theta must be ({size[0]}, {r}, {r + 1}) for size "
                         f"{list(size)}, got {theta}")
    return [TensorType((size[0],) + tuple(size[2:]) + (r,), theta.dtype)]


def _affine_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    theta, size = ins[0], attrs["size"]
    spatial = tuple(size[2:])
    r = len(spatial)
    axes = np.meshgrid(*(base_coordinates(n, attrs["align_corners"]) for n in spatial),
                       indexing="ij")
    # Homogeneous points (x, y[, z], 1): the innermost axis first, as GridSample reads them.
    points = np.stack([*axes[::-1], np.ones(spatial)], axis=-1)
    grid = np.einsum("...j,nkj->n...k", points, theta.astype(np.float64))
    return [np.ascontiguousarray(grid.astype(theta.dtype))]


def _affine_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    return 2 * (len(attrs["size"]) - 1) * outs[0].size


register(OpDef(
    "AffineGrid", ("theta",), ("grid",), _affine_infer, _affine_reference,
    attrs={
        "size": Attr("ints", doc="the output image's shape (N, C, H, W) or (N, C, D, H, W)"),
        "align_corners": Attr("int", 0, "1: -1 and 1 are the centres of the edge pixels; "
                                        "0: their outer edges"),
    },
    flops=_affine_flops,
    doc="the sampling grid of affine maps theta (ONNX AffineGrid; see the module doc)",
))
