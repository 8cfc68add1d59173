"""Elementwise ops, requantisation and pooling on the vector unit.

Elementwise ops (QAdd, QMul, Requantize) walk the output in its DRAM order, in
boxes that fit a slot; each operand is loaded through its own strides, with stride
0 on broadcast axes, so broadcasting costs the DMA nothing. The arithmetic is the
shared integer spec done in int32 lanes:

- QAdd: widen both operands into ``acc``, subtract the zero points, scale by the
  multipliers, add, then REQUANT with multiplier 1 and the shared shift, which is
  exactly ``(v + 2^(s−1)) >> s``. The sum must fit int32, which the backend
  checks before it accepts the node.
- QMul: widen, subtract zero points, multiply, REQUANT with (M, s).
- Requantize: widen, REQUANT with bias −x_zero and per-channel (M, s); a
  per-channel axis is walked innermost so REQUANT's channel index is the axis.

Pooling loads an HWC window tile padded by the DMA (−128 for max pooling, the
zero point for average pooling, whose sum then carries −k·x_zero as REQUANT bias).
"""

from __future__ import annotations

import math

import numpy as np

from hetero.plugin import Node, PluginError
from hetero.plugins.npu_sim.compiler.builder import ProgramBuilder, box_tiles
from hetero.plugins.npu_sim.compiler.conv_plan import (
    chunks,
    halvings,
    window_extent,
    window_span,
)
from hetero.plugins.npu_sim.isa import (
    Buf,
    Copy,
    Pool,
    PoolKind,
    Requant,
    Vec,
    VecImm,
    VecOp,
)


