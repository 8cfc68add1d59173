"""npu_sim's side of auto-tuning (:mod:`hetero.core.schedule.tune`): each convolution's tiling
as a trace of decisions, measured in simulated cycles.

A task is one tiling problem: a QConv or QMatMul after the emitter's rewrites, the DRAM
strides it reads and writes in its region, the machine and its SRAM slots
(:func:`~hetero.plugins.npu_sim.compiler.conv_plan.problem_key`), so the equal layers of
ResNet-50's bottlenecks are one task, and a layer whose input lies in another layout is
another. Its trace is one ``annotate`` instruction on the first layer's block whose
decisions are the :class:`~hetero.plugins.npu_sim.compiler.conv_plan.Tiling` fields
(``multi`` as 0/1) and whose ``choices`` attribute lists each field's legal values
(:func:`~hetero.plugins.npu_sim.compiler.conv_plan.tiling_options`, the lists the
analytic search walks), which the generic search space takes as the knobs' values.

npu_sim has no tensor-IR function to replay a trace on: :func:`replay` reads the tiling
back and refuses, with a ScheduleError naming the buffer, one that does not fit an SRAM
slot of the declared machine, or a field off its legal values. :func:`measure` compiles the
layer alone, its input and output laid out as in its region, with that tiling, and
simulates it on seeded random int8 inputs: the simulated cycles at the declared clock are
its seconds, the same on every run and every host.

The compile reads ``tuned_schedules`` (:func:`tuned_tilings`): a layer whose problem has a
tuned tiling that still fits is tiled so, any other as the analytic model chooses. The
partitioner's estimate keeps the analytic tiling: it plans before any record is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
import math

import numpy as np

from hetero.plugin import Graph, PluginError, ScheduleError, extract_subgraph
from hetero.plugin.schedule import BlockRef, Instruction, Trace, TuningTask, merge_tasks
from hetero.plugins.npu_sim.compiler import EMITTERS, layout
from hetero.plugins.npu_sim.compiler.builder import Loc, ProgramBuilder
from hetero.plugins.npu_sim.compiler.conv_plan import (
    SLOT_ORDER,
    ConvShape,
    Tiling,
    View,
    _overlapped,
    _step_costs,
    choose_tiling,
    footprint,
    misfit,
    problem_key,
    rewritten,
    slot_sizes,
    tiling_options,
)
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.program import Binding
from hetero.plugins.npu_sim.report import layer_work
from hetero.plugins.npu_sim.sim import simulate

#: The ``key`` attribute of the annotation that carries a tiling.
ANNOTATION = "npu_sim.tiling"
#: The decisions of that annotation, the :class:`Tiling` fields.
FIELDS = ("toh", "tow", "oct", "ck", "multi")
_MATRIX_OPS = ("QConv", "QMatMul")


@dataclass(frozen=True)
class TilingTask:
    """What a worker needs to measure a task: the layer alone (``graph``, one node, its
    weights copied in), the machine, whether the SRAM is double-buffered, the DRAM layouts
    of its input ``x`` and output ``y`` in its region, and the tiling problem (the rewritten
    ``shape``, its ``slots`` and ``taps``) its tilings are checked against."""

    graph: Graph
    config: NpuConfig
    double_buffer: bool
    x: Loc
    y: Loc
    shape: ConvShape
    slots: tuple[int, int, int, int]
    taps: int
    strides: tuple[tuple[int, ...], tuple[int, ...], int]


def tiling_trace(block: str, options: Mapping[str, list[int]], t: Tiling) -> Trace:
    """The trace of tiling ``t``: one annotation of ``block`` holding its fields as decisions and
    ``options`` as each decision's choices."""
    decisions = {name: int(getattr(t, name)) for name in FIELDS}
    attrs = {"key": ANNOTATION, "choices": {name: list(options[name]) for name in FIELDS}}
    return Trace((Instruction("annotate", (BlockRef(block),), attrs, decisions),))


def tiling_of(trace: Trace) -> Tiling:
    """The tiling ``trace`` holds; ScheduleError when it is not one :func:`tiling_trace` wrote."""
    found = [i for i in trace.instructions if i.kind == "annotate" and i.attrs.get("key") == ANNOTATION]
    if len(trace.instructions) != 1 or len(found) != 1:
        raise ScheduleError(f"an npu_sim trace is one annotate instruction with key {ANNOTATION!r}; this one has "
                            f"{len(trace.instructions)} instruction(s): re-tune with this hetero")
    decisions = found[0].decisions
    values = [decisions.get(name) for name in FIELDS]
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise ScheduleError(f"npu_sim tiling trace: decisions {dict(decisions)} must give integers {list(FIELDS)}")
    toh, tow, oct, ck, multi = values
    if multi not in (0, 1):
        raise ScheduleError(f"npu_sim tiling trace: multi must be 0 or 1, got {multi}")
    return Tiling(toh, tow, oct, ck, bool(multi))


