"""Blocked-channel layout ops: NCHW[x]c tensors and the convolution that reads and writes them.

These are hetero-internal ops, like the int8 ops of :mod:`hetero.core.ir.ops.qint`: the
ONNX frontend never produces them; :mod:`hetero.core.passes.layout` puts them in where a
backend asks for a blocked layout. A blocked tensor keeps ``block`` consecutive channels
innermost: ``(N, C, D1, ..., Dk)`` becomes ``(N, C / block, D1, ..., Dk, block)``, so a
vector of ``block`` lanes holds one pixel's channels (oneDNN's ``nChw16c``, TVM's
``NCHW16c``). Why: a convolution that puts output channels on the vector lanes then
stores whole vectors, and reads its weights as whole vectors, where in NCHW each of its
tile stores is a transposed scatter.

``ChannelGatherBlocked`` moves channels between blocks and lanes: where a blocked tensor
keeps a grouped Conv's groups each on whole blocks (a group's channels padded to a block
boundary) or its channels in a shuffled order, and an op needs them elsewhere (a
residual Add, the conversion back), it is the one copy that rearranges them, where
going through NCHW would take three (back, the rearrangement, blocked again).

``ConvBlocked`` means ``Conv`` on the unblocked tensors: its reference unblocks its
operands, calls Conv's reference and blocks the result, so the one definition of a
convolution stays Conv's. Pooling and elementwise ops need no blocked twin: a pool
over the spatial axes of a blocked tensor is the same pool with one more spatial axis
(the block) of kernel 1, stride 1 and no padding, and an elementwise op does not care
where a channel lives.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, get_op, index_problem, no_flops, register
from hetero.core.ir.ops.common import require_float, same_dtype
from hetero.core.ir.types import TensorType
from hetero.errors import InputError, ShapeError


def to_blocked(x: np.ndarray, block: int) -> np.ndarray:
    """``x`` (N, C, D...) as (N, ceil(C / block), D..., block), the last block's channels
    past C zero."""
    x = np.pad(x, ((0, 0), (0, -x.shape[1] % block)) + ((0, 0),) * (x.ndim - 2))
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    split = x.reshape((n, c // block, block) + spatial)
    return np.ascontiguousarray(np.moveaxis(split, 2, -1))


def from_blocked(x: np.ndarray) -> np.ndarray:
    """``x`` (N, C / b, D..., b) as (N, C, D...)."""
    merged = np.moveaxis(x, -1, 2)
    return np.ascontiguousarray(merged.reshape((x.shape[0], x.shape[1] * x.shape[-1]) + x.shape[2:-1]))


def blocked_weight(w: np.ndarray, block_in: int, block_out: int) -> np.ndarray:
    """A Conv weight (O, I, K...) as ConvBlocked's (O / bo, I / bi, K..., bi, bo)."""
    o, i, kernel = w.shape[0], w.shape[1], w.shape[2:]
    split = w.reshape((o // block_out, block_out, i // block_in, block_in) + kernel)
    k = len(kernel)
    order = (0, 2) + tuple(range(4, 4 + k)) + (3, 1)
    return np.ascontiguousarray(split.transpose(order))


def unblocked_weight(w: np.ndarray) -> np.ndarray:
    """ConvBlocked's weight (O / bo, I / bi, K..., bi, bo) as Conv's (O, I, K...)."""
    k = w.ndim - 4
    order = (0, w.ndim - 1, 1, w.ndim - 2) + tuple(range(2, 2 + k))
    merged = w.transpose(order)
    return np.ascontiguousarray(merged.reshape((w.shape[0] * w.shape[-1], w.shape[1] * w.shape[-2])
                                               + w.shape[2:2 + k]))


# -- LayoutToBlocked, LayoutFromBlocked ----------------------------------------------------


def _to_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, block = ins[0], attrs["block"]
    if x.rank < 3:
        raise ShapeError(f"LayoutToBlocked input must be (N, C, D1, ...), got {x}")
    if block < 1:
        raise ShapeError(f"LayoutToBlocked: block must be at least 1, got {block}")
    return [TensorType((x.shape[0], -(-x.shape[1] // block)) + x.shape[2:] + (block,), x.dtype)]


def _from_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    if x.rank < 4:
        raise ShapeError(f"LayoutFromBlocked input must be (N, C / b, D1, ..., b), got {x}")
    held, channels = x.shape[1] * x.shape[-1], attrs["channels"] or x.shape[1] * x.shape[-1]
    if not held - x.shape[-1] < channels <= held:
        raise ShapeError(f"LayoutFromBlocked: {x} holds {held} channels in blocks of {x.shape[-1]}; "
                         f"channels={channels} must drop less than one block of padding")
    return [TensorType((x.shape[0], channels) + x.shape[2:-1], x.dtype)]


def _from_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    y = from_blocked(ins[0])
    return [np.ascontiguousarray(y[:, :attrs["channels"] or y.shape[1]])]


register(OpDef(
    "LayoutToBlocked", ("X",), ("Y",), _to_infer,
    lambda ins, attrs: [to_blocked(ins[0], attrs["block"])],
    attrs={"block": Attr("int", doc="channels per block, the innermost axis of Y")},
    flops=no_flops,
    doc="X (N, C, D...) in the blocked-channel layout Y (N, ceil(C/block), D..., block), the last "
        "block padded with zero channels",
))

register(OpDef(
    "LayoutFromBlocked", ("X",), ("Y",), _from_infer, _from_reference,
    attrs={"channels": Attr("int", 0, "channels of Y: the first ones, the rest the zero padding of "
                                      "the last block (0: all)")},
    flops=no_flops,
    doc="X (N, C/b, D..., b) in the blocked-channel layout back as Y (N, C, D...), less the last "
        "block's padding",
))


# -- ChannelGatherBlocked ------------------------------------------------------------------


def _gather_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, s = ins[0], ins[1]
    if x.rank < 4:
        raise ShapeError(f"ChannelGatherBlocked input X must be (N, C/b, D1, ..., b), got {x}")
    if s.rank != 2 or s.shape[1] != x.shape[-1] or s.dtype.kind != "i":
        raise ShapeError(f"ChannelGatherBlocked sources S must be integers (P/b, b) with X's block "
                         f"b = {x.shape[-1]}, got {s}")
    return [TensorType((x.shape[0], s.shape[0]) + x.shape[2:], x.dtype)]


def _gather_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, sources = ins[0], ins[1].reshape(-1)
    held = x.shape[1] * x.shape[-1]
    if sources.size and not (-1 <= sources.min() and sources.max() < held):
        raise ShapeError(f"ChannelGatherBlocked: sources must be -1 or a channel below {held}, "
                         f"got {sources.min()}..{sources.max()}")
    plain = from_blocked(x)
    picked = np.take(plain, np.maximum(sources, 0), axis=1)
    picked[:, sources < 0] = 0
    return [to_blocked(picked, x.shape[-1])]


register(OpDef(
    "ChannelGatherBlocked", ("X", "S"), ("Y",), _gather_infer, _gather_reference,
    flops=no_flops,
    doc="Blocked X (N, C/b, D..., b) with its channels rearranged: Y (N, P/b, D..., b) whose "
        "channel p (block p // b, lane p % b) is X's channel S[p // b, p % b], or zero where that "
        "is -1",
))


# -- ConvBlocked -------------------------------------------------------------------------


def _spatial(attrs: dict[str, Any], x: TensorType) -> dict[str, Any]:
    """Conv's attributes for the unblocked view of ``x`` (N, C/b, D..., b)."""
    k = x.rank - 3
    filled = dict(attrs)
    for key, fill in (("strides", (1,) * k), ("dilations", (1,) * k), ("pads", (0,) * (2 * k))):
        if filled[key] is None:
            filled[key] = fill
    return filled


def _conv_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    x, w = ins[0], ins[1]
    if x.rank < 4 or w.rank != x.rank + 1:
        raise ShapeError(f"ConvBlocked takes X (N, C/b, D..., b) and W (O/bo, I/bi, K..., bi, bo), "
                         f"got {x} and {w}")
    if attrs["kernel_shape"] is None:
        attrs["kernel_shape"] = w.shape[2:-2]
    return _spatial(attrs, x)


def conv_view(x: TensorType, w: TensorType, attrs: dict[str, Any],
              s: TensorType | None = None) -> tuple[TensorType, TensorType]:
    """The Conv input and weight types that ConvBlocked's X and W (and S) stand for."""
    channels = x.shape[1] * x.shape[-1] if s is None else s.shape[0]
    plain_x = TensorType((x.shape[0], channels) + x.shape[2:-1], x.dtype)
    plain_w = TensorType((w.shape[0] * w.shape[-1], w.shape[1] * w.shape[-2]) + w.shape[2:-2], w.dtype)
    return plain_x, plain_w


def _conv_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    s = ins[3] if len(ins) > 3 else None
    require_float(x, "ConvBlocked input X")
    same_dtype([x, w, b], "ConvBlocked's X, W and B")
    block_in, block_out, group = x.shape[-1], w.shape[-1], attrs["group"]
    plain_x, plain_w = conv_view(x, w, attrs, s)
    per_in, per_out = plain_w.shape[1], plain_w.shape[0] // max(group, 1)
    depthwise = per_in == 1 and per_out == 1 and w.shape[-2] == 1 and block_in == block_out
    if s is not None:
        if s.rank != 1 or s.dtype.kind != "i" or w.shape[-2] != 1 or depthwise:
            raise ShapeError(f"ConvBlocked: input channel sources S must be integers (C,) and W {w} must "
                             f"block its input channels by 1 (not a depthwise convolution), got S {s}")
    elif not depthwise and w.shape[-2] != block_in:
        raise ShapeError(f"ConvBlocked: W {w} blocks its input channels by {w.shape[-2]} but X {x} by "
                         f"{block_in}; they must match (or be a depthwise convolution's 1)")
    if group > 1 and not depthwise and per_out % block_out:
        raise ShapeError(f"ConvBlocked: {per_out} output channels per group are not a multiple of the "
                         f"block {block_out}; leave this grouped Conv in NCHW")
    if b is not None and b.shape != (w.shape[0], block_out):
        raise ShapeError(f"ConvBlocked bias B must have shape [{w.shape[0]}, {block_out}], got {b}")
    plain_b = None if b is None else TensorType((plain_w.shape[0],), b.dtype)
    y = get_op("Conv").infer([plain_x, plain_w, plain_b], attrs)[0]
    return [TensorType((y.shape[0], w.shape[0]) + y.shape[2:] + (block_out,), y.dtype)]


def _conv_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    s = ins[3] if len(ins) > 3 else None
    plain_x = from_blocked(x)
    if s is not None:
        problem = index_problem(s, 1, plain_x.shape[1], wraps=False)
        if problem is not None:
            raise InputError(f"ConvBlocked input channel sources S: {problem}")
        plain_x = np.ascontiguousarray(plain_x[:, s])
    plain = [plain_x, unblocked_weight(w)] + ([] if b is None else [b.reshape(-1)])
    y = get_op("Conv").reference(plain, attrs)[0]
    return [to_blocked(y, w.shape[-1])]


def _conv_index_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[int, int, int, bool]]:
    """S indexes X's channels (none negative): checked when the node is built where S is
    a constant, by the backend before the kernel runs where it is not."""
    x = ins[0]
    return [] if len(ins) < 4 or ins[3] is None else [(3, 1, x.shape[1] * x.shape[-1], False)]


def _conv_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    w, y = ins[1], outs[0]
    macs = y.size * w.shape[1] * w.shape[-2] * math.prod(w.shape[2:-2])
    has_bias = len(ins) > 2 and ins[2] is not None
    return 2 * macs + (y.size if has_bias else 0)


register(OpDef(
    "ConvBlocked", ("X", "W", "B?", "S?"), ("Y",), _conv_infer, _conv_reference,
    attrs={
        "kernel_shape": Attr("ints", None, "kernel spatial shape (derived: W.shape[2:-2])"),
        "strides": Attr("ints", None, "step per spatial axis (derived: ones)"),
        "pads": Attr("ints", None, "padding, all begins then all ends (derived: zeros)"),
        "dilations": Attr("ints", None, "spacing of kernel taps (derived: ones)"),
        "group": Attr("int", 1, "number of channel groups, as Conv's"),
    },
    flops=_conv_flops, complete=_conv_complete, index_bounds=_conv_index_bounds,
    doc="Conv in the blocked-channel layout: X (N, C/bi, D..., bi), W (O/bo, I/bi, K..., bi, bo) "
        "(a depthwise one (C/b, 1, K..., 1, b)), B (O/bo, bo) -> Y (N, O/bo, D'..., bo); bi = 1 "
        "reads an NCHW input as it is. With S (C,), W blocks its input channels by 1 and the "
        "convolution's input channel c is X's channel S[c] (block S[c] // bi, lane S[c] % bi): "
        "a grouped one reads each group's channels wherever in X they are",
))
