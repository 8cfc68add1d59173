"""DeformConv (ONNX opset 19, 2-D): a convolution whose taps are moved by learned offsets.

Each output position's tap ``(i, j)`` reads the input at ``(oh·sh - ph + i·dh + Δh,
ow·sw - pw + j·dw + Δw)``, the offsets ``Δ`` one pair per offset group, tap and output
position, bilinearly (a corner outside the image counts 0, as GridSample's zeros
padding with aligned corners, which onnx's reference uses), times the tap's mask (1
without one); then the sum over the group's input channels and taps with the weights.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import require_dtype, same_dtype
from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import OpAttributeError, ShapeError


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    w = ins[1]
    if attrs["kernel_shape"] is None and w is not None:
        attrs["kernel_shape"] = tuple(w.shape[2:])
    for key, fill in (("strides", (1, 1)), ("dilations", (1, 1)), ("pads", (0, 0, 0, 0))):
        if attrs[key] is None:
            attrs[key] = fill
    return attrs


def out_dims(x: TensorType, attrs: dict[str, Any]) -> tuple[int, int]:
    """The output's spatial dims (as Conv's)."""
    (kh, kw), (sh, sw), (dh, dw), pads = (attrs["kernel_shape"], attrs["strides"],
                                          attrs["dilations"], attrs["pads"])
    h = (x.shape[2] + pads[0] + pads[2] - (kh - 1) * dh - 1) // sh + 1
    w = (x.shape[3] + pads[1] + pads[3] - (kw - 1) * dw - 1) // sw + 1
    return h, w


def _infer(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[TensorType]:
    x, w, offset, b, mask = ins
    require_dtype(x, FLOAT_DTYPES, "DeformConv X")
    same_dtype([v for v in ins if v is not None], "DeformConv operands")
    if x.rank != 4 or w.rank != 4:
        raise ShapeError(f"DeformConv is 2-D here: X {x} and W {w} must have rank 4")
    group, offset_group = attrs["group"], attrs["offset_group"]
    if group < 1 or offset_group < 1:
        raise OpAttributeError(f"DeformConv group {group} and offset_group {offset_group} must be positive")
    n, c = x.shape[:2]
    oc = w.shape[0]
    kh, kw = attrs["kernel_shape"]
    if tuple(w.shape[2:]) != (kh, kw) or c != w.shape[1] * group or oc % group or c % offset_group:
        raise ShapeError(f"DeformConv W {w} does not fit X {x} with group {group}, offset_group "
                         f"{offset_group} and kernel {[kh, kw]}")
    oh, ow = out_dims(x, attrs)
    if oh < 1 or ow < 1:
        raise ShapeError(f"DeformConv's window does not fit X {x}")
    taps = offset_group * kh * kw
    if offset.shape != (n, 2 * taps, oh, ow):
        raise ShapeError(f"DeformConv offset {offset} must be [{n}, {2 * taps}, {oh}, {ow}]")
    if b is not None and b.shape != (oc,):
        raise ShapeError(f"DeformConv B {b} must be [{oc}]")
    if mask is not None and mask.shape != (n, taps, oh, ow):
        raise ShapeError(f"DeformConv mask {mask} must be [{n}, {taps}, {oh}, {ow}]")
    return [TensorType((n, oc, oh, ow), x.dtype)]


def sample_positions(attrs: dict[str, Any], offset: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every tap's sampling row and column in float64, ``[n, offset_group, kh, kw, oh, ow]``."""
    n, _, oh, ow = offset.shape
    kh, kw = attrs["kernel_shape"]
    (sh, sw), (dh, dw), pads = attrs["strides"], attrs["dilations"], attrs["pads"]
    off = offset.astype(np.float64).reshape(n, attrs["offset_group"], kh, kw, 2, oh, ow)
    rows = np.arange(kh)[:, None] * dh + np.arange(oh)[None, :] * sh - pads[0]  # [kh, oh]
    cols = np.arange(kw)[:, None] * dw + np.arange(ow)[None, :] * sw - pads[1]  # [kw, ow]
    return (rows[None, None, :, None, :, None] + off[:, :, :, :, 0],
            cols[None, None, None, :, None, :] + off[:, :, :, :, 1])


def _reference(ins: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w, offset, b, mask = ins
    n, c, height, width = x.shape
    oc, cg = w.shape[:2]
    kh, kw = attrs["kernel_shape"]
    group, offset_group = attrs["group"], attrs["offset_group"]
    oh, ow = offset.shape[2:]
    h, v = sample_positions(attrs, offset)  # [n, og, kh, kw, oh, ow]
    h0, v0 = np.floor(h), np.floor(v)
    xs = x.astype(np.float64)
    per_offset = c // offset_group
    taps = np.zeros((n, c, kh, kw, oh, ow))
    batch = np.arange(n)[:, None, None, None, None]
    for y in (h0, h0 + 1):
        for z in (v0, v0 + 1):
            weight = (1 - np.abs(h - y)) * (1 - np.abs(v - z))
            inside = (y >= 0) & (y < height) & (z >= 0) & (z < width)
            yi = np.clip(y, 0, height - 1).astype(np.int64)
            zi = np.clip(z, 0, width - 1).astype(np.int64)
            for ch in range(c):
                g = ch // per_offset
                read = xs[batch, ch, yi[:, g], zi[:, g]]
                taps[:, ch] += np.where(inside[:, g], weight[:, g] * read, 0.0)
    if mask is not None:
        m = mask.astype(np.float64).reshape(n, offset_group, kh, kw, oh, ow)
        taps *= np.repeat(m, per_offset, axis=1)
    out = np.zeros((n, oc, oh, ow))
    per_out = oc // group
    for g in range(group):
        out[:, g * per_out:(g + 1) * per_out] = np.einsum(
            "ncijhw,ocij->nohw", taps[:, g * cg:(g + 1) * cg], w[g * per_out:(g + 1) * per_out].astype(np.float64))
    if b is not None:
        out += b.astype(np.float64)[None, :, None, None]
    return [out.astype(x.dtype)]


register(OpDef(
    "DeformConv", ("X", "W", "offset", "B?", "mask?"), ("Y",), _infer, _reference,
    attrs={"kernel_shape": Attr("ints", None, "taps per spatial axis (derived: W's)"),
           "strides": Attr("ints", None, "step per spatial axis (derived: ones)"),
           "pads": Attr("ints", None, "padding, both begins then both ends (derived: zeros)"),
           "dilations": Attr("ints", None, "spacing of kernel taps (derived: ones)"),
           "group": Attr("int", 1, "groups of input and output channels"),
           "offset_group": Attr("int", 1, "groups of input channels sharing one set of offsets")},
    flops=lambda ins, outs, attrs: 2 * outs[0].size * ins[1].size // ins[1].shape[0] + 10 * outs[0].size,
    complete=_complete,
    doc="a 2-D convolution whose taps are moved by per-position offsets, sampled bilinearly and masked",
))
