"""Measurement isolation (a crashing and a hanging candidate fail their trials only) and a
reproducible search with a fixed seed, through builders injected by the protocol."""

from __future__ import annotations



import hetero
from hetero.core.compiler import Session
from hetero.core.schedule.tune.measure import Measurer
from hetero.core.schedule.tune.search import TaskSearch
from hetero.core.schedule.tune.space import SearchSpace
from hetero.core.schedule.tune.tuner import extract_tasks

from tune_backends import TraceTimedBackend
from tune_nets import conv_net


def _head():
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    session = Session(["llvm_cpu"], options={"num_threads": 1, "layout": "nchw"})
    return next(t for _, t in extract_tasks(graph, session) if t.label.startswith("head"))


def _traces_with_lanes(task, backend, values):
    space = SearchSpace.from_trace(task.default_trace, lambda t: backend.tuning_replay(task, t))
    i = next(k for k, knob in enumerate(space.knobs) if len(knob.targets) == 2)
    return [space.trace(space.default[:i] + (v,) + space.default[i + 1:]) for v in values]


def test_a_crashing_and_a_hanging_candidate_fail_and_the_run_goes_on():
    backend = TraceTimedBackend(crash_at=2, hang_at=4)
    task = _head()
    traces = _traces_with_lanes(task, backend, [2, 5, 4, 10])
    measurer = Measurer(backend, timeout_s=2.0, repeats=1)
    try:
        results = measurer.measure(task, traces)
    finally:
        measurer.close()
    assert results[0].seconds is None and "died" in results[0].error
    assert results[2].seconds is None and "died" in results[2].error
    assert results[1].seconds is not None and results[3].seconds is not None
    assert results[1].error is None and results[3].error is None


def test_a_crash_inside_a_batch_fails_only_that_candidate():
    backend = TraceTimedBackend(crash_at=5)
    task = _head()
    measurer = Measurer(backend, batch=2, timeout_s=5.0, repeats=1)
    try:
        results = measurer.measure(task, _traces_with_lanes(task, backend, [2, 5, 10]))
    finally:
        measurer.close()
    assert [r.seconds is None for r in results] == [False, True, False]


def test_the_same_seed_gives_the_same_search():
    backend = TraceTimedBackend()
    task = _head()

    def run(seed: int) -> list:
        measurer = Measurer(backend, repeats=1)
        try:
            search = TaskSearch(task, backend, measurer, seed)
            search.default()
            return [(t.point, t.seconds) for t in search.run(6).trials]
        finally:
            measurer.close()

    first = run(3)
    assert len(first) == 6  # the head's whole space (1 x 6 points): the search stops when it is spent
    assert run(3) == first
    assert len({p for p, _ in first}) == len(first)  # no point measured twice


def test_confirmation_measures_the_default_and_the_fastest_again_and_picks_the_lowest_median():
    backend = TraceTimedBackend()
    task = _head()
    measurer = Measurer(backend, repeats=1)
    try:
        search = TaskSearch(task, backend, measurer, 0)
        search.default()
        search.run(6)
        result = search.confirm(2, 3)
    finally:
        measurer.close()
    points = [t.point for t in result.confirmations]
    assert len(points) == 2 * 4 and points[:4] == points[4:]  # the default and the 3 fastest, twice
    assert points[0] == search.space.default
    fastest = sorted(result.trials[1:], key=lambda t: t.seconds)[:3]
    assert set(points[1:4]) == {t.point for t in fastest}
    point, seconds = result.chosen
    assert seconds == min(result.median_seconds(p) for p in set(points))
