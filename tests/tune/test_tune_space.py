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
