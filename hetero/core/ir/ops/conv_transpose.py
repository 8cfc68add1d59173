"""ConvTranspose: the gradient of Conv with respect to its input, as a layer.

Canonical attributes are explicit: ``kernel_shape``, ``strides``, ``pads`` (every begin,
then every end; negative where the output reaches past the natural one), ``dilations``,
``output_padding`` and ``group``. The frontend turns ``output_shape`` and ``auto_pad``
into pads, so the output size on each spatial axis is always
``stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pad_begin - pad_end``.

Input position ``i`` and tap ``k`` land on output position
``i * stride + k * dilation - pad_begin``; the weight is ``(C_in, C_out / group, k...)``.
The reference scatters each tap's product into the output, accumulating in float64.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import require_float, require_spatial, same_dtype
from hetero.core.ir.types import TensorType
from hetero.errors import ShapeError

_ACC = np.float64


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    x, w = ins[0], ins[1]
    n = require_spatial(x, "ConvTranspose")
    if attrs["kernel_shape"] is None:
        attrs["kernel_shape"] = w.shape[2:]
    for key, fill in (("strides", (1,) * n), ("dilations", (1,) * n), ("pads", (0,) * (2 * n)),
                      ("output_padding", (0,) * n)):
        if attrs[key] is None:
            attrs[key] = fill
    return attrs


def output_dims(x: TensorType, attrs: dict[str, Any]) -> tuple[int, ...]:
    """The output's spatial dims; ShapeError when the attributes do not fit ``x``."""
    n = x.rank - 2
    for key, length, floor in (("kernel_shape", n, 1), ("strides", n, 1), ("dilations", n, 1),
                               ("output_padding", n, 0), ("pads", 2 * n, None)):
        value = attrs[key]
        if len(value) != length:
            raise ShapeError(f"ConvTranspose {key} {list(value)} must have {length} entries "
                             f"for input {x}")
        if floor is not None and any(v < floor for v in value):
            raise ShapeError(f"ConvTranspose {key} {list(value)} must all be >= {floor}")
    dims = []
    for i, size in enumerate(x.shape[2:]):
        s, d, k = attrs["strides"][i], attrs["dilations"][i], attrs["kernel_shape"][i]
        if attrs["output_padding"][i] >= max(s, d):
            raise ShapeError(f"ConvTranspose output_padding {list(attrs['output_padding'])} must "
                             "be smaller than the stride or the dilation on each axis")
        out = (s * (size - 1) + attrs["output_padding"][i] + d * (k - 1) + 1
               - attrs["pads"][i] - attrs["pads"][i + n])
        if out < 1:
            raise ShapeError(f"ConvTranspose of {x} has no output on spatial axis {i} "
                             f"(pads {list(attrs['pads'])})")
        dims.append(out)
    return tuple(dims)


def _infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    require_spatial(x, "ConvTranspose")
    require_float(x, "ConvTranspose input X")
    same_dtype([x, w, b], "ConvTranspose's X, W and B")
    group = attrs["group"]
    if w.rank != x.rank:
        raise ShapeError(f"ConvTranspose weight W {w} must have the rank of X {x}: "
                         "(C_in, C_out/group, k1, ...)")
    if group < 1 or x.shape[1] % group or w.shape[0] != x.shape[1]:
        raise ShapeError(f"ConvTranspose: W {w} must have X's {x.shape[1]} input channels first, "
                         f"divisible by group {group}")
    if tuple(attrs["kernel_shape"]) != w.shape[2:]:
        raise ShapeError(f"kernel_shape {list(attrs['kernel_shape'])} differs from W's "
                         f"{list(w.shape[2:])}")
    c_out = w.shape[1] * group
    if b is not None and b.shape != (c_out,):
        raise ShapeError(f"ConvTranspose bias B must have shape [{c_out}] (C_out), got {b}")
    return [TensorType((x.shape[0], c_out) + output_dims(x, attrs), x.dtype)]


def _reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    n, group = x.ndim - 2, attrs["group"]
    out = output_dims(TensorType.of(x), attrs)
    per_in, per_out = x.shape[1] // group, w.shape[1]
    y = np.zeros((x.shape[0], per_out * group) + out, _ACC)
    xs, ws = x.astype(_ACC), w.astype(_ACC)
    for tap in itertools.product(*(range(k) for k in w.shape[2:])):
        index, keep = [], []
        for i in range(n):
            p = (np.arange(x.shape[2 + i]) * attrs["strides"][i]
                 + tap[i] * attrs["dilations"][i] - attrs["pads"][i])
            inside = (p >= 0) & (p < out[i])
            index.append(p[inside])
            keep.append(np.flatnonzero(inside))
        if any(len(k) == 0 for k in keep):
            continue
        for g in range(group):
            xg = xs[:, g * per_in:(g + 1) * per_in][(slice(None), slice(None)) + np.ix_(*keep)]
            wg = ws[g * per_in:(g + 1) * per_in, :, *tap]
            contribution = np.einsum("nc...,co->no...", xg, wg)
            channels = range(g * per_out, (g + 1) * per_out)
            y[np.ix_(range(x.shape[0]), channels, *index)] += contribution
    if b is not None:
        y += b.astype(_ACC).reshape((-1,) + (1,) * n)
    return [y.astype(x.dtype)]


def _flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    x, w = ins[0], ins[1]
    return 2 * x.size * w.shape[1] * math.prod(w.shape[2:])


register(OpDef(
    "ConvTranspose", ("X", "W", "B?"), ("Y",), _infer, _reference,
    attrs={
        "kernel_shape": Attr("ints", None, "kernel spatial shape (derived: W.shape[2:])"),
        "strides": Attr("ints", None, "step per spatial axis (derived: ones)"),
        "pads": Attr("ints", None, "cropped from the output, all begins then all ends "
                                   "(derived: zeros); negative ones extend it"),
        "dilations": Attr("ints", None, "spacing of kernel taps (derived: ones)"),
        "output_padding": Attr("ints", None, "added to the end of each spatial axis "
                                             "(derived: zeros)"),
        "group": Attr("int", 1, "number of channel groups"),
    },
    flops=_flops, complete=_complete,
    doc="transposed convolution of X (N, C_in, D...) with W (C_in, C_out/group, k...), plus "
        "bias B (C_out); 1-D, 2-D and 3-D alike",
))