def tasks(graph: Graph, config: NpuConfig, double_buffer: bool, backend: str) -> list[TuningTask]:
    """The distinct tiling problems of ``graph``'s QConv and QMatMul nodes, laid out as
    :func:`~hetero.plugins.npu_sim.compiler.lower_graph` lays them out, occurrences counted;
    each default trace holds the analytic tiling. A layer that fits no tiling (the compile
    refuses it too) has no task."""
    b = ProgramBuilder(config, double_buffer=double_buffer)
    b.locs.update(layout(graph, b.place))
    slots = slot_sizes(b)
    found = []
    for node in graph.nodes:
        if node.op not in _MATRIX_OPS:
            continue
        x, y = b.loc(node.inputs[0]), b.locs[node.output.name]
        s, xv, yv = rewritten(b, node, x, y)
        taps = xv.taps if isinstance(xv, View) else 1
        try:
            default = choose_tiling(b, node, s, xv.strides, yv.strides, taps)
        except PluginError:
            continue
        key = problem_key(config, slots, s, xv.strides, yv.strides, taps)
        payload = TilingTask(extract_subgraph(graph, [node], f"tune_{node.name}"), config, double_buffer,
                             x, y, s, slots, taps, (xv.strides, yv.strides, xv.tap_stride if taps > 1 else 0))
        trace = tiling_trace(node.name, tiling_options(config, s, taps), default)
        found.append(TuningTask(key, backend, f"{node.name} ({node.op}) {node.output.type}", 1,
                                2.0 * layer_work(node).macs, trace, payload))
    return merge_tasks(found)


def replay(task: TuningTask, trace: Trace) -> Tiling:
    """The tiling ``trace`` gives ``task``; ScheduleError naming the buffer it overflows or the
    field that is off its legal values."""
    payload: TilingTask = task.payload
    t = tiling_of(trace)
    problem = misfit(payload.config, payload.slots, payload.shape, t, payload.taps)
    if problem is not None:
        raise ScheduleError(f"npu_sim tiling {t} of {task.label}: {problem}")
    return t


def features(task: TuningTask, trace: Trace) -> list[float] | None:
    """What ``trace``'s tiling makes of the machine, alike for every task: log2 of the analytic
    model's cycles, steps, and a step's load and compute cycles and of all stores
    (:func:`~hetero.plugins.npu_sim.compiler.conv_plan._step_costs`, the formulas the
    default was chosen by, which a learned model can correct from simulations), the share
    of each SRAM slot the tile fills, the share of the array's columns and rows its
    channel tiles use, and the GEMM shape; None for a tiling that does not fit."""
    payload: TilingTask = task.payload
    try:
        t = replay(task, trace)
    except ScheduleError:
        return None
    cfg, s = payload.config, payload.shape
    xs, ys, tap_stride = payload.strides
    steps, load, compute, store = _step_costs(cfg, s, t, xs, ys, payload.taps, tap_stride)
    need = footprint(s, t)
    fill = [need[buf] / size for buf, size in zip(SLOT_ORDER, payload.slots)]
    cols = t.oct % cfg.array_cols or cfg.array_cols
    cost = [math.log2(1 + v) for v in (_overlapped(steps, load, compute, store), steps, load, compute, store)]
    return cost + fill + [cols / cfg.array_cols, t.ck / cfg.array_rows, float(t.multi)]


def _moved(loc: Loc, base: int) -> Loc:
    """``loc``'s layout in a block at ``base``."""
    return replace(loc, addr=base + loc.addr - loc.base)


def measure(task: TuningTask, trace: Trace, repeats: int, seed: int) -> tuple[float, list[np.ndarray]]:
    """The task's layer alone compiled with ``trace``'s tiling and simulated on int8 inputs
    drawn from ``seed``: its simulated seconds at the declared clock and its output. The
    simulation is exact and deterministic, so ``repeats`` changes nothing and one run serves."""
    del repeats  # every run simulates the same cycles
    payload: TilingTask = task.payload
    t = replay(task, trace)
    b = ProgramBuilder(payload.config, double_buffer=payload.double_buffer, tilings={task.key: t})
    node = payload.graph.nodes[0]
    x, y = node.inputs[0], node.output
    if x.data is None:
        b.locs[x.name] = _moved(payload.x, b.alloc(math.prod(payload.x.frame_shape)))
    b.locs[y.name] = y_loc = _moved(payload.y, b.alloc(math.prod(payload.y.frame_shape)))
    b.begin_layer(node.name)
    EMITTERS[node.op](b, node)
    inputs, arrays = (), {}
    if x.data is None:
        x_loc = b.locs[x.name]
        inputs = (Binding(x.name, x_loc.base, x_loc.physical_shape, "int8"),)
        rng = np.random.default_rng(seed)
        arrays = {x.name: rng.integers(-128, 128, x_loc.physical_shape, dtype=np.int8)}
    program = replace(b.finish([], []), inputs=inputs,
                      outputs=(Binding(y.name, y_loc.base, y_loc.physical_shape, "int8"),))
    result = simulate(program, payload.config, arrays)
    return payload.config.cycles_to_seconds(result.stats.cycles), [y_loc.extract(result.outputs[y.name])]


def tuned_tilings(tuned: Mapping[str, str]) -> dict[str, Tiling]:
    """The tiling per task key of the ``tuned_schedules`` option; a trace this hetero cannot
    read (a record of another version) is left out, so its layer keeps the analytic tiling."""
    found = {}
    for key, text in tuned.items():
        try:
            found[key] = tiling_of(Trace.from_json(text))
        except ScheduleError:
            continue
    return found


def machine(backend: str, version: str) -> dict[str, object]:
    """What a measurement holds for: npu_sim's simulator at this version, on any host (the
    simulated machine, its NpuConfig, is part of every task key)."""
    return {"backend": backend, "version": version, "host": "any: simulated cycles"}
