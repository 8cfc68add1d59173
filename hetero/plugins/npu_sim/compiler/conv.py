"""Convolution and matrix product on the systolic array, as implicit GEMM.

A step covers a tile of output pixels (``toh`` rows × ``tow`` columns), a tile of
output channels and one chunk of input channels (at most the array's rows). The
load engine brings the input window of the tile into ``inp`` as an HWC block,
padded by the DMA with the input zero point (so padding contributes nothing once
the bias folds ``x_zero · Σw`` away), and the pre-packed weights of the tile into
``wgt``. Compute issues one GEMM per kernel tap, output row and column chunk of the
array: ``m`` = the tile's output columns, read in place from the window with row
stride ``stride · channels``, accumulating in ``acc``. After the last input-channel
chunk, REQUANT brings the tile to int8 in ``out`` and the store engine writes it.

Grouped and depthwise convolutions run group by group (a depthwise group is a GEMM
with k = n = 1 per tap and row: correct and simple, not fast). A QMatMul is a 1×1
convolution over a one-row image whose width is the matrix's rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetero.core.ir.graph import Node
from hetero.errors import PluginError
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder
from hetero.plugins.npu_sim.isa import Buf, Gemm, Requant


@dataclass(frozen=True)
class Span:
    """The input range one output range reads along an axis: ``count`` real elements from
    ``start``, with ``pad_lo``/``pad_hi`` padding around them (``extent`` in all)."""

    start: int
    count: int
    pad_lo: int
    pad_hi: int

    @property
    def extent(self) -> int:
        """Elements of the padded window."""
        return self.pad_lo + self.count + self.pad_hi


def window_span(o0: int, o1: int, stride: int, kernel: int, dilation: int, pad: int, size: int) -> Span:
    """The input span outputs [o0, o1) of a window op read along one axis of ``size``."""
    lo = o0 * stride - pad
    hi = (o1 - 1) * stride - pad + (kernel - 1) * dilation + 1
    start, end = max(lo, 0), min(hi, size)
    if end <= start:
        raise PluginError(f"an output tile reads only padding (input span [{lo}, {hi}) of {size}); "
                          f"npu_sim needs windows that touch the input")
    return Span(start, end - start, start - lo, hi - end)


def window_extent(tiles: int, stride: int, kernel: int, dilation: int) -> int:
    """Padded input elements ``tiles`` outputs read along one axis."""
    return (tiles - 1) * stride + (kernel - 1) * dilation + 1


def chunks(total: int, size: int) -> list[tuple[int, int]]:
    """``(start, length)`` pieces of ``range(total)`` of at most ``size``."""
    return [(i, min(size, total - i)) for i in range(0, total, size)]


@dataclass(frozen=True)
class ConvShape:
    """A 2-D (grouped) convolution, as the compiler sees it."""

    n: int
    channels: int
    height: int
    width: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pads: tuple[int, int, int, int]
    out_hw: tuple[int, int]
    group: int

    @property
    def cin(self) -> int:
        """Input channels per group."""
        return self.channels // self.group

    @property
    def cout(self) -> int:
        """Output channels per group."""
        return self.out_channels // self.group


def emit_qconv(b: ProgramBuilder, node: Node) -> None:
    """QConv (2-D, any group) on the array."""
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    a = node.attrs
    shape = ConvShape(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], tuple(a["kernel_shape"]),
                      tuple(a["strides"]), tuple(a["dilations"]), tuple(a["pads"]), node.output.shape[2:],
                      a["group"])
    weights = np.asarray(w.data, dtype=np.int64)
    b_data = np.zeros(shape.out_channels, np.int64) if bias is None else np.asarray(bias.data, np.int64)
    _emit(b, node, shape, b.loc(x), b.locs[node.output.name], weights, b_data)


def emit_qmatmul(b: ProgramBuilder, node: Node) -> None:
    """QMatMul A[..., K] @ B[K, N] as a 1×1 convolution over a 1 × M image."""
    a_val, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    k, n = w.shape
    rows = math.prod(a_val.shape[:-1])
    x_loc, y_loc = b.loc(a_val), b.locs[node.output.name]
    x_rows, y_rows = _merged_rows(x_loc, node), _merged_rows(y_loc, node)
    # Viewed as NCHW with N = H = 1: channels are K (or N), width the M rows.
    x_view = _View(x_loc.addr, (1, k, 1, rows), (0, x_loc.strides[-1], 0, x_rows))
    y_view = _View(y_loc.addr, (1, n, 1, rows), (0, y_loc.strides[-1], 0, y_rows))
    shape = ConvShape(1, k, 1, rows, n, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, rows), 1)
    weights = np.asarray(w.data, dtype=np.int64).T.reshape(n, k, 1, 1)
    b_data = np.zeros(n, np.int64) if bias is None else np.asarray(bias.data, np.int64)
    attrs = dict(node.attrs, x_zero=node.attrs["a_zero"])
    _emit(b, node, shape, x_view, y_view, weights, b_data, attrs)


@dataclass(frozen=True)
class _View:
    """A 4-D strided view of DRAM (a Loc's ``addr``/``shape``/``strides`` without its layout)."""

    addr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]


