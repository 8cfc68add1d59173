"""How npu_sim runs a convolution or matrix product: its shape, rewrites and tiling.

Given a QConv or QMatMul node, a :class:`~hetero.plugins.npu_sim.config.NpuConfig` and the
DRAM layouts of the node's input and output, this module decides everything about the code
:mod:`~hetero.plugins.npu_sim.compiler.conv` then emits, and estimates what it costs:

- the convolution it runs (:class:`ConvShape`; a QMatMul is a 1×1 convolution over a
  one-row image whose width is the matrix's rows, :func:`matmul_views`);
- the rewrite that comes first, if any: a strided 1×1 convolution reads an input the
  DMA subsamples, so it is a plain matrix product over the tile (:func:`subsampled`),
  and one with few input channels packs each kernel row's taps into the reduction
  (:func:`packs_taps` decides, :func:`tap_packing` is the convolution it leaves);
- the tiling (:class:`Tiling`): the tile sizes and the choice between one GEMM per
  kernel tap covering every output row of the tile (see :func:`row_pitch`) and one GEMM
  per output row, from :func:`_estimate`, the cycle model's own costs (fill and drain,
  weight loads, DMA bytes, latency and runs) over every tiling that fits the SRAM
  buffers (:func:`choose_tiling`), unless the builder holds a tuned tiling of the same
  problem (:func:`problem_key`) that still fits; the legal values of each field
  (:func:`tiling_options`) and the fit (:func:`overflow`, :func:`misfit`) are what
  :mod:`~hetero.plugins.npu_sim.tuning` searches and checks;
- the cycles of the whole node (:func:`plan_cost`), which the backend's estimate uses.

It emits nothing; the window geometry (:func:`window_span`, :func:`window_extent`,
:func:`chunks`, :func:`halvings`) is shared with the emitters.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import asdict, dataclass, replace

from hetero.plugin import Node, PluginError
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.cycles import dma_runs


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


def halvings(total: int) -> list[int]:
    """``total``, then repeatedly halved (rounding up) down to 1: tile sizes to try, largest first."""
    sizes, size = [], total
    while True:
        sizes.append(size)
        if size == 1:
            return sizes
        size = -(-size // 2)


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


def conv_shape(node: Node) -> ConvShape:
    """The ConvShape of a QConv node."""
    x, w, a = node.inputs[0], node.inputs[1], node.attrs
    return ConvShape(x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], tuple(a["kernel_shape"]),
                     tuple(a["strides"]), tuple(a["dilations"]), tuple(a["pads"]), node.output.shape[2:],
                     a["group"])


def matmul_views(node: Node, x_loc: Loc, y_loc: Loc) -> tuple[ConvShape, View, View]:
    """A QMatMul as the 1×1 convolution :func:`~hetero.plugins.npu_sim.compiler.conv.emit_qmatmul`
    runs: its shape and operand views."""
    k, n = node.inputs[1].shape
    rows = math.prod(node.inputs[0].shape[:-1])
    x_rows, y_rows = _merged_rows(x_loc, node), _merged_rows(y_loc, node)
    # Viewed as NCHW with N = H = 1: channels are K (or N), width the M rows.
    x_view = View(x_loc.addr, (1, k, 1, rows), (0, x_loc.strides[-1], 0, x_rows))
    y_view = View(y_loc.addr, (1, n, 1, rows), (0, y_loc.strides[-1], 0, y_rows))
    return ConvShape(1, k, 1, rows, n, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), (1, rows), 1), x_view, y_view


@dataclass(frozen=True)
class View:
    """A 4-D strided view of DRAM (a Loc's ``addr``/``shape``/``strides`` without its layout).

    ``taps`` > 1 marks a tap-packed view (see :func:`tap_packing`): each of its channels is
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
class Tiling:
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


def _estimate(cfg: NpuConfig, s: ConvShape, t: Tiling, xs: tuple[int, ...], ys: tuple[int, ...]) -> int:
    """Cycles one group of one image would take with tiling ``t``, by the cycle model's own
    formulas: the load and compute engines overlap step by step, the store engine runs beside them."""
    steps, load, compute, store = _step_costs(cfg, s, t, xs, ys)
    return _overlapped(steps, load, compute, store)


def _overlapped(steps: int, load: int, compute: int, store: int) -> int:
    """Cycles of ``steps`` equal steps of ``load`` and ``compute`` cycles beside stores of ``store``
    cycles in all: the slower of the load-compute chain and the store engine, plus the pipeline's fill."""
    return max(steps * max(load, compute), store) + load + compute


def _step_costs(cfg: NpuConfig, s: ConvShape, t: Tiling, xs: tuple[int, ...], ys: tuple[int, ...],
                taps: int = 1, tap_stride: int = 0) -> tuple[int, int, int, int]:
    """One group of one image with tiling ``t``: its steps, a step's load and compute cycles, and
    the cycles of all its stores. ``taps`` > 1 reads the input as a tap-packed view does (see
    :class:`View`); the tiling search leaves it at 1, so it ranks tilings as it always has."""
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


#: The SRAM buffers a tiling must fit, in the order :func:`overflow` checks them.
BUFFERS = ("wgt", "inp", "out", "acc")
#: The order of a ``slots`` tuple: the elements one slot of each buffer holds.
SLOT_ORDER = ("inp", "wgt", "out", "acc")


def slot_sizes(b: ProgramBuilder) -> tuple[int, int, int, int]:
    """The elements one slot of each buffer of ``b`` holds, in :data:`SLOT_ORDER`."""
    return tuple(b.slot_size(n) for n in SLOT_ORDER)


def tiling_options(cfg: NpuConfig, s: ConvShape, taps: int = 1) -> dict[str, list[int]]:
    """The values each field of a :class:`Tiling` of ``s`` may take on ``cfg``, largest first.

    ``oct``, ``tow`` and ``toh`` are the lists the analytic search walks: the whole output
    channels, whole multiples of the array's width and fractions of it; halvings of the output
    width; balanced tiles of the output height. ``ck`` is the input-channel chunk: the array's
    rows (or every channel, when fewer) and halvings of it, whole multiples of ``taps`` for a
    tap-packed view (a chunk must not split a pixel's taps); the analytic search takes the first.
    ``multi`` is 1 (one GEMM covers every row of the tile) or 0 (one GEMM per row).
    """
    cols = cfg.array_cols
    oct = sorted({s.cout} | {m * cols for m in range(1, s.cout // cols + 1)}
                 | {max(1, cols >> i) for i in range(8) if cols >> i < s.cout}, reverse=True)
    ck = [taps * c for c in halvings(min(s.cin, cfg.array_rows) // taps)]
    return {"toh": _tile_sizes(s.out_hw[0]), "tow": halvings(s.out_hw[1]), "oct": oct, "ck": ck, "multi": [1, 0]}


def footprint(s: ConvShape, t: Tiling) -> dict[str, int]:
    """Elements tiling ``t`` of ``s`` needs in one slot of each SRAM buffer: ``wgt`` its weights and
    12 bytes of requantisation parameters per channel, ``inp`` its padded input window, ``out`` its
    int8 results, ``acc`` its accumulators (with the rows between output rows a multi-row GEMM covers)."""
    kh, kw = s.kernel
    rows = (t.toh - 1) * row_pitch(t.tow, s) + t.tow if t.multi else t.toh * t.tow
    return {"wgt": kh * kw * t.ck * t.oct + 12 * t.oct,
            "inp": window_extent(t.toh, s.stride[0], kh, s.dilation[0]) * window_width(t.tow, s) * t.ck,
            "out": t.toh * t.tow * t.oct,
            "acc": rows * t.oct}


def overflow(slots: tuple[int, int, int, int], s: ConvShape, t: Tiling) -> str | None:
    """The first buffer of :data:`BUFFERS` whose slot (``slots``: ``inp``, ``wgt``, ``out``, ``acc``
    elements) tiling ``t`` of ``s`` does not fit, or None when it fits them all."""
    capacity = dict(zip(SLOT_ORDER, slots))
    need = footprint(s, t)
    return next((buf for buf in BUFFERS if need[buf] > capacity[buf]), None)


def misfit(cfg: NpuConfig, slots: tuple[int, int, int, int], s: ConvShape, t: Tiling,
           taps: int = 1) -> str | None:
    """Why ``t`` cannot tile ``s`` in ``slots`` on ``cfg`` (a field off its
    :func:`tiling_options`, or the buffer it overflows and by how much), or None when it can."""
    options = tiling_options(cfg, s, taps)
    for name, values in options.items():
        value = int(getattr(t, name))
        if value not in values:
            return f"{name}={value} is not one of its values {values}"
    buf = overflow(slots, s, t)
    if buf is not None:
        capacity = dict(zip(SLOT_ORDER, slots))[buf]
        return (f"the tile overflows the {buf} buffer: it needs {footprint(s, t)[buf]} elements, "
                f"a slot holds {capacity}")
    return None


def problem_key(cfg: NpuConfig, slots: tuple[int, int, int, int], s: ConvShape, xs: tuple[int, ...],
                ys: tuple[int, ...], taps: int = 1) -> str:
    """The identity of a tiling problem: the machine, its slots, the convolution and the DRAM
    strides it reads and writes (addresses aside), so equal layers of a model share one key."""
    text = json.dumps([asdict(cfg), list(slots), asdict(s), list(xs), list(ys), taps], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def choose_tiling(b: ProgramBuilder, node: Node, s: ConvShape, xs: tuple[int, ...], ys: tuple[int, ...],
                  taps: int = 1) -> Tiling:
    """The builder's tuned tiling of this problem (:attr:`ProgramBuilder.tilings`, by
    :func:`problem_key`) when it has one that still fits, else the tiling that fits every SRAM
    buffer and that :func:`_estimate` finds fastest."""
    slots = slot_sizes(b)
    tuned = b.tilings.get(problem_key(b.config, slots, s, xs, ys, taps)) if b.tilings else None
    if tuned is not None and misfit(b.config, slots, s, tuned, taps) is None:
        return tuned
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
                   ys: tuple[int, ...]) -> tuple[Tiling | None, str]:
    """The fastest tiling that fits the ``inp``, ``wgt``, ``out``, ``acc`` slot sizes ``slots``, or
    None and the buffer that the last tiling tried overflowed."""
    options = tiling_options(cfg, s)
    ck = options["ck"][0]
    failed, best, best_cost = "wgt", None, 0
    for oct in options["oct"]:
        for tow in options["tow"]:
            for toh in options["toh"]:
                for multi in (True, False):
                    tiling = Tiling(toh, tow, oct, ck, multi)
                    buf = overflow(slots, s, tiling)
                    if buf is not None:
                        failed = buf
                        continue
                    cost = _estimate(cfg, s, tiling, xs, ys)
                    if best is None or cost < best_cost:
                        best, best_cost = tiling, cost
    return best, failed


def rewritten(b: ProgramBuilder, node: Node, x: Loc, y: Loc) -> tuple[ConvShape, Loc | View, Loc | View]:
    """The convolution whose tiling :func:`choose_tiling` picks for ``node`` reading ``x`` and writing
    ``y``, with its operand views, after the rewrite the emitter applies first (a tap-packed
    view's scratch image at address 0: addresses do not matter to the tiling)."""
    if node.op == "QMatMul":
        s, xv, yv = matmul_views(node, x, y)
    else:
        s, xv, yv = conv_shape(node), x, y
    if s.kernel == (1, 1) and not any(s.pads) and s.stride != (1, 1):
        s, xv = subsampled(s, xv)
    elif packs_taps(b, s):
        s, xv = tap_packing(s, 0)
    return s, xv, yv


def subsampled(s: ConvShape, x: Loc | View) -> tuple[ConvShape, View]:
    """A 1×1 unpadded convolution of stride (sh, sw) as a stride-1 one over the input the DMA
    subsamples on the way in (strides sh·row and sw·column), so its GEMMs read dense rows."""
    (sh, sw), xs = s.stride, x.strides
    view = View(x.addr, (s.n, s.channels, *s.out_hw), (xs[0], xs[1], sh * xs[2], sw * xs[3]))
    return replace(s, height=s.out_hw[0], width=s.out_hw[1], stride=(1, 1), dilation=(1, 1)), view


def tap_width(s: ConvShape) -> int:
    """Columns of a padded row of the scratch image a tap-packed convolution's input is first copied to."""
    kw, sw, dw = s.kernel[1], s.stride[1], s.dilation[1]
    return max((s.out_hw[1] - 1) * sw + (kw - 1) * dw + 1, s.pads[1] + s.width)


def tap_packing(s: ConvShape, addr: int) -> tuple[ConvShape, View]:
    """The convolution that packing a kernel row's taps into the reduction leaves, and its view of
    the scratch image at ``addr``.

    The emitter first copies the input to that scratch image, channel-major with its columns
    padded (:func:`tap_width` wide), so that output column x, channel c, tap kx reads element
    ``x·sw + kx·dw`` of a padded row. What is left is a (kh × 1)-kernel convolution over an
    ``out_w``-wide image of ``cin·kw`` channels (channel c·kw + kx), whose view gathers the
    (c, kx) vectors of a tile as a 4-D box.
    """
    (sh, sw), (dh, dw), (kh, kw) = s.stride, s.dilation, s.kernel
    width = tap_width(s)
    packed = replace(s, channels=s.channels * kw, width=s.out_hw[1], kernel=(kh, 1), stride=(sh, 1),
                     dilation=(dh, 1), pads=(s.pads[0], 0, s.pads[2], 0))
    view = View(addr, (s.n, packed.channels, s.height, packed.width),
                (s.channels * s.height * width, s.height * width, width, sw), kw, dw)
    return packed, view


def tap_copy_rows(b: ProgramBuilder, s: ConvShape) -> int:
    """Input rows per step of the copy into :func:`tap_packing`'s scratch image: as many
    padded rows of every channel as one ``inp`` slot and one ``out`` slot both hold."""
    return min(b.slot_size("inp"), b.slot_size("out")) // (s.channels * tap_width(s))


def _tap_copy_cycles(b: ProgramBuilder, s: ConvShape, xs: tuple[int, ...]) -> int:
    """Cycles of the copy of the input into :func:`tap_packing`'s scratch image, up to its DRAM barrier."""
    cfg, width = b.config, tap_width(s)
    count = min(s.height, tap_copy_rows(b, s))
    steps = s.n * -(-s.height // count)
    nbytes = s.channels * count * width
    load = _dma(cfg, nbytes, dma_runs((s.channels, count, s.width), (xs[1], xs[2], xs[3]), 1))
    copy = cfg.vector_startup_cycles + math.ceil(nbytes / cfg.vector_lanes)
    store = _dma(cfg, nbytes, dma_runs((s.channels, count, width), (s.height * width, width, 1), 1))
    return _overlapped(steps, load, copy, steps * store) + store


def packs_taps(b: ProgramBuilder, s: ConvShape) -> bool:
    """Whether tap packing (:func:`tap_packing`) applies and pays: few channels, a wide kernel, a
    row that fits a slot."""
    kw, rows = s.kernel[1], b.config.array_rows
    return (s.group == 1 and kw > 1 and 2 * s.cin <= rows and s.cin * kw <= rows
            and tap_copy_rows(b, s) >= 1)


def plan_cost(node: Node, config: NpuConfig, x: Loc, y: Loc, *, double_buffer: bool = True) -> int:
    """Estimated cycles of a QConv or QMatMul node compiled for ``config``, reading ``x`` and
    writing ``y`` (their DRAM layouts; the addresses do not matter), without emitting anything.

    It follows :func:`~hetero.plugins.npu_sim.compiler.conv.emit_qconv` and
    :func:`~hetero.plugins.npu_sim.compiler.conv.emit_qmatmul`: the same rewrites (a strided
    1×1 convolution subsampled by the DMA, few input channels tap-packed, whose copy it
    counts), the tiling the compiler picks, and that tiling's :func:`_estimate`, repeated over images and
    groups as their steps pipeline. Raises :class:`~hetero.errors.PluginError` where compiling
    would: a layer that fits no tiling, or a matrix operand that is not contiguous.
    """
    b = ProgramBuilder(config, double_buffer=double_buffer)
    if node.op == "QMatMul":
        s, xv, yv = matmul_views(node, x, y)
    else:
        s, xv, yv = conv_shape(node), x, y
    fill = 0
    if s.kernel == (1, 1) and not any(s.pads) and s.stride != (1, 1):
        s, xv = subsampled(s, xv)
    elif packs_taps(b, s):
        fill = _tap_copy_cycles(b, s, xv.strides)
        s, xv = tap_packing(s, 0)
    taps = (xv.taps, xv.tap_stride) if isinstance(xv, View) else (1, 0)
    t = choose_tiling(b, node, s, xv.strides, yv.strides, taps[0])
    steps, load, compute, store = _step_costs(config, s, t, xv.strides, yv.strides, *taps)
    reps = s.n * s.group
    return fill + _overlapped(reps * steps, load, compute, reps * store)
