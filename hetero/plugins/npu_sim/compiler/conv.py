"""Convolution and matrix product on the systolic array, as implicit GEMM: the emission.

A step covers a tile of output pixels (``toh`` rows × ``tow`` columns), a tile of
output channels and one chunk of input channels (at most the array's rows). The
load engine brings the input window of the tile into ``inp`` as an HWC block,
padded by the DMA with the input zero point (so padding contributes nothing once
the bias folds ``x_zero · Σw`` away), and the pre-packed weights of the tile into
``wgt``. Compute issues, per kernel tap and column chunk of the array, one GEMM
that covers every output row of the tile (see
:func:`~hetero.plugins.npu_sim.compiler.conv_plan.row_pitch`: the rows between
them are the window's padding columns, computed and never requantised), or one
GEMM per output row where that is cheaper; ``acc`` accumulates over taps and
input-channel chunks. After the last chunk, REQUANT brings the valid pixels to
int8 in ``out`` and the store engine writes them.

The tiling, the choice between the two GEMM shapes and the rewrites that come
first (a DMA-subsampled strided 1×1 convolution, kernel-row tap packing, whose
copy :func:`_tap_packed` emits) are decided by
:mod:`~hetero.plugins.npu_sim.compiler.conv_plan`; this module emits the plan's
instructions.

Grouped and depthwise convolutions run group by group (a depthwise group is a GEMM
with k = n = 1 per tap: correct and simple, not fast). A QMatMul is a 1×1
convolution over a one-row image whose width is the matrix's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero.plugin import Node, PluginError
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder
from hetero.plugins.npu_sim.compiler.conv_plan import (
    ConvShape,
    Span,
    View,
    choose_tiling,
    chunks,
    conv_shape,
    matmul_views,
    packs_taps,
    subsampled,
    tap_copy_rows,
    tap_packing,
    tap_width,
    window_span,
    window_width,
)
from hetero.plugins.npu_sim.isa import Buf, Copy, Gemm, Requant


def emit_qconv(b: ProgramBuilder, node: Node) -> None:
    """QConv (2-D, any group) on the array."""
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    shape = conv_shape(node)
    weights = np.asarray(w.data, dtype=np.int64)
    b_data = np.zeros(shape.out_channels, np.int64) if bias is None else np.asarray(bias.data, np.int64)
    _emit(b, node, shape, b.loc(x), b.locs[node.output.name], weights, b_data)


def emit_qmatmul(b: ProgramBuilder, node: Node) -> None:
    """QMatMul A[..., K] @ B[K, N] as a 1×1 convolution over a 1 × M image."""
    a_val, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    k, n = w.shape
    shape, x_view, y_view = matmul_views(node, b.loc(a_val), b.locs[node.output.name])
    weights = np.asarray(w.data, dtype=np.int64).T.reshape(n, k, 1, 1)
    b_data = np.zeros(n, np.int64) if bias is None else np.asarray(bias.data, np.int64)
    attrs = dict(node.attrs, x_zero=node.attrs["a_zero"])
    _emit(b, node, shape, x_view, y_view, weights, b_data, attrs)


def _pack(weights: np.ndarray, oc0: int, oct: int, c0: int, ck: int, cols: int) -> np.ndarray:
    """The wgt image of one step: for each tap, for each array-column chunk, a contiguous k×n block."""
    blocks = []
    for ky in range(weights.shape[2]):
        for kx in range(weights.shape[3]):
            for j0, jn in chunks(oct, cols):
                blocks.append(weights[oc0 + j0:oc0 + j0 + jn, c0:c0 + ck, ky, kx].T.ravel())
    return np.concatenate(blocks).astype(np.int8)


def _tap_packed(b: ProgramBuilder, s: ConvShape, x: Loc | View, weights: np.ndarray,
                pad_value: int) -> tuple[ConvShape, View, np.ndarray]:
    """A convolution with few input channels as one whose GEMMs take a whole kernel row at once.

    With ``cin`` channels a GEMM uses ``cin`` of the array's rows; packing the ``kw`` taps of a
    kernel row into the reduction makes ``k = cin·kw``. The input is first copied to a DRAM
    scratch image, channel-major with its columns padded, so that the window of output
    column x, channel c, tap kx is element ``x·sw + kx·dw`` of a padded row: the DMA then
    gathers the (c, kx) vectors of a tile with a 4-D box, overlapping reads and all. The
    result is a (kh × 1)-kernel convolution over an ``out_w``-wide image of ``cin·kw``
    channels, whose weights are reordered to match (channel c·kw + kx).
    """
    left, width = s.pads[1], tap_width(s)
    addr = b.alloc(s.n * s.channels * s.height * width)
    xs = x.strides
    for n in range(s.n):
        for y0, count in chunks(s.height, tap_copy_rows(b, s)):
            slot = b.begin_step()
            inp_base = b.slot_base("inp", slot)
            b.load(Buf.INP, inp_base, x.addr + n * xs[0] + y0 * xs[2], (s.channels, count, s.width),
                   (xs[1], xs[2], xs[3]), pad_lo=(0, 0, 0, left), pad_hi=(0, 0, 0, width - left - s.width),
                   pad_value=pad_value)
            b.start_compute()
            out_base = b.slot_base("out", b.begin_output())
            b.emit(Copy(Buf.OUT, out_base, Buf.INP, inp_base, s.channels * count * width, tag=b.tag))
            b.end_step()
            b.store_output(out_base, addr + (n * s.channels * s.height + y0) * width, (s.channels, count, width),
                           (s.height * width, width, 1))
    b.dram_barrier()
    packed, view = tap_packing(s, addr)
    kh, kw = s.kernel
    reordered = weights.transpose(0, 1, 3, 2).reshape(s.out_channels, s.cin * kw, kh, 1)
    return packed, view, reordered


def _emit(b: ProgramBuilder, node: Node, s: ConvShape, x: Loc | View, y: Loc | View, weights: np.ndarray,
          bias: np.ndarray, attrs: dict | None = None) -> None:
    a = node.attrs if attrs is None else attrs
    if s.kernel == (1, 1) and not any(s.pads) and s.stride != (1, 1):
        s, x = subsampled(s, x)
    elif packs_taps(b, s):
        s, x, weights = _tap_packed(b, s, x, weights, a["x_zero"])
    xs, ys = x.strides, y.strides
    t = choose_tiling(b, node, s, xs, ys, x.taps if isinstance(x, View) else 1)
    cols = b.config.array_cols
    kh, kw = s.kernel
    sh, sw = s.stride
    dh, dw = s.dilation
    oh, ow = s.out_hw
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
                    width = window_width(tow, s)
                    for o0, on in chunks(s.cout, t.oct):
                        oc = g * s.cout + o0
                        for c0, cn in k_chunks:
                            slot = b.begin_step()
                            inp_base = b.slot_base("inp", slot)
                            wgt_base = b.slot_base("wgt", slot)
                            ch = g * s.cin + c0
                            _load_window(b, x, inp_base, n, ch, cn, rows, span, width, a["x_zero"])
                            wsize = kh * kw * cn * on
                            b.load(Buf.WGT, wgt_base, packed[g, o0, c0], (wsize,), (1,))
                            last = c0 + cn == s.cin
                            if last:
                                param_off = b.load_params(slot, wsize, params[oc:oc + on])
                            b.start_compute()
                            shape = _StepShape(toh, tow, on, cn, width, t.multi)
                            _gemms(b, s, shape, inp_base, wgt_base, first=c0 == 0)
                            if last:
                                out_base = b.slot_base("out", b.begin_output())
                                _requant(b, a, s, shape, out_base, param_off)
                            b.end_step()
                            if last:
                                b.store_output(out_base, y.addr + n * ys[0] + oy0 * ys[2] + ox0 * ys[3] + oc * ys[1],
                                               (toh, tow, on), (ys[2], ys[3], ys[1]))


def _load_window(b: ProgramBuilder, x: Loc | View, base: int, n: int, ch: int, cn: int, rows: Span, span: Span,
                 width: int, pad_value: int) -> None:
    """DMA a step's input window into ``inp`` at ``base``: rows × width × cn, HWC, padded."""
    xs = x.strides
    addr = x.addr + n * xs[0] + rows.start * xs[2] + span.start * xs[3]
    if isinstance(x, View) and x.taps > 1:
        # A tap-packed view needs no column padding (its scratch image holds it): (c, kx) per pixel.
        b.load(Buf.INP, base, addr + ch // x.taps * xs[1], (rows.count, span.count, cn // x.taps, x.taps),
               (xs[2], xs[3], xs[1], x.tap_stride), pad_lo=(rows.pad_lo, 0, 0, 0), pad_hi=(rows.pad_hi, 0, 0, 0),
               pad_value=pad_value)
        return
    b.load(Buf.INP, base, addr + ch * xs[1], (rows.count, span.count, cn), (xs[2], xs[3], xs[1]),
           pad_lo=(0, rows.pad_lo, span.pad_lo, 0), pad_hi=(0, rows.pad_hi, span.pad_hi + width - span.extent, 0),
           pad_value=pad_value)


