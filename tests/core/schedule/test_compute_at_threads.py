"""compute_at of a shared stage inside thread loops (its region relaxed over them, its
buffer shrunk to the region and allocated outside them, barriers around the step), bind
of its loops to the block's threads, cache_operand, and their refusals. Meaning is
checked with the interpreter, which runs the thread loops as threads meeting at the
barriers, against the unscheduled lowering: equal bit for bit (the order of each sum is
kept)."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import Allocate, Barrier, For, PrimFunc, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.core.lower import lower_node
from hetero.core.schedule import BlockRef, LoopRef, Schedule
from hetero.errors import ScheduleError


def _matmul(m: int, k: int, n: int) -> PrimFunc:
    g = GraphBuilder("g")
    g.output(g.MatMul(g.input("a", (m, k)), g.input("b", (k, n)), name="y"))
    return lower_node(g.build().node("y"))


def _staged(func: PrimFunc) -> tuple[Schedule, BlockRef, LoopRef]:
    """A at rows split 2 x 4 threads, K by 3, A's operand cached in shared memory and computed
    at the K-outer loop, inside the thread loop."""
    sch = Schedule(func)
    a = sch.cache_operand(BlockRef("y"), LoopRef("y", "i0"), LoopRef("y", "y_k"), buffer="a", scope="shared")
    i0, i1 = sch.split(LoopRef("y", "i0"), [None, 4])
    sch.bind(i0, "blockIdx.x")
    sch.bind(i1, "threadIdx.x")
    k0, _ = sch.split(LoopRef("y", "y_k"), [None, 3])
    sch.compute_at(a, k0)
    return sch, a, k0


def _inputs(func: PrimFunc) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {b.name: rng.standard_normal(b.shape).astype(np.float32) for b in func.params}


def test_the_region_is_relaxed_over_the_thread_loop_and_the_buffer_shrinks_to_it() -> None:
    func = _matmul(8, 5, 3)
    sch, a, _ = _staged(func)
    verify_func(sch.func)
    [alloc] = [s for s in walk(sch.func.body) if isinstance(s, Allocate) and s.buffer.name == a.name]
    assert alloc.buffer.shape == (4, 3) and alloc.buffer.scope == "shared"  # the 4 threads' rows, 3 K steps
    assert isinstance(alloc.body, For) and alloc.body.thread_axis == "threadIdx.x"  # outside the threads
    [k0] = [s for s in walk(sch.func.body) if isinstance(s, For) and s.var.name == "y_k_0"]
    assert sum(isinstance(s, Barrier) for s in walk(k0)) == 2
    inputs = _inputs(func)
    np.testing.assert_array_equal(run_func(sch.func, inputs)["y"], run_func(func, inputs)["y"])


def test_binding_the_copy_to_the_threads_shares_it_and_replays() -> None:
    func = _matmul(8, 5, 3)
    sch, a, _ = _staged(func)
    ax0, ax1 = [l for l in sch.get_loops(a) if l.block == a.name]
    sch.bind(ax0, "threadIdx.x")  # 4 rows, 4 threads: thread t copies row t
    assert not any(isinstance(s, For) and s.var.name == ax0.name for s in walk(sch.func.body))
    inputs = _inputs(func)
    np.testing.assert_array_equal(run_func(sch.func, inputs)["y"], run_func(func, inputs)["y"])
    assert sch.trace.apply(func) == sch.func


def test_binding_a_copy_loop_of_another_extent_or_outside_a_shared_stage_is_refused() -> None:
    sch, a, _ = _staged(_matmul(8, 5, 3))
    _, ax1 = [l for l in sch.get_loops(a) if l.block == a.name]
    with pytest.raises(ScheduleError, match=r"its extent 3 differs from the 4 threads of loop i0_1"):
        sch.bind(ax1, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"loop i0_1 in the same nest is already bound to it"):
        sch.bind(LoopRef("y", "y_k_1"), "threadIdx.x")


def test_without_thread_loops_compute_at_keeps_the_full_buffer() -> None:
    sch = Schedule(_matmul(8, 5, 3))
    a = sch.cache_operand(BlockRef("y"), LoopRef("y", "i0"), LoopRef("y", "y_k"), buffer="a", scope="shared")
    sch.compute_at(a, LoopRef("y", "i0"))
    [alloc] = [s for s in walk(sch.func.body) if isinstance(s, Allocate) and s.buffer.name == a.name]
    assert alloc.buffer.shape == (8, 5) and not any(isinstance(s, Barrier) for s in walk(sch.func.body))


def test_cache_operand_refuses_what_it_cannot_name() -> None:
    sch = Schedule(_matmul(8, 5, 3))
    with pytest.raises(ScheduleError, match=r"the block does not read c"):
        sch.cache_operand(BlockRef("y"), LoopRef("y", "i0"), buffer="c", scope="shared")
    with pytest.raises(ScheduleError, match=r"its operand uses loop y_k"):
        sch.cache_operand(BlockRef("y"), LoopRef("y", "i0"), buffer="a", scope="shared")