def emit_elementwise(b: ProgramBuilder, node: Node) -> None:
    """QAdd, QMul or Requantize, tiled over the output."""
    y = b.locs[node.output.name]
    rank = len(y.shape)
    a = node.attrs
    operands = [v for v in node.inputs if v is not None]
    order = sorted(range(rank), key=lambda ax: -y.strides[ax])
    channels = 1
    if node.op == "Requantize" and max(len(a["multiplier"]), len(a["shift"])) > 1:
        axis = a["axis"]
        order = [ax for ax in order if ax != axis] + [axis]
        channels = y.shape[axis]
    dims = tuple(y.shape[ax] for ax in order)
    in_strides = [_broadcast_strides(b.loc(v).strides, b.loc(v).shape, y.shape, order) for v in operands]
    out_strides = tuple(y.strides[ax] for ax in order)
    capacity = min(b.slot_size("inp") // len(operands), b.slot_size("out"), b.slot_size("acc") // len(operands))
    if channels > capacity:
        raise PluginError(f"npu_sim: {node.op} node {node.name!r} has {channels} channels, more than a tile of "
                          f"{capacity} elements holds")
    params = _elementwise_params(node, channels)
    for start, size in box_tiles(dims or (1,), capacity):
        count = math.prod(size)
        slot = b.begin_step()
        inp_base = b.slot_base("inp", slot)
        for i, (v, strides) in enumerate(zip(operands, in_strides)):
            offset = sum(st * s for st, s in zip(start, strides))
            b.load(Buf.INP, inp_base + i * count, b.loc(v).addr + offset, size[-4:] if size else (1,),
                   strides or (1,))
        param_off = b.load_params(slot, 0, params)
        b.start_compute()
        for i in range(len(operands)):
            b.emit(Copy(Buf.ACC, i * count, Buf.INP, inp_base + i * count, count, tag=b.tag))
        _arithmetic(b, node, count)
        out_slot = b.begin_output()
        out_base = b.slot_base("out", out_slot)
        b.emit(Requant(Buf.OUT, out_base, 0, count, channels, param_off, a["y_zero"], a["y_min"], a["y_max"],
                       tag=b.tag))
        b.end_step()
        b.store_output(out_base, y.addr + sum(st * s for st, s in zip(start, out_strides)),
                       size or (1,), out_strides or (1,))


def _broadcast_strides(strides: tuple[int, ...], shape: tuple[int, ...], out: tuple[int, ...],
                       order: list[int]) -> tuple[int, ...]:
    lead = len(out) - len(shape)
    full = [0] * lead + [st if d != 1 else 0 for st, d in zip(strides, shape)]
    return tuple(full[ax] for ax in order)


def _elementwise_params(node: Node, channels: int) -> np.ndarray:
    a = node.attrs
    if node.op == "QAdd":
        triplets = [(0, 1, a["shift"])]
    elif node.op == "QMul":
        triplets = [(0, a["multiplier"], a["shift"])]
    else:
        mult = np.broadcast_to(np.asarray(a["multiplier"]), (channels,))
        shift = np.broadcast_to(np.asarray(a["shift"]), (channels,))
        triplets = [(-a["x_zero"], int(m), int(s)) for m, s in zip(mult, shift)]
    return np.asarray(triplets, dtype=np.int32)


def _arithmetic(b: ProgramBuilder, node: Node, count: int) -> None:
    a = node.attrs
    if node.op == "Requantize":
        return
    for i, zero in enumerate((a["a_zero"], a["b_zero"])):
        b.emit(VecImm(VecOp.ADD, Buf.ACC, i * count, Buf.ACC, i * count, -zero, count, tag=b.tag))
    if node.op == "QAdd":
        for i, mult in enumerate((a["a_multiplier"], a["b_multiplier"])):
            b.emit(VecImm(VecOp.MUL, Buf.ACC, i * count, Buf.ACC, i * count, mult, count, tag=b.tag))
        b.emit(Vec(VecOp.ADD, Buf.ACC, 0, Buf.ACC, 0, Buf.ACC, count, count, tag=b.tag))
    else:
        b.emit(Vec(VecOp.MUL, Buf.ACC, 0, Buf.ACC, 0, Buf.ACC, count, count, tag=b.tag))


def emit_pool(b: ProgramBuilder, node: Node) -> None:
    """MaxPool (int8) or QAveragePool over NCHW, tiled over output rows, columns and channels."""
    x, y = b.loc(node.inputs[0]), b.locs[node.output.name]
    a = node.attrs
    average = node.op == "QAveragePool"
    n_, c_, h, w = x.shape
    oh, ow = y.shape[2:]
    (kh, kw), (sh, sw), pads = tuple(a["kernel_shape"]), tuple(a["strides"]), tuple(a["pads"])
    toh, tow, tc = pool_tiling(b, node, (c_, oh, ow), (kh, kw), (sh, sw), average)
    xs, ys = x.strides, y.strides
    pad_value = a["x_zero"] if average else -128
    params = np.asarray([(-kh * kw * a["x_zero"], a["multiplier"], a["shift"])], np.int32) if average else None
    for n in range(n_):
        for oy0, th in chunks(oh, toh):
            rows = window_span(oy0, oy0 + th, sh, kh, 1, pads[0], h)
            for ox0, tw in chunks(ow, tow):
                span = window_span(ox0, ox0 + tw, sw, kw, 1, pads[1], w)
                for c0, cn in chunks(c_, tc):
                    slot = b.begin_step()
                    inp_base = b.slot_base("inp", slot)
                    b.load(Buf.INP, inp_base, x.addr + n * xs[0] + rows.start * xs[2] + span.start * xs[3] + c0 * xs[1],
                           (rows.count, span.count, cn), (xs[2], xs[3], xs[1]),
                           pad_lo=(0, rows.pad_lo, span.pad_lo, 0), pad_hi=(0, rows.pad_hi, span.pad_hi, 0),
                           pad_value=pad_value)
                    if average:
                        param_off = b.load_params(slot, 0, params)
                    b.start_compute()
                    out_slot = b.begin_output()
                    out_base = b.slot_base("out", out_slot)
                    geometry = {"h": rows.extent, "w": span.extent, "c": cn, "kh": kh, "kw": kw, "sh": sh, "sw": sw, "oh": th, "ow": tw}
                    if average:
                        b.emit(Pool(PoolKind.SUM, Buf.ACC, 0, Buf.INP, inp_base, **geometry, tag=b.tag))
                        b.emit(Requant(Buf.OUT, out_base, 0, th * tw * cn, 1, param_off, a["y_zero"], a["y_min"],
                                       a["y_max"], tag=b.tag))
                    else:
                        b.emit(Pool(PoolKind.MAX, Buf.OUT, out_base, Buf.INP, inp_base, **geometry, tag=b.tag))
                    b.end_step()
                    b.store_output(out_base, y.addr + n * ys[0] + oy0 * ys[2] + ox0 * ys[3] + c0 * ys[1],
                                   (th, tw, cn), (ys[2], ys[3], ys[1]))


def pool_tiling(b: ProgramBuilder, node: Node, out: tuple[int, int, int], kernel: tuple[int, int],
                stride: tuple[int, int], average: bool) -> tuple[int, int, int]:
    """The (rows, columns, channels) output tile :func:`emit_pool` steps by: the largest halvings
    of ``out`` (channels, rows, columns) whose window fits an ``inp`` slot and result an ``out`` one."""
    c_, oh, ow = out
    inp, res = b.slot_size("inp"), b.slot_size("out")
    if average:
        res = min(res, b.slot_size("acc"))
    for tc in halvings(c_):
        for tow in halvings(ow):
            for toh in halvings(oh):
                window = window_extent(toh, stride[0], kernel[0], 1) * window_extent(tow, stride[1], kernel[1], 1)
                if window * tc <= inp and toh * tow * tc <= res:
                    return toh, tow, tc
    raise PluginError(f"npu_sim: {node.op} node {node.name!r}: a single output pixel's window does not fit the inp "
                      f"buffer ({inp} bytes per slot); use a larger npu_preset or let another backend take it")

