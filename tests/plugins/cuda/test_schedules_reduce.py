"""The cuda backend's cross-thread reduction schedule: long reductions get a block of
threads an output element, a shared-memory tree and the first thread's store; short ones
keep the default schedule. Meaning is checked with the tensor-IR interpreter against the
unscheduled lowering (exact for max and min, within float32 reassociation for sums),
and the kernels are assembled by ptxas for sm_80 and sm_90 (no GPU runs them here).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hetero

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import Allocate, Block, For, ForKind, PrimFunc, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.core.lower import lower_node
from hetero.core.schedule import Trace
from hetero.plugins.cuda.build import build_function, build_kernel, split_stages
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda.ptxas import INSTALL_HINT, find_ptxas
from hetero.plugins.cuda.schedules import default_schedule
from hetero.plugins.cuda.schedules_reduce import MIN_REDUCTION, cross_thread_reduction, plan_reduction
from hetero.core.schedule import Schedule

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)
EPS32 = float(np.finfo(np.float32).eps)


def _lowered(op: str, shape: tuple[int, ...], **attrs: object) -> tuple[object, PrimFunc]:
    b = GraphBuilder("g")
    b.output(getattr(b, op)(b.input("x", shape), name="n", **attrs))
    graph = b.build()
    return graph, lower_node(graph.node("n"))


def _bound(func: PrimFunc) -> dict[str, int]:
    return {s.thread_axis: s.extent for s in walk(func.body) if isinstance(s, For) and s.kind is ForKind.THREAD_BINDING}


def _shared(func: PrimFunc) -> list[Allocate]:
    return [s for s in walk(func.body) if isinstance(s, Allocate) and s.buffer.scope == "shared"]


def _run_both(func: PrimFunc, scheduled: PrimFunc, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The output of the unscheduled lowering and of the scheduled function, in the interpreter."""
    out = func.params[-1]
    memory = {"x": x, out.name: np.zeros(out.shape, out.dtype)}
    return run_func(func, memory)[out.name], run_func(scheduled, memory)[out.name]


def _within_reassociation(got: np.ndarray, want: np.ndarray, x: np.ndarray, axes: tuple[int, ...],
                          terms: int, scale: float = 1.0) -> None:
    """Each sum within float32's reassociation bound: a sum of n terms computed in any
    order is within (n - 1) * u * sum|x| of the exact one (u = eps / 2), so two orders
    differ by at most n * eps * sum|x| (scaled by the mean's 1/n where there is one)."""
    bound = terms * EPS32 * np.abs(x.astype(np.float64)).sum(axis=axes).reshape(got.shape) * scale
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


REDUCE_CASES = [
    ("ReduceSum", (4, 5000), {"axes": [1], "keepdims": 0}),
    ("ReduceMax", (3, 4097), {"axes": [1], "keepdims": 1}),
    ("ReduceMean", (2, 64, 300), {"axes": [2], "keepdims": 0}),
    ("ReduceSum", (3000, 3), {"axes": [0], "keepdims": 1}),
    ("ReduceMin", (2, 3, 700), {"axes": [0, 2], "keepdims": 0}),
]


@pytest.mark.parametrize("op, shape, attrs", REDUCE_CASES, ids=[f"{c[0]}{c[1]}" for c in REDUCE_CASES])
def test_a_long_reduction_is_folded_by_a_block_through_a_shared_tree_and_keeps_its_meaning(
        op: str, shape: tuple[int, ...], attrs: dict[str, object]) -> None:
    _, func = _lowered(op, shape, **attrs)
    spec = GPU_PRESETS["a100"]
    sch = default_schedule(func, spec)
    verify_func(sch.func)
    axes = tuple(attrs["axes"])  # type: ignore[arg-type]
    terms = int(np.prod([shape[a] for a in axes]))
    outputs = func.params[-1].size
    plan = plan_reduction(outputs, terms, spec)
    assert plan is not None and plan.lanes * plan.group <= 256
    assert _bound(sch.func) == {"blockIdx.x": plan.blocks, "threadIdx.x": plan.lanes,
                                **({"threadIdx.y": plan.group} if plan.group > 1 else {})}
    [shared] = _shared(sch.func)
    assert shared.buffer.shape[-1] == plan.lanes
    kinds = [i.kind for i in sch.trace.instructions]
    assert "rfactor" in kinds and kinds[-1] == "bind"
    # One thread loop for the partials and one a halving step, each bound to threadIdx.x.
    lanes = [s for s in walk(sch.func.body) if isinstance(s, For) and s.thread_axis == "threadIdx.x"]
    assert len(lanes) == 1 + int(np.log2(plan.lanes))
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want, got = _run_both(func, sch.func, x)
    if op in ("ReduceMax", "ReduceMin"):
        np.testing.assert_array_equal(got, want)  # max and min do not depend on the order
    else:
        _within_reassociation(got, want, x, axes, terms, 1 / terms if op == "ReduceMean" else 1.0)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_short_reduction_groups_output_elements_in_a_block_along_threadIdx_y() -> None:
    # 150 outputs of 100 terms on a device of 2 SMs: 32 lanes an element, 8 elements a
    # block (the last block half empty: its lanes are guarded off).
    _, func = _lowered("ReduceSum", (3, 50, 100), axes=[2], keepdims=0)
    spec = replace(GPU_PRESETS["a100"], sms=2)
    sch = default_schedule(func, spec)
    assert _bound(sch.func) == {"blockIdx.x": 19, "threadIdx.y": 8, "threadIdx.x": 32}
    [shared] = _shared(sch.func)
    assert shared.buffer.shape == (8, 32)
    x = np.random.default_rng(1).standard_normal((3, 50, 100)).astype(np.float32)
    want, got = _run_both(func, sch.func, x)
    _within_reassociation(got, want, x, (2,), 100)


