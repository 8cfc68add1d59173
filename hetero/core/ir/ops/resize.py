"""Resize: nearest, (multi-)linear and cubic interpolation of a tensor to a new shape.

The canonical op holds what ONNX computes from its inputs: the output ``sizes`` and
the ``scales`` that the coordinate transform divides by (the given scales, or
``sizes / input`` when ONNX was given sizes), for every axis, and the ``roi`` of
``tf_crop_and_resize``. The frontend resolves ONNX's ``axes`` and
``keep_aspect_ratio_policy``, so no backend re-derives them.

Interpolation is separable: along each resized axis, output index ``y`` maps to a
source coordinate ``x`` (:func:`source_coordinate`, in float64, exactly as onnx's
reference computes it), and ``x`` selects ``taps`` input indices (clamped to the axis,
as edge padding would) with one weight each (:func:`tap_weights`). The output is the
sum over every combination of taps of the product of their weights times the input
there; nearest takes the one chosen tap without arithmetic, so it moves values
exactly for every dtype. An axis whose size and scale are unchanged (and whose roi is
the whole axis) is not resized.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.types import TensorType
from hetero.errors import OpAttributeError, ShapeError

MODES = ("nearest", "linear", "cubic")
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_crop_and_resize")
#: ``simple`` is Resize-10's and Upsample's rule (onnxruntime's): ceil on an axis that
#: shrinks, floor on one that grows.
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
TAPS = {"nearest": 2, "linear": 2, "cubic": 4}


def antialias_start(mode: str, scale: float) -> int:
    """The offset of the first tap from the base index when antialias widens a
    shrinking axis's filter (onnx's ``start`` / ``i_start``); the window holds
    ``2 - 2 * start`` taps."""
    scale = min(scale, 1.0)
    return int(np.floor((-1 if mode == "linear" else -2) / scale) + 1)


def tap_count(attrs: dict[str, Any], scale: float) -> int:
    """How many taps one output element reads along an axis of this ``scale``."""
    if attrs["antialias"] and attrs["mode"] != "nearest":
        return 2 - 2 * antialias_start(attrs["mode"], scale)
    return TAPS[attrs["mode"]]


def resized_axes(shape: tuple[int, ...], attrs: dict[str, Any]) -> list[int]:
    """The axes the op changes (onnx's reference skips the others)."""
    rank, roi = len(shape), attrs["roi"]
    axes = []
    for a, n in enumerate(shape):
        same = (math.isclose(attrs["scales"][a], 1.0) and attrs["sizes"][a] == n
                and (attrs["coordinate_transformation_mode"] != "tf_crop_and_resize"
                     or (math.isclose(roi[a], 0.0) and math.isclose(roi[rank + a], 1.0))))
        if not same:
            axes.append(a)
    return axes


def source_coordinate(y: Any, n: int, out: int, scale: float, transform: str,
                      roi: tuple[float, float], roi_dtype: np.dtype = np.dtype(np.float64)) -> Any:
    """The source coordinate of output index ``y`` (a float64 array or tensor-IR
    expression) along an axis of ``n`` input and ``out`` output elements.

    The operations and their order are onnx's reference's, so the same float64
    rounding happens wherever this is evaluated; the roi's own terms round to
    ``roi_dtype`` first, as they do there (numpy keeps a float32 roi's arithmetic in
    float32).
    """
    width = scale * n  # onnx's "output_width": the unrounded size
    if transform == "align_corners":
        return y * 0.0 if width == 1 else y * float(n - 1) / (width - 1)
    if transform == "asymmetric":
        return y / scale
    if transform == "tf_crop_and_resize":
        lo, hi = (roi_dtype.type(v) for v in roi)
        if width == 1:
            x = y * 0.0 + float((hi - lo) * (n - 1) / 2)
        else:
            x = y * float(hi - lo) * float(n - 1) / (width - 1)
        return x + float(lo * (n - 1))
    if transform == "pytorch_half_pixel" and width == 1:
        return y * 0.0 - 0.5
    if transform == "half_pixel_symmetric":
        offset = n / 2 * (1 - out / width)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5


def cubic_weights(r: Any, a: float) -> list[Any]:
    """The four cubic-convolution weights at fraction ``r`` (onnx's formula, term by term)."""
    s = 1 - r
    return [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
            ((a + 2) * r - (a + 3)) * r * r + 1,
            ((a + 2) * s - (a + 3)) * s * s + 1,
            ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a]


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    rank = ins[0].rank
    for key, allowed in (("mode", MODES), ("coordinate_transformation_mode", TRANSFORMS),
                         ("nearest_mode", NEAREST_MODES)):
        if attrs[key] not in allowed:
            raise OpAttributeError(f"Resize {key} {attrs[key]!r} is not one of {list(allowed)}")
    if attrs["roi"] is None:
        attrs["roi"] = (0.0,) * rank + (1.0,) * rank
    for key, length in (("sizes", rank), ("scales", rank), ("roi", 2 * rank)):
        if len(attrs[key]) != length:
            raise OpAttributeError(f"Resize {key} {list(attrs[key])} must hold {length} entries "
                                   f"for {ins[0]}")
    if any(s <= 0 or not math.isfinite(s) for s in attrs["scales"]):
        raise OpAttributeError(f"Resize scales {list(attrs['scales'])} must be positive and finite")
    return attrs


def _infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, sizes = ins[0], attrs["sizes"]
    if any(d < 0 for d in sizes):
        raise ShapeError(f"Resize sizes {list(sizes)} has a negative entry")
    if x.size == 0 and math.prod(sizes) > 0:
        raise ShapeError(f"Resize cannot interpolate {x}: it has no elements")
    if attrs["mode"] != "nearest" and x.dtype.kind not in "fiu":
        raise ShapeError(f"Resize {attrs['mode']} interpolates numbers, not {x.dtype}")
    return [TensorType(sizes, x.dtype)]


def axis_taps(n: int, out: int, scale: float, attrs: dict[str, Any], roi: tuple[float, float]
              ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """For every output index of one axis: the clamped input indices of its taps
    ``(out, k)``, their weights (None for nearest, which keeps only ``[:, :1]``) and
    whether it lies outside the input (tf_crop_and_resize; else None)."""
    mode, transform = attrs["mode"], attrs["coordinate_transformation_mode"]
    y = np.arange(out, dtype=np.float64)
    x = source_coordinate(y, n, out, scale, transform, roi, attrs["roi_dtype"])
    outside = (x < 0) | (x > n - 1) if transform == "tf_crop_and_resize" else None
    taps = tap_count(attrs, scale)
    pad = (taps + 1) // 2
    floor = np.floor(x)
    ratio = np.where(x == floor, 1.0, x - floor)
    # The window onnx's reference takes: the taps nearest x, ties to the smaller index.
    padded = x + pad
    p = np.floor(padded)
    start = p + np.where(padded == p, -(taps // 2), -(taps // 2) + 1) - pad
    index = start[:, None] + np.arange(taps)[None, :]
    if mode == "nearest":
        after = _nearest_after(ratio, attrs["nearest_mode"], scale)
        chosen = np.where(after, index[:, 1], index[:, 0])
        return np.clip(chosen, 0, n - 1).astype(np.int64)[:, None], None, outside
    if attrs["antialias"]:
        weights = _antialias_weights(ratio, mode, scale, attrs["cubic_coeff_a"])
    elif mode == "linear":
        weights = np.stack([1 - ratio, ratio], axis=1)
    else:
        weights = np.stack(cubic_weights(ratio, attrs["cubic_coeff_a"]), axis=1)
    if attrs["exclude_outside"]:
        weights = np.where((index < 0) | (index >= n), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, n - 1).astype(np.int64), weights, outside


def _antialias_weights(ratio: np.ndarray, mode: str, scale: float, a: float) -> np.ndarray:
    """The widened filter's weights ``(out, taps)``, normalised (onnx's antialias coefficients)."""
    start = antialias_start(mode, scale)
    scale = min(scale, 1.0)
    offsets = np.arange(start, 2 - start, dtype=np.float64)
    if mode == "linear":
        weights = np.clip(1 - np.abs((offsets[None, :] - ratio[:, None]) * scale), 0, 1)
    else:
        d = np.abs(scale * (offsets[None, :] - ratio[:, None]))
        d2 = d * d
        d3 = d * d2
        weights = np.where(d <= 1, (a + 2) * d3 - (a + 3) * d2 + 1,
                           np.where(d < 2, a * d3 - 5 * a * d2 + 8 * a * d - 4 * a, 0.0))
    total = weights[:, 0].copy()
    for k in range(1, weights.shape[1]):
        total = total + weights[:, k]
    return weights / total[:, None]


def _nearest_after(ratio: np.ndarray, nearest_mode: str, scale: float) -> np.ndarray:
    """Whether nearest takes the second of its two taps (ratio is 1 at an integer x)."""
    integer = ratio == 1.0
    if nearest_mode == "simple":
        nearest_mode = "ceil" if scale < 1 else "floor"
    if nearest_mode == "round_prefer_floor":
        return ratio > 0.5
    if nearest_mode == "round_prefer_ceil":
        return ratio >= 0.5
    if nearest_mode == "floor":
        return integer
    return np.ones_like(integer)


def _reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    rank, roi = x.ndim, attrs["roi"]
    result = x if attrs["mode"] == "nearest" else x.astype(np.float64)
    outside_any = np.zeros(attrs["sizes"], bool)
    for a in resized_axes(x.shape, attrs):
        n, out = x.shape[a], attrs["sizes"][a]
        index, weights, outside = axis_taps(n, out, attrs["scales"][a], attrs, (roi[a], roi[rank + a]))
        gathered = np.take(result, index, axis=a)  # the taps become axis a + 1
        if weights is None:
            result = np.take(gathered, 0, axis=a + 1)
        else:
            shape = (1,) * a + weights.shape + (1,) * (rank - a - 1)
            result = (gathered * weights.reshape(shape)).sum(axis=a + 1)
        if outside is not None:
            outside_any |= outside.reshape((1,) * a + (out,) + (1,) * (rank - a - 1))
    if attrs["mode"] != "nearest":
        result = np.where(outside_any, attrs["extrapolation_value"], result)
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            result = np.clip(np.round(result), info.min, info.max)
        return [result.astype(x.dtype)]
    if outside_any.any():
        result = np.where(outside_any, np.array(attrs["extrapolation_value"]).astype(x.dtype), result)
    return [np.ascontiguousarray(result, dtype=x.dtype)]


def _flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    if attrs["mode"] == "nearest":
        return 0
    taps = math.prod(tap_count(attrs, attrs["scales"][a]) for a in resized_axes(ins[0].shape, attrs))
    return 2 * taps * outs[0].size


register(OpDef(
    "Resize", ("X",), ("Y",), _infer, _reference,
    attrs={
        "sizes": Attr("ints", doc="the output shape"),
        "scales": Attr("floats", doc="per axis, what the coordinate transform divides by: "
                                     "ONNX's scales, or output / input size when ONNX gave sizes"),
        "mode": Attr("str", "nearest", "nearest, linear (n-linear) or cubic"),
        "coordinate_transformation_mode": Attr("str", "half_pixel", "how an output index maps "
                                                                  "to an input coordinate (ONNX's)"),
        "nearest_mode": Attr("str", "round_prefer_floor", "nearest's rounding; simple is "
                                                          "Resize-10's (ceil shrinking, floor growing)"),
        "cubic_coeff_a": Attr("float", -0.75, "the cubic convolution's a"),
        "antialias": Attr("int", 0, "1: linear and cubic widen their filter by 1 / scale on a "
                                    "shrinking axis (more taps, normalised weights)"),
        "exclude_outside": Attr("int", 0, "1: taps outside the input weigh 0, the rest renormalised"),
        "extrapolation_value": Attr("float", 0.0, "tf_crop_and_resize's value outside the input"),
        "roi": Attr("floats", None, "tf_crop_and_resize's region: every start, then every end, "
                                    "normalised; derived: the whole input"),
        "roi_dtype": Attr("dtype", np.dtype(np.float64), "the precision of the roi's own "
                                                        "arithmetic: the ONNX roi's dtype"),
    },
    flops=_flops, complete=_complete,
    doc="interpolate the input to ``sizes`` (ONNX Resize and Upsample; see the module doc)",
))
