"""The inverses of sliding windows: Col2Im folds columns of blocks back into an image;
MaxUnpool puts MaxPool's maxima back where its Indices say.

Col2Im is PyTorch's ``fold``: its input ``(N, C * prod(block_shape), L)`` holds, for each
of the ``L`` block positions of a sliding window over the image (row-major over the
window's positions on each axis), the ``C`` blocks flattened; block position ``b`` and
tap ``k`` land on image position ``b * stride + k * dilation - pad_begin``, and taps that
land on one position add up (outside the image they are dropped). Canonical attributes
are explicit: ``image_shape`` and ``block_shape`` (ONNX inputs, constant), ``strides``,
``dilations``, ``pads`` (every begin, then every end).

MaxUnpool follows the spec and onnxruntime: each index is a flat position in the
output (N and C included in the flattening, as MaxPool's Indices count them), whose
shape is ``output_shape`` when given (the pads are then ignored) and otherwise the
inferred ``(in - 1) * stride + kernel - pad_begin - pad_end`` on each spatial axis.
Where two indices coincide the later element wins. (onnx's reference, and the expected
output of its node test with an ``output_shape``, read the index in the inferred shape
and place that tensor at the output's origin instead: that contradicts the spec's
range for the indices, and fails on MaxPool's indices of an odd-sized input, the case
``output_shape`` exists for: onnx/onnx#2398, onnxruntime's fix #2193.)
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, index_problem, no_flops, register
from hetero.core.ir.ops.common import require_dtype, require_float, require_spatial
from hetero.core.ir.types import NUMERIC_DTYPES, TensorType
from hetero.errors import InputError, ShapeError


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


# -- MaxUnpool ---------------------------------------------------------------------------
def _unpool_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    n = require_spatial(ins[0], "MaxUnpool")
    for key, fill in (("strides", (1,) * n), ("pads", (0,) * (2 * n))):
        if attrs[key] is None:
            attrs[key] = fill
    if attrs["output_shape"] is None:
        attrs["output_shape"] = unpooled_shape(ins[0], attrs)
    return attrs


def unpooled_shape(x: TensorType, attrs: dict[str, Any]) -> tuple[int, ...]:
    """The output shape inferred from X and the pooling attributes."""
    n, dims = x.rank - 2, list(x.shape[:2])
    for key, length, floor in (("kernel_shape", n, 1), ("strides", n, 1), ("pads", 2 * n, 0)):
        value = attrs[key]
        if len(value) != length or any(v < floor for v in value):
            raise ShapeError(f"MaxUnpool {key} {list(value)} must have {length} entries, each "
                             f">= {floor}, for X {x}")
    for i, size in enumerate(x.shape[2:]):
        dims.append((size - 1) * attrs["strides"][i] + attrs["kernel_shape"][i]
                    - attrs["pads"][i] - attrs["pads"][i + n])
    if any(d < 1 for d in dims[2:]):
        raise ShapeError(f"MaxUnpool of X {x} with kernel_shape {list(attrs['kernel_shape'])}, "
                         f"strides {list(attrs['strides'])} and pads {list(attrs['pads'])} "
                         f"leaves an empty output {dims}")
    return tuple(dims)


def _unpool_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, i = ins
    require_float(x, "MaxUnpool input X")
    require_dtype(i, (np.dtype(np.int64),), "MaxUnpool input I")
    if i.shape != x.shape:
        raise ShapeError(f"MaxUnpool indices I {i} must have X's shape {list(x.shape)}")
    out = tuple(attrs["output_shape"])
    if len(out) != x.rank or any(d < 1 for d in out):
        raise ShapeError(f"MaxUnpool output_shape {list(out)} must have X's rank {x.rank} and "
                         "no empty axis")
    return [TensorType(out, x.dtype)]


def _unpool_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[Any, ...]]:
    # A flat index into the whole output; a negative one is an error.
    return [(1, 0, math.prod(attrs["output_shape"]), False)]


def _unpool_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, indices = ins
    out = tuple(attrs["output_shape"])
    problem = index_problem(indices, 0, math.prod(out), wraps=False)
    if problem:
        raise InputError(f"MaxUnpool indices I: {problem} (flat positions in the output "
                         f"{list(out)})")
    flat, values = indices.ravel(), x.ravel()
    # The later element wins where indices repeat: keep each index's last occurrence.
    _, from_end = np.unique(flat[::-1], return_index=True)
    last = flat.size - 1 - from_end
    y = np.zeros(math.prod(out), x.dtype)
    y[flat[last]] = values[last]
    return [y.reshape(out)]


register(OpDef(
    "MaxUnpool", ("X", "I"), ("output",), _unpool_infer, _unpool_reference,
    attrs={
        "kernel_shape": Attr("ints", doc="the pooling window's shape"),
        "strides": Attr("ints", None, "the pooling window's step; derived: ones"),
        "pads": Attr("ints", None, "the pooling's pads, every begin then every end; derived: "
                                   "zeros"),
        "output_shape": Attr("ints", None, "the full output shape (ONNX's input); derived: "
                                           "inferred from X, the kernel, strides and pads"),
    },
    flops=no_flops, complete=_unpool_complete, index_bounds=_unpool_bounds,
    doc="zeros of output_shape with X[e] written at flat position I[e] (the later element "
        "winning a repeated index)",
))
