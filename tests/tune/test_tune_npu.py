"""npu_sim's tilings through the tuner: one task per tiling problem, legal values as the knobs',
no tile that overflows an SRAM slot, simulated cycles as the measurement, and a tuned compile
that moves the layer's cycles by what was measured while its outputs stay bit-identical."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest

import hetero
from hetero.core.compiler import Session
from hetero.core.schedule import Trace
from hetero.core.schedule.trace import BlockRef, Instruction
from hetero.core.schedule.tune.records import append_records, load_records, new_record
from hetero.core.schedule.tune.space import MAX_FACTOR, SearchSpace, _choices, valid_point
from hetero.core.schedule.tune.tuner import Budget, extract_tasks, tune
from hetero.errors import ScheduleError
from hetero.plugins.npu_sim.backend import NpuPart
from hetero.plugins.npu_sim.compiler.conv_plan import BUFFERS, SLOT_ORDER, Tiling, footprint, overflow, tiling_options
from hetero.plugins.npu_sim.report import build_report
from hetero.plugins.npu_sim.tuning import tiling_of, tiling_trace

from tune_nets import conv_net

TARGETS = ["npu_sim", "llvm_cpu"]


@pytest.fixture(scope="module")
def net():
    """The tuner's conv net, optimised, with two calibration inputs and a third to run."""
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, 8, 8, 8)).astype(np.float32)} for _ in range(3)]
    return graph, samples[:2], samples[2]


def _tasks(net, **options):
    graph, calibration, _ = net
    found = extract_tasks(graph, Session(TARGETS, quantize=calibration, options=options))
    return {t.label.split()[0]: (b, t) for b, t in found if b.name == "npu_sim"}


def _space(backend, task):
    return SearchSpace.from_trace(task.default_trace, lambda t: backend.tuning_replay(task, t))


def _run(net, **options):
    """Simulated cycles of the NPU region and of each of its layers, and the model's outputs."""
    graph, calibration, x = net
    exe = hetero.compile(graph, targets=TARGETS, quantize=calibration, npu_timeline=True, **options)
    outputs = exe.run(x)
    [part] = [p.part for p in exe.placements if isinstance(p.part, NpuPart)]
    report = build_report(part.program, part.config, part.last_stats, part.work)
    return part.last_stats.cycles, {f.tag: f.cycles for f in report.layers}, outputs, part.program


def test_one_task_per_tiling_problem_holding_the_analytic_tiling(net, tmp_path):
    tasks = _tasks(net)
    # conv1 and conv2 are equal 3x3 convolutions; both are tap-packed (8 channels x 3 taps in the
    # reduction), so they read the same scratch layout and are one tiling problem.
    assert set(tasks) == {"conv1_int8", "conv3_int8", "head_int8"}
    assert tasks["conv1_int8"][1].occurrences == 2 and tasks["conv3_int8"][1].occurrences == 1
    # The default traces are the analytic choice: compiling with them as records changes nothing.
    path = tmp_path / "defaults.jsonl"
    append_records(path, [new_record(t.key, b.name, t.default_trace.to_json(), 1.0, b.tuning_machine(), t.label)
                          for b, t in tasks.values()])
    assert _run(net, records=path)[3] == _run(net)[3]


def test_the_knobs_take_the_legal_values_the_analytic_search_walks(net):
    backend, task = _tasks(net)["conv3_int8"]
    s = task.payload.shape
    options = tiling_options(task.payload.config, s)
    space = _space(backend, task)
    assert {k.name.rsplit(" ", 1)[-1]: list(k.values) for k in space.knobs} == \
        {name: sorted(values) for name, values in options.items()}
    # An 8x8 output: balanced row tiles and halvings of the width; 16 channels on a 32-wide array.
    assert options["toh"] == [8, 4, 3, 2, 1] and options["tow"] == [8, 4, 2, 1]
    assert options["oct"] == [16, 8, 4, 2, 1] and options["ck"] == [8, 4, 2, 1]