def test_past_the_block_limit_a_grid_stride_loop_runs_around_the_grid() -> None:
    tiny = replace(GPU_PRESETS["a100"], sms=1)  # at most 32 blocks
    _, func = _lowered("ReduceMax", (40, 64), axes=[1], keepdims=0)
    sch = Schedule(func)
    assert cross_thread_reduction(sch, "n", tiny, threads_per_block=32)
    assert _bound(sch.func) == {"blockIdx.x": 32, "threadIdx.x": 32}
    [block] = [s for s in walk(sch.func.body) if isinstance(s, Block)]
    assert isinstance(block.body, For) and block.body.kind is ForKind.SERIAL and block.body.extent == 2
    x = np.random.default_rng(2).standard_normal((40, 64)).astype(np.float32)
    want, got = _run_both(func, sch.func, x)
    np.testing.assert_array_equal(got, want)


def test_short_reductions_and_outputs_that_fill_the_device_keep_the_default_schedule() -> None:
    spec = GPU_PRESETS["a100"]
    _, short = _lowered("ReduceSum", (64, MIN_REDUCTION - 1), axes=[1])
    assert not cross_thread_reduction(Schedule(short), "n", spec)
    sch = default_schedule(short, spec)
    assert [i.kind for i in sch.trace.instructions] == ["fuse", "split", "bind", "bind"] and not _shared(sch.func)
    crowded = replace(spec, sms=1, max_threads_per_sm=64)  # 64 outputs already fill it
    _, wide = _lowered("ReduceSum", (64, 100), axes=[1])
    assert plan_reduction(64, 100, crowded) is None and not cross_thread_reduction(Schedule(wide), "n", crowded)
    _, elementwise = _lowered("Relu", (4, 5000))
    assert not cross_thread_reduction(Schedule(elementwise), "n", spec)


def test_the_trace_replays_from_json_to_the_same_schedule() -> None:
    _, func = _lowered("ReduceSum", (4, 5000), axes=[1])
    sch = default_schedule(func, GPU_PRESETS["h200"])
    assert Trace.from_json(sch.trace.to_json()).apply(func) == sch.func


@needs_ptxas
@pytest.mark.parametrize("device", ["a100", "h200"])
def test_a_reduction_kernel_assembles_with_shared_memory_and_barriers(device: str) -> None:
    spec = GPU_PRESETS[device]
    _, func = _lowered("ReduceSum", (4, 5000), axes=[1])
    built = build_kernel(func, spec)
    plan = plan_reduction(4, 5000, spec)
    assert plan is not None
    assert built.report.arch == spec.arch and built.report.shared_bytes == plan.lanes * 4
    assert built.report.spill_stores_bytes == 0
    assert built.kernel.launch.block == (plan.lanes, 1, 1) and built.kernel.launch.grid == (4, 1, 1)
    # A barrier between the partials and each of the log2(lanes) halving steps, and before the store.
    assert built.kernel.ptx.count("bar.sync") == 1 + int(np.log2(plan.lanes))


def _multi_stage(op: str, shape: tuple[int, ...]) -> tuple[object, PrimFunc]:
    b = GraphBuilder("g")
    x = b.input("x", shape)
    if op == "LayerNormalization":
        out = b.LayerNormalization(x, np.linspace(0.5, 1.5, shape[-1]).astype(np.float32),
                                   np.linspace(-1, 1, shape[-1]).astype(np.float32), name="n", axis=-1)
    else:
        out = getattr(b, op)(x, name="n", axis=-1)
    b.output(out if not isinstance(out, tuple) else out[0])
    graph = b.build()
    return graph, lower_node(graph.node("n"))


@needs_ptxas
@pytest.mark.parametrize("device", ["a100", "h200"])
@pytest.mark.parametrize("op, shape", [("Softmax", (3, 1000)), ("LayerNormalization", (4, 700)),
                                       ("LogSoftmax", (2, 2000))])
def test_softmax_and_layer_norm_stages_reduce_in_shared_memory_and_match_stage_by_stage(
        device: str, op: str, shape: tuple[int, ...]) -> None:
    spec = GPU_PRESETS[device]
    graph, func = _multi_stage(op, shape)
    built = build_function(func, spec)
    stages, _ = split_stages(func)
    feed = {"x": np.random.default_rng(3).standard_normal(shape).astype(np.float32)}
    constants = {name: v.data for name, v in graph.values.items() if v.data is not None}  # type: ignore[attr-defined]
    memory = {**feed, **{p.name: constants.get(p.name, np.zeros(p.shape, p.dtype))
                         for p in stages[0].params if p.name not in feed}}
    reductions = 0
    for stage, kernel in zip(stages, built.kernels):
        [block] = [s for s in walk(stage.body) if isinstance(s, Block)]
        assert kernel.report.arch == spec.arch
        reduces = any(it.kind.value == "reduction" for it in block.iters)
        assert (kernel.report.shared_bytes > 0) == reduces and kernel.report.spill_stores_bytes == 0
        reductions += reduces
        # Each stage from the same inputs, scheduled and not: max stages exactly, sums within
        # a few float32 roundings of a term each (the terms are O(1), rows of <= 2000).
        want = run_func(stage, memory)
        memory = run_func(kernel.trace.apply(stage), memory)
        got, ref = memory[block.writes.name], want[block.writes.name]
        if "max" in block.name:
            np.testing.assert_array_equal(got, ref)
        else:
            np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5)
    assert reductions >= 2
    final = hetero.run_reference(graph, feed)[graph.outputs[0].name]  # type: ignore[attr-defined]
    np.testing.assert_allclose(memory[graph.outputs[0].name], final, rtol=1e-5, atol=1e-5)  # type: ignore[attr-defined]
