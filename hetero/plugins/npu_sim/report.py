"""What an npu_sim run cost, per layer and in total, as data and as a text table.

:func:`build_report` folds a run's :class:`SimStats` into an :class:`NpuReport`:
whole-program cycles, latency at the declared clock, matrix-unit utilisation, DMA
bytes, SRAM high-water marks against capacity, and the roofline bound. When the run
recorded a timeline it adds one :class:`LayerFigures` per tag (the graph node the
compiler emitted the instruction for): the span of its instructions on the
timeline, its busy cycles per engine, its MACs, utilisation and DMA bytes.
:func:`format_report` prints it.

Work is counted from the graph, not from the instructions: a layer's MACs are its
op's (:func:`layer_work`), so the padding columns a GEMM computes and drops count as
overhead, not as utilisation; ``issued_macs`` is what the array did. The roofline
bound is the model's, independent of how well the compiler did: per layer the
larger of its MACs over the peak and its compulsory DRAM traffic (its inputs,
weights and outputs, once) over the DMA bandwidth, summed over the layers.

Example::

    >>> result = simulate(program, config, inputs, timeline=True)
    >>> print(format_report(build_report(program, config, result.stats, ops)))
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from hetero.plugin import Node, format_bytes
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.cycles import SimStats
from hetero.plugins.npu_sim.isa import Buf, Engine, Gemm, Instr, Load, Store
from hetero.plugins.npu_sim.program import Program

#: The tag of instructions the compiler emitted outside any node's code.
UNTAGGED = "(untagged)"


@dataclass(frozen=True)
class LayerFigures:
    """One graph node's share of a run.

    ``start``/``end`` bound its instructions on the timeline, so ``cycles`` is the
    wall span it occupies (spans of neighbouring layers may overlap where DMA runs
    ahead); ``busy`` is the cycles each engine spent on it; ``macs`` is the op's
    work and ``issued_macs`` the array's (padding columns included);
    ``utilisation`` is ``macs / (cycles · rows · cols)``.
    """

    tag: str
    op: str
    instrs: int
    start: int
    end: int
    busy: dict[str, int]
    macs: int
    issued_macs: int
    dma_bytes: int
    utilisation: float

    @property
    def cycles(self) -> int:
        """The span of the layer's instructions on the timeline."""
        return self.end - self.start


@dataclass(frozen=True)
class NpuReport:
    """A whole run: totals, the roofline bound, SRAM use, and (with a timeline) per-layer figures."""

    cycles: int
    seconds: float
    clock_ghz: float
    array: tuple[int, int]
    macs: int
    issued_macs: int
    utilisation: float
    dma_bytes: int
    roofline_cycles: int
    engine_busy: dict[str, int]
    sram_high_water: dict[str, int]
    sram_capacity: dict[str, int]
    layers: list[LayerFigures] = field(default_factory=list)

    @property
    def roofline_ratio(self) -> float:
        """Simulated cycles over the roofline bound (1.0 would be perfect)."""
        return self.cycles / self.roofline_cycles if self.roofline_cycles else math.inf


@dataclass(frozen=True)
class LayerWork:
    """What a graph node asks of the machine: its op, its MACs and its compulsory DRAM bytes."""

    op: str
    macs: int
    bytes: int