def test_space_uses_an_instructions_choices_and_leaves_other_decisions_generic():
    ins = Instruction("annotate", (BlockRef("b"),), {"choices": {"a": [7, 3, 5], "flag": [0, 1]}},
                      {"a": 5, "flag": 0, "n": 4})
    space = SearchSpace.from_trace(Trace((ins,)), lambda t: None)
    values = {k.name: k.values for k in space.knobs}
    assert values == {"annotate block b: a": (3, 5, 7), "annotate block b: flag": (0, 1),
                      "annotate block b: n": _choices(MAX_FACTOR, 4)}
    # Without choices (llvm_cpu's traces) a decision keeps the generic values, and 0 is no knob.
    plain = SearchSpace.from_trace(Trace((Instruction("annotate", (BlockRef("b"),), {}, {"n": 4, "z": 0}),)),
                                   lambda t: None)
    assert [(k.name, k.values) for k in plain.knobs] == [("annotate block b: n", _choices(MAX_FACTOR, 4))]


def test_replay_rejects_a_tile_that_overflows_a_buffer_naming_it(net):
    # 4 KiB of SRAM: double-buffered slots of 512 bytes (inp, out), 1 KiB (wgt), 128 accumulators.
    backend, task = _tasks(net, npu_sram_kib=4)["conv3_int8"]
    payload = task.payload
    options = tiling_options(payload.config, payload.shape)
    rejected = set()
    for toh, tow, oct, ck, multi in itertools.product(*options.values()):
        t = Tiling(toh, tow, oct, ck, bool(multi))
        buf = overflow(payload.slots, payload.shape, t)
        if buf is not None and buf not in rejected:
            rejected.add(buf)
            with pytest.raises(ScheduleError, match=f"overflows the {buf} buffer"):
                backend.tuning_replay(task, tiling_trace("conv3_int8", options, t))
    assert rejected == {"out", "acc"}  # a whole 8x8x16 tile holds 1024 results and accumulators
    # Every buffer is checked: the default tiling, on a machine with one slot a byte short of it.
    need = footprint(payload.shape, tiling_of(task.default_trace))
    for buf in BUFFERS:
        slots = tuple(need[b] - 1 if b == buf else 2**30 for b in SLOT_ORDER)
        short = replace(task, payload=replace(payload, slots=slots))
        with pytest.raises(ScheduleError, match=f"overflows the {buf} buffer: it needs {need[buf]} elements"):
            backend.tuning_replay(short, task.default_trace)
    # The search never proposes such a tile: every point it keeps fits the real machine.
    space = _space(backend, task)
    replay = lambda t: backend.tuning_replay(task, t)  # noqa: E731
    kept = [p for p in itertools.product(*(k.values for k in space.knobs)) if valid_point(space, p, replay)]
    assert kept and all(overflow(payload.slots, payload.shape, tiling_of(space.trace(p))) is None for p in kept)


def test_replay_rejects_a_value_off_its_legal_list(net):
    backend, task = _tasks(net)["conv3_int8"]
    off = task.default_trace.with_decisions({0: {"toh": 5}})  # 8 rows: tiles of 8, 4, 3, 2 or 1
    with pytest.raises(ScheduleError, match="toh=5 is not one of its values"):
        backend.tuning_replay(task, off)


def _other_tiling(backend, task):
    """A legal tiling of ``task`` other than the default with other simulated cycles: its trace,
    its measurement and the default's."""
    space = _space(backend, task)
    default = backend.tuning_measure(task, task.default_trace, 1, 0)
    for point in sorted(itertools.product(*(k.values for k in space.knobs))):
        trace = space.trace(point)
        if point != space.default and valid_point(space, point, lambda t: backend.tuning_replay(task, t)):
            measured = backend.tuning_measure(task, trace, 1, 0)
            if measured[0] != default[0]:
                return trace, measured, default
    raise AssertionError("no other tiling")


