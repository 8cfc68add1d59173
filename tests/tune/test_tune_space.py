"""The search space of a default trace: coupled decisions share one knob; samples replay."""

from __future__ import annotations

import random

import hetero
from hetero.core.compiler import Session
from hetero.errors import ScheduleError
from hetero.core.schedule.tune.space import SearchSpace, valid_point
from hetero.core.schedule.tune.tuner import extract_tasks

import pytest

from tune_nets import conv_net


def _task(prefix: str):
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    session = Session(["llvm_cpu"], options={"num_threads": 1, "layout": "nchw"})
    return next((b, t) for b, t in extract_tasks(graph, session) if t.label.startswith(prefix))




def test_a_changed_lane_factor_changes_the_pack_factor_with_it():
    backend, task = _task("head")  # MatMul: its lane split and the weight's pack
    replay = lambda t: backend.tuning_replay(task, t)  # noqa: E731
    space = SearchSpace.from_trace(task.default_trace, replay)
    pack = next(k for k, i in enumerate(task.default_trace.instructions) if i.kind == "pack")
    coupled = [knob for knob in space.knobs if any(target[0] == pack for target in knob.targets)]
    assert len(coupled) == 1 and len(coupled[0].targets) == 2  # the split's factor and the pack's
    knob = coupled[0]
    split = next(t[0] for t in knob.targets if t[0] != pack)
    i = space.knobs.index(knob)
    for value in knob.values:
        point = space.default[:i] + (value,) + space.default[i + 1:]
        trace = space.trace(point)
        assert trace.instructions[pack].decisions["factor"] == value
        assert trace.instructions[split].decisions["factors"][-1] == value
        replay(trace)
    # The lane split alone, without the pack, does not replay: that is why they are one knob.
    other = next(v for v in knob.values if v != knob.default)
    alone = task.default_trace.with_decisions({split: {"factors": [None, other]}})
    with pytest.raises(ScheduleError):
        replay(alone)


def test_every_sampled_candidate_that_is_kept_replays():
    for prefix in ("conv1", "conv3", "head"):
        backend, task = _task(prefix)
        replay = lambda t: backend.tuning_replay(task, t)  # noqa: E731
        space = SearchSpace.from_trace(task.default_trace, replay)
        rng = random.Random(0)
        kept = [p for p in (space.sample(rng) for _ in range(20)) if valid_point(space, p, replay)]
        assert kept, prefix
        for point in kept:
            replay(space.trace(point))
        assert space.trace(space.default) == task.default_trace


def _matmul_task(n: int):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "mm",
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, [n, n]) for v in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = Session(["llvm_cpu"], options={"num_threads": 1})
    [(backend, task)] = extract_tasks(hetero.optimize(hetero.load_onnx(model)), session)
    return backend, task


def test_a_register_tile_larger_than_the_register_file_is_rejected_before_building():
    from hetero.plugins.llvm_cpu.host import host

    backend, task = _matmul_task(128)
    replay = lambda t: backend.tuning_replay(task, t)  # noqa: E731
    space = SearchSpace.from_trace(task.default_trace, replay)
    rows, lanes = space.knobs  # the row split's factor; the lane split's, tied to the pack
    cpu = host()
    # 64 x 64 float32 accumulators are 16 KiB: more than any vector register file holds.
    too_big = (64, 64)
    assert 64 * 64 * 4 * 8 > cpu.vector_registers * cpu.vector_bits
    assert not valid_point(space, too_big, replay)
    with pytest.raises(ScheduleError, match="vector registers"):
        replay(space.trace(too_big))
    # The host's own tile fits, and so does a smaller one.
    assert valid_point(space, space.default, replay)
    assert valid_point(space, (2, lanes.default), replay)