def _merged_rows(loc: Loc, node: Node) -> int:
    """The byte stride of the flattened leading axes of a matrix operand."""
    strides, shape = loc.strides, loc.shape
    for axis in range(len(shape) - 2):
        if shape[axis + 1] != 1 and strides[axis] != strides[axis + 1] * shape[axis + 1]:
            raise PluginError(f"npu_sim: {node.op} node {node.name!r} reads a tensor whose leading axes are not "
                              f"contiguous in DRAM; it cannot be viewed as a matrix")
    return strides[-2] if len(shape) > 1 else 0


@dataclass(frozen=True)
class _Tiling:
    toh: int
    tow: int
    oct: int
    ck: int


def _tiling(b: ProgramBuilder, node: Node, s: ConvShape) -> _Tiling:
    cfg = b.config
    ck = min(s.cin, cfg.array_rows)
    oh, ow = s.out_hw
    kh, kw = s.kernel
    inp, wgt, out, acc = (b.slot_size(n) for n in ("inp", "wgt", "out", "acc"))
    cols = cfg.array_cols
    oc_options = sorted({s.cout} | {m * cols for m in range(1, s.cout // cols + 1)}
                        | {max(1, cols >> i) for i in range(8) if cols >> i < s.cout}, reverse=True)
    failed = "wgt"
    for oct in oc_options:
        if kh * kw * ck * oct + 12 * oct > wgt:
            continue
        for tow in halvings(ow):
            for toh in halvings(oh):
                rows_in = window_extent(toh, s.stride[0], kh, s.dilation[0])
                cols_in = window_extent(tow, s.stride[1], kw, s.dilation[1])
                if rows_in * cols_in * ck > inp:
                    failed = "inp"
                elif toh * tow * oct > min(acc, out):
                    failed = "acc" if acc < out else "out"
                else:
                    return _Tiling(toh, tow, oct, ck)
    raise PluginError(
        f"npu_sim: {node.op} node {node.name!r} does not fit the {failed} buffer "
        f"({b.slot_size(failed)} elements per slot) even at the smallest tile; use a larger npu_preset "
        f"or npu_sram_kib, or let another backend take it"
    )


def halvings(total: int) -> list[int]:
    """``total``, then repeatedly halved (rounding up) down to 1: tile sizes to try, largest first."""
    sizes, size = [], total
    while True:
        sizes.append(size)
        if size == 1:
            return sizes
        size = -(-size // 2)


def _pack(weights: np.ndarray, oc0: int, oct: int, c0: int, ck: int, cols: int) -> np.ndarray:
    """The wgt image of one step: for each tap, for each array-column chunk, a contiguous k×n block."""
    blocks = []
    for ky in range(weights.shape[2]):
        for kx in range(weights.shape[3]):
            for j0, jn in chunks(oct, cols):
                blocks.append(weights[oc0 + j0:oc0 + j0 + jn, c0:c0 + ck, ky, kx].T.ravel())
    return np.concatenate(blocks).astype(np.int8)


def _emit(b: ProgramBuilder, node: Node, s: ConvShape, x: Loc | _View, y: Loc | _View, weights: np.ndarray,
          bias: np.ndarray, attrs: dict | None = None) -> None:
    a = node.attrs if attrs is None else attrs
    t = _tiling(b, node, s)
    cols = b.config.array_cols
    kh, kw = s.kernel
    sh, sw = s.stride
    dh, dw = s.dilation
    oh, ow = s.out_hw
    xs, ys = x.strides, y.strides
    mult = np.broadcast_to(np.asarray(a["multiplier"], np.int64), (s.out_channels,))
    shift = np.broadcast_to(np.asarray(a["shift"], np.int64), (s.out_channels,))
    folded = bias - a["x_zero"] * weights.reshape(s.out_channels, -1).sum(axis=1)
    if np.abs(folded).max(initial=0) >= 2**31:
        raise PluginError(f"npu_sim: {node.op} node {node.name!r}: its folded bias exceeds int32")
    params = np.stack([folded, mult, shift], axis=1).astype(np.int32)
    k_chunks = chunks(s.cin, t.ck)
    packed: dict[tuple[int, int, int], int] = {}
    for g in range(s.group):
        for o0, on in chunks(s.cout, t.oct):
            for c0, cn in k_chunks:
                oc = g * s.cout + o0
                packed[g, o0, c0] = b.constant(_pack(weights, oc, on, c0, cn, cols))
    for n in range(s.n):
        for g in range(s.group):
            for oy0, toh in chunks(oh, t.toh):
                rows = window_span(oy0, oy0 + toh, sh, kh, dh, s.pads[0], s.height)
                for ox0, tow in chunks(ow, t.tow):
                    span = window_span(ox0, ox0 + tow, sw, kw, dw, s.pads[1], s.width)
                    for o0, on in chunks(s.cout, t.oct):
                        oc = g * s.cout + o0
                        for c0, cn in k_chunks:
                            slot = b.begin_step()
                            inp_base = b.slot_base("inp", slot)
                            wgt_base = b.slot_base("wgt", slot)
                            ch = g * s.cin + c0
                            b.load(Buf.INP, inp_base,
                                   x.addr + n * xs[0] + rows.start * xs[2] + span.start * xs[3] + ch * xs[1],
                                   (rows.count, span.count, cn), (xs[2], xs[3], xs[1]),
                                   pad_lo=(0, rows.pad_lo, span.pad_lo, 0), pad_hi=(0, rows.pad_hi, span.pad_hi, 0),
                                   pad_value=a["x_zero"])
                            wsize = kh * kw * cn * on
                            b.load(Buf.WGT, wgt_base, packed[g, o0, c0], (wsize,), (1,))
                            last = c0 + cn == s.cin
                            if last:
                                param_off = b.load_params(slot, wsize, params[oc:oc + on])
                            b.start_compute()
                            _gemms(b, t, s, span.extent, inp_base, wgt_base, toh, tow, on, cn, first=c0 == 0)
                            if last:
                                out_slot = b.begin_output()
                                out_base = b.slot_base("out", out_slot)
                                b.emit(Requant(Buf.OUT, out_base, 0, toh * tow * on, on, param_off, a["y_zero"],
                                               a["y_min"], a["y_max"], tag=b.tag))
                            b.end_step()
                            if last:
                                b.store_output(out_base, y.addr + n * ys[0] + oy0 * ys[2] + ox0 * ys[3] + oc * ys[1],
                                               (toh, tow, on), (ys[2], ys[3], ys[1]))


def _gemms(b: ProgramBuilder, t: _Tiling, s: ConvShape, cols_in: int, inp_base: int, wgt_base: int, toh: int,
           tow: int, on: int, cn: int, *, first: bool) -> None:
    cols = b.config.array_cols
    kh, kw = s.kernel
    wgt_off = wgt_base
    for ky in range(kh):
        for kx in range(kw):
            for j0, jn in chunks(on, cols):
                for r in range(toh):
                    row = (r * s.stride[0] + ky * s.dilation[0]) * cols_in + kx * s.dilation[1]
                    b.emit(Gemm(r * tow * on + j0, inp_base + row * cn, wgt_off, tow, cn, jn, s.stride[1] * cn, on,
                                not (first and ky == 0 and kx == 0), tag=b.tag))
                wgt_off += cn * jn
