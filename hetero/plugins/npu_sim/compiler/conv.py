"""Convolution and matrix product on the systolic array, as implicit GEMM.

A step covers a tile of output pixels (``toh`` rows × ``tow`` columns), a tile of
output channels and one chunk of input channels (at most the array's rows). The
load engine brings the input window of the tile into ``inp`` as an HWC block,
padded by the DMA with the input zero point (so padding contributes nothing once
the bias folds ``x_zero · Σw`` away), and the pre-packed weights of the tile into
``wgt``. Compute issues, per kernel tap and column chunk of the array, one GEMM
that covers every output row of the tile (see :func:`row_pitch`: the rows between
them are the window's padding columns, computed and never requantised), or one
GEMM per output row where that is cheaper; ``acc`` accumulates over taps and
input-channel chunks. After the last chunk, REQUANT brings the valid pixels to
int8 in ``out`` and the store engine writes them.

The tile sizes and the choice between the two GEMM shapes come from
:func:`_estimate`, the cycle model's own costs (fill and drain, weight loads, DMA
bytes, latency and runs) over every tiling that fits the SRAM buffers. Two
rewrites come first: a strided 1×1 convolution reads an input the DMA subsamples
(so it is a plain matrix product over the tile), and one with few input channels
packs each kernel row's taps into the reduction (:func:`_tap_packed`).

Grouped and depthwise convolutions run group by group (a depthwise group is a GEMM
with k = n = 1 per tap: correct and simple, not fast). A QMatMul is a 1×1
convolution over a one-row image whose width is the matrix's rows.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np

from hetero.core.ir.graph import Node
from hetero.errors import PluginError
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.cycles import dma_runs
from hetero.plugins.npu_sim.isa import Buf, Copy, Gemm, Requant


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
    shape = _conv_shape(node)
    weights = np.asarray(w.data, dtype=np.int64)
    b_data = np.zeros(shape.out_channels, np.int64) if bias is None else np.asarray(bias.data, np.int64)
    _emit(b, node, shape, b.loc(x), b.locs[node.output.name], weights, b_data)


def emit_qmatmul(b: ProgramBuilder, node: Node) -> None:
    """QMatMul A[..., K] @ B[K, N] as a 1×1 convolution over a 1 × M image."""
    a_val, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 and node.inputs[2] is not None else None
    k, n = w.shape
    shape, x_view, y_view = _matmul_views(node, b.loc(a_val), b.locs[node.output.name])
    weights = np.asarray(w.data, dtype=np.int64).T.reshape(n, k, 1, 1)
    b_data = np.zeros(n, np.int64) if bias is None else np.asarray(bias.data, np.int64)
    attrs = dict(node.attrs, x_zero=node.attrs["a_zero"])
    _emit(b, node, shape, x_view, y_view, weights, b_data, attrs)


def _conv_shape(node: Node) -> ConvShape:
    """The ConvShape of a QConv node."""
    x, w, a = node.inputs[0], node.inputs[1], node.attrs
    return ConvShape(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], tuple(a["kernel_shape"]),
                     tuple(a["strides"]), tuple(a["dilations"]), tuple(a["pads"]), node.output.shape[2:],
                     a["group"])


def _matmul_views(node: Node, x_loc: Loc, y_loc: Loc) -> tuple[ConvShape, _View, _View]:
    """A QMatMul as the 1×1 convolution :func:`emit_qmatmul` runs: its shape and operand views."""
    k, n = node.inputs[1].shape
    rows = math.prod(node.inputs[0].shape[:-1])
    x_rows, y_rows = _merged_rows(x_loc, node), _merged_rows(y_loc, node)
    # Viewed as NCHW with N = H = 1: channels are K (or N), width the M rows.
    x_view = _View(x_loc.addr, (1, k, 1, rows), (0, x_loc.strides[-1], 0, x_rows))
    y_view = _View(y_loc.addr, (1, n, 1, rows), (0, y_loc.strides[-1], 0, y_rows))
    return ConvShape(1, k, 1, rows, n, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, rows), 1), x_view, y_view


@dataclass(frozen=True)
class _View:
    """A 4-D strided view of DRAM (a Loc's ``addr``/``shape``/``strides`` without its layout).

    ``taps`` > 1 marks a tap-packed view (see :func:`_tap_packed`): each of its channels is
    ``taps`` consecutive elements ``tap_stride`` apart, loaded as one more box dimension.
    """

    addr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    taps: int = 1
    tap_stride: int = 0


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
    """One step's extent: ``toh`` × ``tow`` output pixels, ``oct`` output channels, ``ck`` input
    channels. ``multi``: one GEMM per tap and column chunk covers every row of the tile (see
    :func:`row_pitch`); otherwise one GEMM per output row."""

    toh: int
    tow: int
    oct: int
    ck: int
    multi: bool


def window_width(tow: int, s: ConvShape) -> int:
    """Columns of the SRAM window ``tow`` outputs read: the padded extent, widened (with more
    padding) until the window's row is a whole number of horizontal strides."""
    width = window_extent(tow, s.stride[1], s.kernel[1], s.dilation[1])
    while (s.stride[0] * width) % s.stride[1]:
        width += 1
    return width


def row_pitch(tow: int, s: ConvShape) -> int:
    """GEMM rows per output row when one GEMM covers several output rows.

    Output pixel (r, x) of a tap reads window element ``(r·sh + ky·dh)·width + x·sw + kx·dw``;
    with ``pitch = sh·width / sw`` that is ``(r·pitch + x)·sw`` plus the tap's offset, so GEMM
    row ``r·pitch + x`` at input row stride ``sw·channels`` is that pixel. Rows with
    ``x ≥ tow`` read real window elements into accumulator rows nobody requantises.
    """
    return s.stride[0] * window_width(tow, s) // s.stride[1]


def _tile_sizes(total: int) -> list[int]:
    """Every balanced tile size of ``range(total)``: ``ceil(total / parts)`` for each number of parts."""
    return sorted({-(-total // parts) for parts in range(1, total + 1)}, reverse=True)


def _dma(cfg: NpuConfig, nbytes: int, runs: int) -> int:
    return cfg.dma_latency_cycles + math.ceil(nbytes / cfg.dma_bytes_per_cycle) + cfg.dma_run_cycles * (runs - 1)


def _estimate(cfg: NpuConfig, s: ConvShape, t: _Tiling, xs: tuple[int, ...], ys: tuple[int, ...]) -> int:
    """Cycles one group of one image would take with tiling ``t``, by the cycle model's own
    formulas: the load and compute engines overlap step by step, the store engine runs beside them."""
    steps, load, compute, store = _step_costs(cfg, s, t, xs, ys)
    return _overlapped(steps, load, compute, store)


def _overlapped(steps: int, load: int, compute: int, store: int) -> int:
    """Cycles of ``steps`` equal steps of ``load`` and ``compute`` cycles beside stores of ``store``
    cycles in all: the slower of the load-compute chain and the store engine, plus the pipeline's fill."""
    return max(steps * max(load, compute), store) + load + compute


def _step_costs(cfg: NpuConfig, s: ConvShape, t: _Tiling, xs: tuple[int, ...], ys: tuple[int, ...],
                taps: int = 1, tap_stride: int = 0) -> tuple[int, int, int, int]:
    """One group of one image with tiling ``t``: its steps, a step's load and compute cycles, and
    the cycles of all its stores. ``taps`` > 1 reads the input as a tap-packed view does (see
    :class:`_View`); the tiling search leaves it at 1, so it ranks tilings as it always has."""
    oh, ow = s.out_hw
    kh, kw = s.kernel
    width, pitch = window_width(t.tow, s), row_pitch(t.tow, s)
    rows_in = window_extent(t.toh, s.stride[0], kh, s.dilation[0])
    k_steps = -(-s.cin // t.ck)
    gemm = 0
    for _, jn in chunks(t.oct, cfg.array_cols):
        if t.multi:
            gemm += (t.toh - 1) * pitch + t.tow + 2 * t.ck + jn - 1
        else:
            gemm += t.toh * (t.tow + t.ck + jn - 1) + t.ck
    rows_out = t.toh if t.multi and pitch > t.tow else 1
    requant = rows_out * (cfg.vector_startup_cycles + math.ceil(t.toh * t.tow * t.oct / rows_out / cfg.vector_lanes))
    compute = kh * kw * gemm + requant // k_steps + 6
    if taps > 1:
        in_runs = dma_runs((min(rows_in, s.height), min(width, s.width), t.ck // taps, taps),
                           (xs[2], xs[3], xs[1], tap_stride), 1)
    else:
        in_runs = dma_runs((min(rows_in, s.height), min(width, s.width), t.ck), (xs[2], xs[3], xs[1]), 1)
    load = (_dma(cfg, rows_in * width * t.ck, in_runs) + _dma(cfg, kh * kw * t.ck * t.oct, 1)
            + _dma(cfg, 12 * t.oct, 1) // k_steps)
    store = _dma(cfg, t.toh * t.tow * t.oct, dma_runs((t.toh, t.tow, t.oct), (ys[2], ys[3], ys[1]), 1))
    tiles = -(-oh // t.toh) * -(-ow // t.tow) * -(-s.cout // t.oct)
    return tiles * k_steps, load, compute, tiles * store


def _tiling(b: ProgramBuilder, node: Node, s: ConvShape, xs: tuple[int, ...], ys: tuple[int, ...]) -> _Tiling:
    """The tiling that fits every SRAM buffer and that :func:`_estimate` finds fastest."""
    slots = tuple(b.slot_size(n) for n in ("inp", "wgt", "out", "acc"))
    best, failed = _search_tiling(b.config, slots, s, xs, ys)
    if best is None:
        raise PluginError(
            f"npu_sim: {node.op} node {node.name!r} does not fit the {failed} buffer "
            f"({b.slot_size(failed)} elements per slot) even at the smallest tile; use a larger npu_preset "
            f"or npu_sram_kib, or let another backend take it"
        )
    return best


# The search is pure and the partitioner's estimates ask about the same layers again and again.
@functools.lru_cache(maxsize=1024)
def _search_tiling(cfg: NpuConfig, slots: tuple[int, int, int, int], s: ConvShape, xs: tuple[int, ...],
                   ys: tuple[int, ...]) -> tuple[_Tiling | None, str]:
    """The fastest tiling that fits the ``inp``, ``wgt``, ``out``, ``acc`` slot sizes ``slots``, or
    None and the buffer that the last tiling tried overflowed."""
    ck = min(s.cin, cfg.array_rows)
    oh, ow = s.out_hw
    kh, kw = s.kernel
    inp, wgt, out, acc = slots
    cols = cfg.array_cols
    oc_options = sorted({s.cout} | {m * cols for m in range(1, s.cout // cols + 1)}
                        | {max(1, cols >> i) for i in range(8) if cols >> i < s.cout}, reverse=True)
    failed, best, best_cost = "wgt", None, 0
    for oct in oc_options:
        if kh * kw * ck * oct + 12 * oct > wgt:
            continue
        for tow in halvings(ow):
            width, pitch = window_width(tow, s), row_pitch(tow, s)
            for toh in _tile_sizes(oh):
                if window_extent(toh, s.stride[0], kh, s.dilation[0]) * width * ck > inp:
                    failed = "inp"
                    continue
                if toh * tow * oct > out:
                    failed = "out"
                    continue
                for multi in (True, False):
                    if ((toh - 1) * pitch + tow if multi else toh * tow) * oct > acc:
                        failed = "acc"
                        continue
                    tiling = _Tiling(toh, tow, oct, ck, multi)
                    cost = _estimate(cfg, s, tiling, xs, ys)
                    if best is None or cost < best_cost:
                        best, best_cost = tiling, cost
    return best, failed


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


def _subsampled(s: ConvShape, x: Loc | _View) -> tuple[ConvShape, _View]:
    """A 1×1 unpadded convolution of stride (sh, sw) as a stride-1 one over the input the DMA
    subsamples on the way in (strides sh·row and sw·column), so its GEMMs read dense rows."""
    (sh, sw), xs = s.stride, x.strides
    view = _View(x.addr, (s.n, s.channels, *s.out_hw), (xs[0], xs[1], sh * xs[2], sw * xs[3]))
    return replace(s, height=s.out_hw[0], width=s.out_hw[1], stride=(1, 1), dilation=(1, 1)), view


def _tap_packed(b: ProgramBuilder, s: ConvShape, x: Loc | _View, weights: np.ndarray,
                pad_value: int) -> tuple[ConvShape, _View, np.ndarray]:
    """A convolution with few input channels as one whose GEMMs take a whole kernel row at once.

    With ``cin`` channels a GEMM uses ``cin`` of the array's rows; packing the ``kw`` taps of a
    kernel row into the reduction makes ``k = cin·kw``. The input is first copied to a DRAM
    scratch image, channel-major with its columns padded, so that the window of output
    column x, channel c, tap kx is element ``x·sw + kx·dw`` of a padded row: the DMA then
    gathers the (c, kx) vectors of a tile with a 4-D box, overlapping reads and all. The
    result is a (kh × 1)-kernel convolution over an ``out_w``-wide image of ``cin·kw``
    channels, whose weights are reordered to match (channel c·kw + kx).
    """
    left, width = s.pads[1], _tap_width(s)
    addr = b.alloc(s.n * s.channels * s.height * width)
    xs = x.strides
    rows_per_tile = min(b.slot_size("inp"), b.slot_size("out")) // (s.channels * width)
    for n in range(s.n):
        for y0, count in chunks(s.height, rows_per_tile):
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
    packed, view = _tap_packing(s, addr)
    kh, kw = s.kernel
    reordered = weights.transpose(0, 1, 3, 2).reshape(s.out_channels, s.cin * kw, kh, 1)
    return packed, view, reordered


def _tap_width(s: ConvShape) -> int:
    """Columns of a padded row of :func:`_tap_packed`'s scratch image."""
    kw, sw, dw = s.kernel[1], s.stride[1], s.dilation[1]
    return max((s.out_hw[1] - 1) * sw + (kw - 1) * dw + 1, s.pads[1] + s.width)


def _tap_packing(s: ConvShape, addr: int) -> tuple[ConvShape, _View]:
    """The convolution :func:`_tap_packed` leaves, and its view of the scratch image at ``addr``."""
    (sh, sw), (dh, dw), (kh, kw) = s.stride, s.dilation, s.kernel
    width = _tap_width(s)
    packed = replace(s, channels=s.channels * kw, width=s.out_hw[1], kernel=(kh, 1), stride=(sh, 1),
                     dilation=(dh, 1), pads=(s.pads[0], 0, s.pads[2], 0))
    view = _View(addr, (s.n, packed.channels, s.height, packed.width),
                 (s.channels * s.height * width, s.height * width, width, sw), kw, dw)
    return packed, view


def _tap_copy_cycles(b: ProgramBuilder, s: ConvShape, xs: tuple[int, ...]) -> int:
    """Cycles of :func:`_tap_packed`'s copy into the scratch image, up to its DRAM barrier."""
    cfg, width = b.config, _tap_width(s)
    count = min(s.height, min(b.slot_size("inp"), b.slot_size("out")) // (s.channels * width))
    steps = s.n * -(-s.height // count)
    nbytes = s.channels * count * width
    load = _dma(cfg, nbytes, dma_runs((s.channels, count, s.width), (xs[1], xs[2], xs[3]), 1))
    copy = cfg.vector_startup_cycles + math.ceil(nbytes / cfg.vector_lanes)
    store = _dma(cfg, nbytes, dma_runs((s.channels, count, width), (s.height * width, width, 1), 1))
    return _overlapped(steps, load, copy, steps * store) + store


def _packs_taps(b: ProgramBuilder, s: ConvShape) -> bool:
    """Whether :func:`_tap_packed` applies and pays: few channels, a wide kernel, a row that fits a slot."""
    kw, rows = s.kernel[1], b.config.array_rows
    width = _tap_width(s)
    return (s.group == 1 and kw > 1 and 2 * s.cin <= rows and s.cin * kw <= rows
            and s.channels * width <= min(b.slot_size("inp"), b.slot_size("out")))


def plan_cost(node: Node, config: NpuConfig, x: Loc, y: Loc, *, double_buffer: bool = True) -> int:
    """Estimated cycles of a QConv or QMatMul node compiled for ``config``, reading ``x`` and
    writing ``y`` (their DRAM layouts; the addresses do not matter), without emitting anything.

    It follows :func:`emit_qconv` and :func:`emit_qmatmul`: the same rewrites (a strided 1×1
    convolution subsampled by the DMA, few input channels tap-packed, whose copy it counts),
    the tiling the compiler picks, and that tiling's :func:`_estimate`, repeated over images and
    groups as their steps pipeline. Raises :class:`~hetero.errors.PluginError` where compiling
    would: a layer that fits no tiling, or a matrix operand that is not contiguous.
    """
    b = ProgramBuilder(config, double_buffer=double_buffer)
    if node.op == "QMatMul":
        s, xv, yv = _matmul_views(node, x, y)
    else:
        s, xv, yv = _conv_shape(node), x, y
    fill = 0
    if s.kernel == (1, 1) and not any(s.pads) and s.stride != (1, 1):
        s, xv = _subsampled(s, xv)
    elif _packs_taps(b, s):
        fill = _tap_copy_cycles(b, s, xv.strides)
        s, xv = _tap_packing(s, 0)
    t = _tiling(b, node, s, xv.strides, yv.strides)
    taps = (xv.taps, xv.tap_stride) if isinstance(xv, _View) else (1, 0)
    steps, load, compute, store = _step_costs(config, s, t, xv.strides, yv.strides, *taps)
    reps = s.n * s.group
    return fill + _overlapped(reps * steps, load, compute, reps * store)


def _emit(b: ProgramBuilder, node: Node, s: ConvShape, x: Loc | _View, y: Loc | _View, weights: np.ndarray,
          bias: np.ndarray, attrs: dict | None = None) -> None:
    a = node.attrs if attrs is None else attrs
    if s.kernel == (1, 1) and not any(s.pads) and s.stride != (1, 1):
        s, x = _subsampled(s, x)
    elif _packs_taps(b, s):
        s, x, weights = _tap_packed(b, s, x, weights, a["x_zero"])
    xs, ys = x.strides, y.strides
    t = _tiling(b, node, s, xs, ys)
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


def _load_window(b: ProgramBuilder, x: Loc | _View, base: int, n: int, ch: int, cn: int, rows: Span, span: Span,
                 width: int, pad_value: int) -> None:
    """DMA a step's input window into ``inp`` at ``base``: rows × width × cn, HWC, padded."""
    xs = x.strides
    addr = x.addr + n * xs[0] + rows.start * xs[2] + span.start * xs[3]
    if isinstance(x, _View) and x.taps > 1:
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
    channels held in a window ``width`` columns wide; ``multi`` as in :class:`_Tiling`."""

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
