"""The cuda backend's devices and default schedules: declarations, and schedules that keep
each function's meaning (checked with the tensor-IR interpreter, which runs thread-bound
loops as threads; no GPU is needed)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import For, ForKind, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.core.lower import lower_node
from hetero.errors import ScheduleError
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda.schedules import default_schedule


def _lowered(op: str, shape: tuple[int, ...], **attrs: object):  # noqa: ANN202 - a PrimFunc
    b = GraphBuilder("g")
    b.output(getattr(b, op)(b.input("x", shape), name="n", **attrs))
    graph = b.build()
    return graph, lower_node(graph.node("n"))


def _bound(func) -> dict[str, int]:  # noqa: ANN001
    return {s.thread_axis: s.extent for s in walk(func.body)
            if isinstance(s, For) and s.kind is ForKind.THREAD_BINDING}


def _same_meaning(func, scheduled, shape: tuple[int, ...]) -> None:  # noqa: ANN001
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    outputs = [b.name for b in func.params if b.name != "x"]
    zeros = {b.name: np.zeros(b.shape, b.dtype) for b in func.params if b.name != "x"}
    want = run_func(func, {"x": x, **zeros})
    got = run_func(scheduled, {"x": x, **zeros})
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name])


def test_presets_declare_the_two_gpu_classes() -> None:
    assert {name: spec.arch for name, spec in GPU_PRESETS.items()} == {"a100": "sm_80", "h100": "sm_90", "h200": "sm_90"}
    h200 = GPU_PRESETS["h200"].memory_hierarchy()
    assert [level.name for level in h200.levels] == ["HBM", "L2", "SMEM", "REG"]
    assert [level.scope for level in h200.levels] == ["global", "global", "shared", "local"]
    assert h200.levels[0].capacity_bytes == 141 * 2**30 and h200.levels[2].capacity_bytes == 227 * 2**10
    assert GPU_PRESETS["a100"].peak_gflops == 19_500.0


@pytest.mark.parametrize("op, shape, attrs", [
    ("Relu", (4, 6), {}),
    ("Sigmoid", (3, 5, 7), {}),
    ("ReduceSum", (4, 6), {"axes": [1]}),
    ("ReduceMax", (2, 3, 50), {"axes": [2], "keepdims": 0}),
])
def test_outputs_are_bound_to_blocks_and_threads_and_keep_their_meaning(op: str, shape: tuple[int, ...],
                                                                        attrs: dict[str, object]) -> None:
    _, func = _lowered(op, shape, **attrs)
    scheduled = default_schedule(func, GPU_PRESETS["a100"]).func
    verify_func(scheduled)
    bound = _bound(scheduled)
    assert set(bound) == {"blockIdx.x", "threadIdx.x"}
    assert bound["threadIdx.x"] % 32 == 0 and bound["blockIdx.x"] * bound["threadIdx.x"] >= func.params[-1].size
    _same_meaning(func, scheduled, shape)


def test_a_large_output_keeps_a_grid_stride_loop_around_a_bounded_grid() -> None:
    tiny = replace(GPU_PRESETS["a100"], sms=1)  # at most 32 blocks in the grid
    _, func = _lowered("Neg", (5, 401))
    sch = default_schedule(func, tiny, threads_per_block=32)
    bound = _bound(sch.func)
    assert bound == {"blockIdx.x": 32, "threadIdx.x": 32}
    [outer] = [s for s in walk(sch.func.body) if isinstance(s, For) and s.kind is ForKind.SERIAL]
    assert outer.extent == 2  # 2,000 elements over 1,024 threads
    _same_meaning(func, sch.func, (5, 401))
    assert [i.kind for i in sch.trace.instructions] == ["fuse", "split", "bind", "bind"]
    assert sch.trace.instructions[1].decisions == {"factors": [2, 32, 32]}


def test_the_trace_replays_to_the_same_schedule() -> None:
    _, func = _lowered("Relu", (64, 64))
    sch = default_schedule(func, GPU_PRESETS["h100"])
    assert sch.trace.apply(func) == sch.func


def test_block_sizes_the_device_does_not_allow_are_refused() -> None:
    _, func = _lowered("Relu", (4, 6))
    with pytest.raises(ScheduleError, match="multiple of 32 up to 1024, got 48"):
        default_schedule(func, GPU_PRESETS["a100"], threads_per_block=48)
    with pytest.raises(ScheduleError, match="got 2048"):
        default_schedule(func, GPU_PRESETS["a100"], threads_per_block=2048)