@dataclass(frozen=True)
class _StepShape:
    """What one step computes: ``toh`` × ``tow`` pixels × ``on`` channels from ``cn`` input
    channels held in a window ``width`` columns wide; ``multi`` as in
    :class:`~hetero.plugins.npu_sim.compiler.conv_plan.Tiling`."""

    toh: int
    tow: int
    on: int
    cn: int
    width: int
    multi: bool


def _gemms(b: ProgramBuilder, s: ConvShape, st: _StepShape, inp_base: int, wgt_base: int, *, first: bool) -> None:
    """The step's GEMMs, tap by tap; each k×n weight block is loaded into the array once."""
    cols = b.config.array_cols
    kh, kw = s.kernel
    sh, sw = s.stride
    pitch = sh * st.width // sw
    wgt_off = wgt_base
    for ky in range(kh):
        for kx in range(kw):
            accumulate = not (first and ky == 0 and kx == 0)
            tap = ky * s.dilation[0] * st.width + kx * s.dilation[1]
            for j0, jn in chunks(st.on, cols):
                if st.multi:
                    b.emit(Gemm(j0, inp_base + tap * st.cn, wgt_off, (st.toh - 1) * pitch + st.tow, st.cn, jn,
                                sw * st.cn, st.on, accumulate, tag=b.tag))
                else:
                    for r in range(st.toh):
                        row = r * sh * st.width + tap
                        b.emit(Gemm(r * st.tow * st.on + j0, inp_base + row * st.cn, wgt_off, st.tow, st.cn, jn,
                                    sw * st.cn, st.on, accumulate, tag=b.tag))
                wgt_off += st.cn * jn


def _requant(b: ProgramBuilder, a: dict, s: ConvShape, st: _StepShape, out_base: int, param_off: int) -> None:
    """Bring the step's accumulators to int8 in ``out``, a dense toh × tow × on block: one
    REQUANT, or one per output row when multi-row GEMMs left discarded rows between them."""
    pitch = s.stride[0] * st.width // s.stride[1] if st.multi else st.tow
    rows = [(0, st.toh)] if pitch == st.tow else [(r, 1) for r in range(st.toh)]
    for r, count in rows:
        b.emit(Requant(Buf.OUT, out_base + r * st.tow * st.on, r * pitch * st.on, count * st.tow * st.on, st.on,
                       param_off, a["y_zero"], a["y_min"], a["y_max"], tag=b.tag))