def layer_work(node: Node) -> LayerWork:
    """``node``'s work: the multiply-accumulates of its matrix op (none for vector and
    data ops) and the bytes of its inputs, constants and outputs, each moved once."""
    ins = [v.type for v in node.inputs if v is not None]
    outs = [v.type for v in node.outputs]
    macs = 0
    if node.op == "QConv":  # each output sums C_in / group channels over the kernel window
        macs = outs[0].size * (ins[0].shape[1] // node.attrs["group"]) * math.prod(ins[1].shape[2:])
    elif node.op == "QMatMul":  # each output sums K products
        macs = outs[0].size * ins[1].shape[0]
    return LayerWork(node.op, macs, sum(t.nbytes for t in ins) + sum(t.nbytes for t in outs))


def instr_macs(instr: Instr) -> int:
    """Multiply-accumulates ``instr`` performs (GEMMs only)."""
    return instr.m * instr.k * instr.n if isinstance(instr, Gemm) else 0


def instr_dma_bytes(instr: Instr) -> int:
    """DRAM bytes ``instr`` moves, counted as :class:`SimStats` counts them (the box, not its padding)."""
    if isinstance(instr, (Load, Store)):
        return math.prod(instr.dims) * instr.dtype.itemsize
    return 0


def roofline_cycles(macs: int, dma_bytes: int, config: NpuConfig) -> int:
    """The fewest cycles any schedule could take: compute-bound or DMA-bound, whichever is slower."""
    return max(math.ceil(macs / config.peak_macs_per_cycle), math.ceil(dma_bytes / config.dma_bytes_per_cycle))


def build_report(program: Program, config: NpuConfig, stats: SimStats,
                 work: Mapping[str, LayerWork]) -> NpuReport:
    """The report of a run of ``program`` that produced ``stats``; ``work`` maps tags
    (node names) to what each node asks (:func:`layer_work`)."""
    capacity = {b.value: config.capacity(b.value) * b.itemsize for b in Buf}
    layers: dict[str, dict] = {}
    peak = config.peak_macs_per_cycle
    for entry in stats.timeline:
        instr = program.instrs[entry.index]
        tag = entry.tag or UNTAGGED
        layer = layers.get(tag)
        if layer is None:
            layer = layers[tag] = {"instrs": 0, "start": entry.start, "end": entry.end,
                                   "busy": {e.value: 0 for e in Engine}, "macs": 0, "dma": 0}
        layer["instrs"] += 1
        layer["start"] = min(layer["start"], entry.start)
        layer["end"] = max(layer["end"], entry.end)
        layer["busy"][entry.engine] += entry.end - entry.start
        layer["macs"] += instr_macs(instr)
        layer["dma"] += instr_dma_bytes(instr)
    figures = []
    for tag, layer in layers.items():
        span = layer["end"] - layer["start"]
        done = work.get(tag, LayerWork("-", 0, 0))
        figures.append(LayerFigures(
            tag, done.op, layer["instrs"], layer["start"], layer["end"], layer["busy"], done.macs,
            layer["macs"], layer["dma"], done.macs / (span * peak) if span else 0.0,
        ))
    macs = sum(w.macs for w in work.values())
    bound = sum(roofline_cycles(w.macs, w.bytes, config) for w in work.values())
    return NpuReport(
        cycles=stats.cycles, seconds=stats.seconds, clock_ghz=config.clock_ghz,
        array=(config.array_rows, config.array_cols), macs=macs, issued_macs=stats.macs,
        utilisation=macs / (stats.cycles * peak) if stats.cycles else 0.0,
        dma_bytes=stats.dma_bytes, roofline_cycles=bound,
        engine_busy=dict(stats.engine_busy), sram_high_water=dict(stats.sram_high_water),
        sram_capacity=capacity, layers=figures,
    )


def format_report(report: NpuReport, *, top: int | None = None) -> str:
    """The report as text: totals, SRAM use, then per-layer rows in program order
    (or the ``top`` layers by cycles, slowest first)."""
    rows, cols = report.array
    lines = [
        (f"npu_sim {rows}x{cols} @ {report.clock_ghz:g} GHz: {report.cycles} cycles = "
         f"{report.seconds * 1e6:.3f} µs; {report.macs} MACs ({report.issued_macs} issued), "
         f"utilisation {report.utilisation:.1%}; DMA {format_bytes(report.dma_bytes)}"),
        f"roofline bound {report.roofline_cycles} cycles (per layer, the slower of its MACs at peak "
        f"and its inputs, weights and outputs over DMA) "
        f"(simulated / roofline = {report.roofline_ratio:.2f}); engine busy "
        + ", ".join(f"{e} {c}" for e, c in report.engine_busy.items()),
        "SRAM high-water: " + ", ".join(
            f"{b} {format_bytes(report.sram_high_water.get(b, 0))} / {format_bytes(cap)}"
            for b, cap in report.sram_capacity.items()),
    ]
    if not report.layers:
        lines.append("per-layer figures need a timeline: compile with npu_timeline=True and run again")
        return "\n".join(lines)
    layers = report.layers
    if top is not None:
        layers = sorted(layers, key=lambda f: -f.cycles)[:top]
        lines.append(f"top {len(layers)} of {len(report.layers)} layers by cycles")
    lines.append(f"{'layer':<32}{'op':<14}{'cycles':>10}{'µs':>9}{'load':>9}{'compute':>9}{'store':>9}"
                 f"{'MACs':>12}{'util':>7}{'DMA':>11}")
    cycle_us = 1e-3 / report.clock_ghz
    for f in layers:
        lines.append(f"{f.tag[:31]:<32}{f.op[:13]:<14}{f.cycles:>10}{f.cycles * cycle_us:>9.2f}"
                     f"{f.busy['load']:>9}{f.busy['compute']:>9}{f.busy['store']:>9}{f.macs:>12}"
                     f"{f.utilisation:>7.1%}{format_bytes(f.dma_bytes):>11}")
    return "\n".join(lines)
