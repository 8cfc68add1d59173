"""Compiling with records: the tuned trace is the kernel's, unseen tasks keep their default,
records of another machine only when asked; the numbers match the default compile."""

from __future__ import annotations

import numpy as np

import hetero
from hetero.core.compiler import Session
from hetero.core.schedule.tune.records import append_records, new_record
from hetero.core.schedule.tune.space import SearchSpace, valid_point
from hetero.core.schedule.tune.tuner import extract_tasks

from tune_nets import conv_net

OPTIONS = {"num_threads": 1, "layout": "nchw"}


def _tuned_record(machine_of=None):
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    backend, task = next((b, t) for b, t in extract_tasks(graph, Session(["llvm_cpu"], options=OPTIONS))
                         if t.label.startswith("head"))
    replay = lambda t: backend.tuning_replay(task, t)  # noqa: E731
    space = SearchSpace.from_trace(task.default_trace, replay)
    i = next(k for k, knob in enumerate(space.knobs) if len(knob.targets) == 2)
    value = next(v for v in space.knobs[i].values if v != space.knobs[i].default and v > 1)
    point = space.default[:i] + (value,) + space.default[i + 1:]
    assert valid_point(space, point, replay)
    trace = space.trace(point)
    machine = backend.tuning_machine() if machine_of is None else machine_of
    return new_record(task.key, backend.name, trace.to_json(), 1e-6, machine, task.label), trace


def _traces(exe):
    return [s.kernel.trace for p in exe.placements for s in p.part.steps if s.kernel is not None]


def test_compile_with_records_uses_the_tuned_trace_and_keeps_the_numbers(tmp_path):
    record, trace = _tuned_record()
    path = tmp_path / "r.jsonl"
    append_records(path, [record])
    x = {"x": np.random.default_rng(1).standard_normal((1, 8, 8, 8)).astype(np.float32)}
    default = hetero.compile(conv_net(), targets=["llvm_cpu"], **OPTIONS)
    tuned = hetero.compile(conv_net(), targets=["llvm_cpu"], records=path, **OPTIONS)
    assert trace in _traces(tuned) and trace not in _traces(default)
    # Only the head was tuned: the other kernels keep their default traces.
    assert sum(a != b for a, b in zip(_traces(default), _traces(tuned))) == 1
    want, got = default.run(x)["y"], tuned.run(x)["y"]
    # Reordering the head's 1024-term float32 sums moves each by at most about
    # 1024 * 2**-24 times the sum of its terms' magnitudes; 1e-4 of the largest output
    # is above that for these weights (0.2-scaled normals) and far below a wrong result.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * float(np.abs(want).max()))


def test_records_of_another_machine_only_when_asked(tmp_path):
    record, trace = _tuned_record({"name": "another-cpu"})
    path = tmp_path / "r.jsonl"
    append_records(path, [record])
    here = hetero.compile(conv_net(), targets=["llvm_cpu"], records=path, **OPTIONS)
    assert trace not in _traces(here)
    anywhere = hetero.compile(conv_net(), targets=["llvm_cpu"], records=path, records_any_machine=True, **OPTIONS)
    assert trace in _traces(anywhere)
