"""The inverses of sliding windows: Col2Im folds columns of blocks back into an image.

Col2Im is PyTorch's ``fold``: its input ``(N, C * prod(block_shape), L)`` holds, for each
of the ``L`` block positions of a sliding window over the image (row-major over the
window's positions on each axis), the ``C`` blocks flattened; block position ``b`` and
tap ``k`` land on image position ``b * stride + k * dilation - pad_begin``, and taps that
land on one position add up (outside the image they are dropped). Canonical attributes
are explicit: ``image_shape`` and ``block_shape`` (ONNX inputs, constant), ``strides``,
``dilations``, ``pads`` (every begin, then every end).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import require_dtype
from hetero.core.ir.types import NUMERIC_DTYPES, TensorType
from hetero.errors import ShapeError


def _col2im_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    n = len(attrs["image_shape"])
    for key, fill in (("strides", (1,) * n), ("dilations", (1,) * n), ("pads", (0,) * (2 * n))):
        if attrs[key] is None:
            attrs[key] = fill
    return attrs


def blocks(attrs: dict[str, Any]) -> tuple[int, ...]:
    """How many block positions the window takes on each image axis."""
    n = len(attrs["image_shape"])
    return tuple(
        (size + attrs["pads"][i] + attrs["pads"][i + n]
         - attrs["dilations"][i] * (attrs["block_shape"][i] - 1) - 1) // attrs["strides"][i] + 1
        for i, size in enumerate(attrs["image_shape"]))


def _col2im_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_dtype(x, NUMERIC_DTYPES, "Col2Im input")
    if x.rank != 3:
        raise ShapeError(f"Col2Im input must be (N, C * prod(block_shape), L), got {x}")
    n = len(attrs["image_shape"])
    for key, length, floor in (("image_shape", n, 1), ("block_shape", n, 1), ("strides", n, 1),
                               ("dilations", n, 1), ("pads", 2 * n, 0)):
        value = attrs[key]
        if n == 0 or len(value) != length or any(v < floor for v in value):
            raise ShapeError(f"Col2Im {key} {list(value)} must have {length} entries, each "
                             f">= {floor} (image_shape {list(attrs['image_shape'])})")
    kernel = math.prod(attrs["block_shape"])
    if x.shape[1] % kernel:
        raise ShapeError(f"Col2Im input {x}: its axis 1 ({x.shape[1]}) must be a multiple of "
                         f"prod(block_shape {list(attrs['block_shape'])}) = {kernel}")
    count = blocks(attrs)
    if any(c < 1 for c in count) or x.shape[2] != math.prod(count):
        raise ShapeError(f"Col2Im input {x}: the window takes {list(count)} block positions "
                         f"on image_shape {list(attrs['image_shape'])} (block_shape "
                         f"{list(attrs['block_shape'])}, strides {list(attrs['strides'])}, "
                         f"dilations {list(attrs['dilations'])}, pads {list(attrs['pads'])}), "
                         f"so its axis 2 must be {math.prod(count)} (and every count >= 1)")
    return [TensorType((x.shape[0], x.shape[1] // kernel, *attrs["image_shape"]), x.dtype)]


def _col2im_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    image, block = attrs["image_shape"], attrs["block_shape"]
    n, count = len(image), blocks(attrs)
    acc = np.float64 if x.dtype.kind == "f" else x.dtype
    cols = x.astype(acc).reshape(x.shape[0], -1, *block, *count)
    out = np.zeros((x.shape[0], cols.shape[1], *image), acc)
    for tap in itertools.product(*(range(k) for k in block)):
        target, source = [], []
        for i in range(n):
            s, begin = attrs["strides"][i], tap[i] * attrs["dilations"][i] - attrs["pads"][i]
            lo = max(0, -(begin // s) if begin < 0 else 0)  # first block at or past 0
            hi = min(count[i], (image[i] - 1 - begin) // s + 1) if image[i] - 1 - begin >= 0 else 0
            lo = min(lo, hi)
            target.append(slice(lo * s + begin, (hi - 1) * s + begin + 1 if hi > lo else 0, s))
            source.append(slice(lo, hi))
        if all(t.stop > t.start for t in target):
            out[(slice(None), slice(None), *target)] += cols[(slice(None), slice(None), *tap,
                                                              *source)]
    return [out.astype(x.dtype)]


register(OpDef(
    "Col2Im", ("input",), ("output",), _col2im_infer, _col2im_reference,
    attrs={
        "image_shape": Attr("ints", doc="the spatial shape of the image (ONNX's input)"),
        "block_shape": Attr("ints", doc="the window's shape (ONNX's input)"),
        "strides": Attr("ints", None, "the window's step on each axis; derived: ones"),
        "dilations": Attr("ints", None, "the spacing of the window's taps; derived: ones"),
        "pads": Attr("ints", None, "every begin pad, then every end pad; derived: zeros"),
    },
    # One addition per input element.
    flops=lambda ins, outs, attrs: ins[0].size,
    complete=_col2im_complete,
    doc="fold (N, C * prod(block_shape), L) columns of blocks into (N, C, *image_shape), "
        "adding where blocks overlap (PyTorch's fold)",
))