def test_a_tuned_tiling_moves_the_layers_cycles_by_the_measurement_and_keeps_the_outputs(net, tmp_path):
    backend, task = _tasks(net)["conv3_int8"]
    trace, (seconds, outputs), (default_seconds, default_outputs) = _other_tiling(backend, task)
    np.testing.assert_array_equal(outputs[0], default_outputs[0])  # what the tuner checks
    path = tmp_path / "r.jsonl"
    append_records(path, [new_record(task.key, backend.name, trace.to_json(), seconds, backend.tuning_machine(),
                                     task.label)])
    cycles, layers, want, _ = _run(net)
    tuned_cycles, tuned_layers, got, _ = _run(net, records=path)
    clock = task.payload.config.clock_ghz * 1e9
    measured = round(seconds * clock) - round(default_seconds * clock)
    # The layer is fenced by DRAM barriers before and after, so its span, and the region's,
    # move by exactly the cycles its measurement alone moved: the simulation is exact.
    assert tuned_layers["conv3_int8"] - layers["conv3_int8"] == measured != 0
    assert tuned_cycles - cycles == measured
    assert {k: v for k, v in tuned_layers.items() if k != "conv3_int8"} == \
        {k: v for k, v in layers.items() if k != "conv3_int8"}
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_a_tuned_tiling_that_no_longer_fits_leaves_the_analytic_one(net, tmp_path):
    backend, task = _tasks(net)["conv3_int8"]
    options = tiling_options(task.payload.config, task.payload.shape)
    too_big = tiling_trace("conv3_int8", options, Tiling(8, 8, 16, 8, True))
    path = tmp_path / "r.jsonl"
    append_records(path, [new_record(task.key, backend.name, too_big.to_json(), 1e-9, backend.tuning_machine(),
                                     task.label)])
    # Fits the default 512 KiB machine, not 4 KiB: that compile must keep the analytic tiling.
    small = _tasks(net, npu_sram_kib=4)["conv3_int8"][1]
    small_path = tmp_path / "small.jsonl"
    append_records(small_path, [new_record(small.key, backend.name, too_big.to_json(), 1e-9,
                                           backend.tuning_machine(), small.label)])
    with pytest.raises(ScheduleError, match="overflows"):
        backend.tuning_replay(small, too_big)
    assert _run(net, records=small_path, npu_sram_kib=4)[3] == _run(net, npu_sram_kib=4)[3]


def test_the_search_with_a_fixed_seed_is_reproducible(net, tmp_path):
    tasks = list(_tasks(net).values())

    def search(path):
        results = tune(tasks, Budget(trials=12), path, seed=5, repeats=1, confirm_rounds=0)
        return [[(t.point, t.seconds) for t in r.trials] for r in results]

    first, second = search(tmp_path / "a.jsonl"), search(tmp_path / "b.jsonl")
    assert first == second and sum(len(trials) for trials in first) == 12 + len(tasks)
    records = [(r.task, r.trace, r.seconds) for r in load_records(tmp_path / "a.jsonl")]
    assert records == [(r.task, r.trace, r.seconds) for r in load_records(tmp_path / "b.jsonl")]
    # Simulated cycles hold on any host: the records' machine names none.
    assert all("host" in r.machine and "cpu" not in r.machine for r in load_records(tmp_path / "a.jsonl"))


def test_features_are_alike_for_every_task_and_none_for_a_tile_that_does_not_fit(net):
    tasks = _tasks(net)
    rows = [backend.tuning_features(task, task.default_trace) for backend, task in tasks.values()]
    assert len({len(row) for row in rows}) == 1 and all(np.isfinite(row).all() for row in rows)
    backend, task = tasks["conv3_int8"]
    assert backend.tuning_features(task, task.default_trace.with_decisions({0: {"toh": 5}})) is None
    # The first feature is log2 of the analytic cycles: a tile of one output row costs more.
    one_row = task.default_trace.with_decisions({0: {"toh": 1}})
    assert backend.tuning_features(task, one_row)[0] > backend.tuning_features(task, task.default_trace)[0]
