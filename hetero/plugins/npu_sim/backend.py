"""The npu_sim backend: int8 regions compiled to npu_sim programs and run on the simulator.

It declares the device from the :class:`NpuConfig` its target's ``npu_*`` options
describe (the default preset unless they change it): its memory hierarchy, its peak
throughput (2 · rows · cols · clock), and the int8 ops the compiler lowers, so the
partitioner plans for the machine it compiles for. :meth:`NpuSimBackend.supports`
refuses, with a reason, float nodes, non-constant weights and anything the compiler
cannot do (a chain of support checks, :data:`SUPPORTS`); :meth:`NpuSimBackend.compile`
lowers for the target's config and returns an :class:`NpuPart` whose ``run`` simulates
the program exactly, and whose ``report`` and ``timeline_html`` show what the last run
cost. With a dump folder it writes the stages it has, in the layout every backend
shares (:class:`~hetero.plugin.parts.StageDump`): ``graph/`` (each node),
``code/program.asm`` (the program's assembly) and ``report/program.txt`` and
``report/program.html`` (the report and timeline of one simulated run on zero inputs).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from hetero.plugin import (
    Backend, Declarations, Graph, Node, NumpyDevice, Option, PluginError, Support, Target, chain, check,
)
from hetero.plugin.parts import StageDump
from hetero.plugin.schedule import TUNED_OPTION, Trace, TuningTask
from hetero.plugins.npu_sim import tuning
from hetero.plugins.npu_sim.asm import format_program
from hetero.plugins.npu_sim.compiler import EMITTERS, lower_graph
from hetero.plugins.npu_sim.compiler.builder import Loc
from hetero.plugins.npu_sim.config import PRESETS, NpuConfig
from hetero.plugins.npu_sim.cycles import SimStats
from hetero.plugins.npu_sim.estimate import region_cycles
from hetero.plugins.npu_sim.program import Binding, Program
from hetero.plugins.npu_sim.report import LayerWork, build_report, format_report, layer_work
from hetero.plugins.npu_sim.sim import simulate
from hetero.plugins.npu_sim.timeline import to_html

_FLOAT_REASON = "npu_sim computes int8 only: quantise the model first (hetero.compile(..., quantize=...) or --quantize)"
_ARTIFACT = struct.Struct("<4sI")
_MAGIC = b"NPUA"
_WINDOW_OPS = {"QConv", "QAveragePool", "MaxPool"}


class NpuPart:
    """A compiled npu_sim region: ``run`` simulates its program; ``last_stats`` keeps the last run's cost.

    Its values live on its ``device``, the simulated NPU's DRAM: numpy arrays, but a
    memory of their own, so the executable copies values in and out as on the device.

    ``work`` maps the region's node names (the instructions' tags) to what each
    asks of the machine (:func:`~hetero.plugins.npu_sim.report.layer_work`), for the report. With ``record_timeline`` set (the ``npu_timeline`` option) each run
    also records every instruction's place in the schedule, which :meth:`report`
    breaks down per layer and :meth:`timeline_html` draws; plain runs skip that
    bookkeeping.
    """

    device = NumpyDevice("npu_sim")

    def __init__(self, program: Program, config: NpuConfig, locs: Mapping[str, Loc],
                 work: Mapping[str, LayerWork] | None = None, *, record_timeline: bool = False) -> None:
        self.program = program
        self.config = config
        self.locs = dict(locs)
        self.work = dict(work or {})
        self.record_timeline = record_timeline
        self.inputs = tuple(b.name for b in program.inputs)
        self.outputs = tuple(b.name for b in program.outputs)
        self.last_stats: SimStats | None = None

    @property
    def artifact(self) -> bytes:
        """The config, the DRAM layout of every computed value, then the program's bytes."""
        meta = {"config": asdict(self.config),
                "locs": {name: [loc.addr, list(loc.shape), list(loc.perm), list(loc.frame_shape), list(loc.start)]
                         for name, loc in self.locs.items()},
                "work": {tag: [w.op, w.macs, w.bytes] for tag, w in self.work.items()},
                "timeline": self.record_timeline}
        blob = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
        return _ARTIFACT.pack(_MAGIC, len(blob)) + blob + self.program.to_bytes()

    @classmethod
    def from_artifact(cls, artifact: bytes) -> NpuPart:
        """The part whose :attr:`artifact` is ``artifact``."""
        if len(artifact) < _ARTIFACT.size or artifact[:4] != _MAGIC:
            raise PluginError("npu_sim: not an npu_sim artifact (bad magic); recompile the model")
        _, length = _ARTIFACT.unpack_from(artifact)
        if _ARTIFACT.size + length > len(artifact):
            raise PluginError(f"npu_sim: artifact truncated ({len(artifact)} bytes, its header declares "
                              f"{length} of metadata); recompile the model")
        try:
            meta = json.loads(artifact[_ARTIFACT.size:_ARTIFACT.size + length])
            # Artifacts written before Concat views carry [addr, shape, perm] only: whole blocks.
            locs = {name: Loc(addr, tuple(shape), tuple(perm), 1, *(tuple(v) for v in view))
                    for name, (addr, shape, perm, *view) in meta["locs"].items()}
            work = {tag: LayerWork(op, macs, size) for tag, (op, macs, size) in meta["work"].items()}
            config, timeline = NpuConfig(**meta["config"]), bool(meta["timeline"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise PluginError(f"npu_sim: the artifact's metadata is malformed ({type(exc).__name__}: {exc}); "
                              "recompile the model") from None
        program = Program.from_bytes(artifact[_ARTIFACT.size + length:])
        return cls(program, config, locs, work, record_timeline=timeline)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Simulate the program on ``inputs`` (by name); its outputs by name."""
        result = simulate(self.program, self.config, {name: inputs[name] for name in self.inputs},
                          timeline=self.record_timeline)
        self.last_stats = result.stats
        return result.outputs

    def report(self) -> str:
        """The last run's cost as text: totals, roofline, SRAM use and, with a timeline, per-layer rows."""
        if self.last_stats is None:
            return "npu_sim: not run yet; call run() first"
        return format_report(build_report(self.program, self.config, self.last_stats, self.work))

    def timeline_html(self) -> str:
        """The last run's execution timeline as a self-contained HTML page."""
        stats = self.last_stats
        if stats is None or not stats.timeline:
            raise PluginError("npu_sim: no timeline recorded; compile with npu_timeline=True (or set the part's "
                              "record_timeline) and run it first")
        report = build_report(self.program, self.config, stats, self.work)
        return to_html(report, stats.timeline, title=f"npu_sim timeline ({len(self.program.instrs)} instructions)")

    def run_intermediates(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The outputs and every node's output as it lies in DRAM after the run, by value name."""
        extra = tuple(Binding(name, loc.base, loc.physical_shape, "int8") for name, loc in self.locs.items()
                      if name not in self.outputs)
        program = replace(self.program, outputs=self.program.outputs + extra)
        result = simulate(program, self.config, {name: inputs[name] for name in self.inputs})
        self.last_stats = result.stats
        values = dict(result.outputs)
        for name, loc in self.locs.items():
            if name not in self.outputs:
                values[name] = loc.extract(values[name])
        return values


#: Float ops whose quantised units become integer ops this backend runs.
_QUANTISABLE = frozenset({"Conv", "Gemm", "MatMul", "Relu", "Clip", "Add", "Mul", "AveragePool",
                          "GlobalAveragePool"})


#: The compile options npu_sim reads: the device (preset, then changes to it) and the build.
OPTIONS = (
    Option("npu_preset", "the device to start from (default edge-512k)", types=(str,), choices=tuple(PRESETS)),
    Option("npu_sram_kib", "total scratchpad in KiB, split 1:2:1 into input, weight and output buffers "
                           "(the accumulator gets an eighth)", types=(int,)),
    Option("npu_acc_kib", "accumulator size in KiB", types=(int,)),
    Option("npu_array", "systolic array size: 'ROWSxCOLS', an integer, or (rows, cols)",
           types=(str, int, tuple, list)),
    Option("npu_clock_ghz", "clock in GHz", types=(float,)),
    Option("npu_dma_gbps", "DMA bandwidth in GB/s (rounded to whole bytes per cycle)", types=(float,)),
    Option("npu_dma_latency_cycles", "cycles before a DMA transfer's first byte", types=(int,)),
    Option("npu_vector_lanes", "lanes of the vector unit", types=(int,)),
    Option("npu_double_buffer", "split the SRAM buffers to overlap DMA with compute", default=True,
           types=(bool,)),
    Option("npu_timeline", "make every run record the timeline the report and timeline_html draw",
           default=False, types=(bool,)),
    Option(TUNED_OPTION, "tuned tiling per convolution: {task key: trace JSON}; hetero.compile(records=FILE) "
                         "fills it from `hetero tune` records", types=(dict,)),
)
#: The options that describe the machine (the others shape the build).
_DEVICE_OPTIONS = frozenset(o.name for o in OPTIONS) - {"npu_double_buffer", "npu_timeline", TUNED_OPTION}


class NpuSimBackend(Backend):
    """The simulated NPU; its declarations follow the ``npu_*`` options of each target."""

    name = "npu_sim"
    version = "0.1"
    device_kind = "npu"
    supported_ops = frozenset(EMITTERS)
    options = OPTIONS

    def __init__(self, config: NpuConfig | None = None) -> None:
        self.config = config or NpuConfig.from_options({})
        self.memory = self.config.memory_hierarchy()
        self.peak_gflops = self.config.peak_gops

    def declare(self, options: Mapping[str, Any]) -> Declarations:
        """The machine the ``npu_*`` options describe (:meth:`NpuConfig.from_options`): its
        memory hierarchy and peak throughput; the config is the target's ``settings``, so
        ``estimate`` and ``compile`` read the same one. With no device option set, the
        backend's own config (the edge-512k preset unless it was built with another)."""
        given = {k: v for k, v in options.items() if k in _DEVICE_OPTIONS and v is not None}
        config = NpuConfig.from_options(given) if given else self.config
        return Declarations(config.memory_hierarchy(), config.peak_gops, tuple(self.patterns), settings=config)

    def supports(self, node: Node, target: Target) -> Support:
        """Int8 nodes the compiler lowers (:data:`SUPPORTS`); every refusal says why."""
        return SUPPORTS(node, target)

    def estimate(self, subgraph: Graph, target: Target) -> float:
        """Seconds ``subgraph`` would take at the target's clock, by npu_sim's analytic cost model.

        :func:`~hetero.plugins.npu_sim.estimate.region_cycles` costs each node as the compiler
        would tile it for the target's config, without compiling or simulating anything. A
        region the compiler could not fit in that SRAM costs infinitely long, so the
        partitioner never prefers it.
        """
        config: NpuConfig = target.settings
        try:
            cycles = region_cycles(subgraph, config)
        except PluginError:
            return math.inf
        return config.cycles_to_seconds(cycles)

    def compile(self, subgraph: Graph, target: Target) -> NpuPart:
        """Lower ``subgraph`` for the target's NpuConfig.

        ``npu_double_buffer=False`` compiles without splitting the SRAM buffers;
        ``npu_timeline=True`` makes every run record the timeline the part's report
        and ``timeline_html`` break down; a layer with a tuned tiling in ``tuned_schedules``
        that still fits is tiled so (:mod:`~hetero.plugins.npu_sim.tuning`).
        """
        config: NpuConfig = target.settings
        tilings = tuning.tuned_tilings(target.options[TUNED_OPTION] or {})
        lowered = lower_graph(subgraph, config, double_buffer=target.options["npu_double_buffer"], tilings=tilings)
        part = NpuPart(lowered.program, config, lowered.locs, {n.name: layer_work(n) for n in subgraph.nodes},
                       record_timeline=target.options["npu_timeline"])
        if target.dump_dir is not None:
            _dump(StageDump(target.dump_dir), subgraph, part)
        return part

    def load_artifact(self, artifact: bytes) -> NpuPart:
        """Rebuild the part whose artifact is ``artifact``."""
        return NpuPart.from_artifact(artifact)

    def tuning_tasks(self, subgraph: Graph, target: Target) -> list[TuningTask]:
        """One task per distinct convolution tiling problem (:func:`~hetero.plugins.npu_sim.tuning.tasks`)."""
        return tuning.tasks(subgraph, target.settings, target.options["npu_double_buffer"], self.name)

    def tuning_replay(self, task: TuningTask, trace: Trace) -> None:
        """Refuse a tiling that overflows an SRAM slot or leaves its legal values."""
        tuning.replay(task, trace)

    def tuning_measure(self, task: TuningTask, trace: Trace, repeats: int,
                       seed: int) -> tuple[float, list[np.ndarray]]:
        """The layer's simulated seconds with ``trace``'s tiling, and its output."""
        return tuning.measure(task, trace, repeats, seed)

    def tuning_features(self, task: TuningTask, trace: Trace) -> list[float] | None:
        """The analytic cost model's figures and the tile's use of the SRAM and the array."""
        return tuning.features(task, trace)

    def tuning_machine(self) -> dict[str, Any]:
        """The simulator, not the host: records transfer across hosts (the simulated machine
        is in every task key)."""
        return tuning.machine(self.name, self.version)


def _dump(dump: StageDump, graph: Graph, part: NpuPart) -> None:
    """npu_sim's stages: each node, the program's assembly, and the report and timeline of
    one run on zero inputs (the cycles do not depend on the values)."""
    for node in graph.nodes:
        dump.nodes(node.name, [node])
    program = part.program
    dump.write("code", "program", "asm", format_program(program.instrs))
    zeros = {b.name: np.zeros(b.shape, b.dtype) for b in program.inputs}
    stats = simulate(program, part.config, zeros, timeline=True).stats
    report = build_report(program, part.config, stats, part.work)
    dump.write("report", "program", "txt", format_report(report))
    dump.write("report", "program", "html", to_html(report, stats.timeline,
                                                    title=f"npu_sim timeline ({len(program.instrs)} instructions)"))


def _taken(node: Node, target: Target) -> Support:
    """Whether the compiler lowers ``node``'s op, and if not, what to do instead."""
    if node.op in EMITTERS:
        return Support.yes()
    if node.op in ("QuantizeLinear", "DequantizeLinear"):
        return Support.no(f"npu_sim computes in int8 between its regions' boundaries; the {node.op} at a boundary "
                          "runs on the host")
    if node.op in _QUANTISABLE:
        return Support.no(_FLOAT_REASON)
    return Support.no(f"npu_sim does not implement {node.op} (`hetero plugins npu_sim` lists what it takes)")


def _constant_weights(node: Node, target: Target) -> Support:
    """QConv's and QMatMul's weights and bias are constants (packed into tile order)."""
    if node.op not in ("QConv", "QMatMul"):
        return Support.yes()
    weight = node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if weight.data is None or (bias is not None and bias.data is None):
        return Support.no(f"npu_sim needs constant weights and bias for {node.op} (it pre-packs them into its tile "
                          f"order); {weight.name} is computed at run time")
    return Support.yes()


def _int8_activations(node: Node, target: Target) -> Support:
    data = node.inputs[0]
    if data.dtype != np.int8 or any(v.dtype != np.int8 for v in node.outputs):
        why = " (an int32 Requantize input has no int8 path on the NPU)" if node.op == "Requantize" else ""
        return Support.no(f"npu_sim takes int8 activations only; {node.op} {node.name} reads {data.dtype}{why}")
    return Support.yes()


def _windows(node: Node, target: Target) -> Support:
    """Convolutions and pools are 2-D; pools have dilation 1."""
    if node.op not in _WINDOW_OPS:
        return Support.yes()
    data = node.inputs[0]
    if len(data.shape) != 4:
        return Support.no(f"npu_sim runs 2-D {node.op} only (NCHW input); this one is {len(data.shape) - 2}-D")
    if node.op != "QConv" and any(d != 1 for d in node.attrs.get("dilations") or (1, 1)):
        return Support.no(f"npu_sim pools with dilation 1 only; {node.name} has {node.attrs['dilations']}")
    return Support.yes()


def _qadd_fits_int32(node: Node, target: Target) -> bool:
    a = node.attrs
    return node.op != "QAdd" or 255 * (abs(a["a_multiplier"]) + abs(a["b_multiplier"])) < 2**31


#: What npu_sim takes: int8 nodes its compiler lowers, each refusal with its reason.
SUPPORTS = chain(
    _taken,
    check(lambda node, _: not any(np.dtype(v.dtype).kind == "f" for v in (*node.inputs, *node.outputs)
                                  if v is not None), _FLOAT_REASON),
    _constant_weights,
    _int8_activations,
    check(lambda node, _: all(len(v.shape) <= 4 for v in (*node.inputs, *node.outputs) if v is not None),
          "npu_sim moves tensors of rank 4 or less; its DMA boxes are 4-D"),
    check(lambda node, _: len(node.outputs) == 1,
          lambda node: f"npu_sim's {node.op} produces one output; the node asks for {len(node.outputs)}"),
    _windows,
    check(_qadd_fits_int32,
          lambda node: "npu_sim adds in int32 lanes: QAdd needs 15-bit multipliers (the integer spec), got "
                       f"{node.attrs['a_multiplier']} and {node.attrs['b_multiplier']}, whose terms overflow int32"),
)
