"""The verifier's thread-binding rules: registered axes, one binding per axis on a path,
block axes outside thread axes, one extent per axis; each error names the function,
the loop and the rule. And the interpreter runs a thread loop's threads together up to
each barrier."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import (
    Allocate, Barrier, Buffer, For, ForKind, IfThenElse, PrimFunc, Stmt, Store, Var, func_problems, lt, run_func,
    seq,
)
from hetero.core.ir.tir.registry import register_thread_axis
from hetero.errors import InputError

A = Buffer("A", (64,), "float32")
B = Buffer("B", (64,), "float32")


def bound(var: Var, extent: int, axis: str, body: Stmt) -> For:
    return For(var, extent, body, ForKind.THREAD_BINDING, axis)


def kernel(body: Stmt) -> PrimFunc:
    return PrimFunc("k", (A, B), body)


def grid(block_axis: str = "blockIdx.x", thread_axis: str = "threadIdx.x",
         blocks: int = 2, threads: int = 32) -> PrimFunc:
    """B = A + 1 over a grid of ``blocks`` blocks of ``threads`` threads."""
    b, t = Var("b"), Var("t")
    index = b * threads + t
    return kernel(bound(b, blocks, block_axis, bound(t, threads, thread_axis,
                                                      Store(B, (index,), A[index] + 1.0))))


def test_a_well_formed_grid_verifies_and_runs() -> None:
    func = grid()
    assert func_problems(func) == []
    a = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(run_func(func, {"A": a, "B": np.zeros(64, np.float32)})["B"], a + 1)


def test_an_unregistered_axis_is_named_with_how_to_register_it() -> None:
    (problem,) = func_problems(grid(thread_axis="threadIdx.w"))
    assert problem.startswith("func k: loop t bound to threadIdx.w: unknown thread axis 'threadIdx.w'")
    assert "register_thread_axis('threadIdx.w', ...)" in problem
    register_thread_axis("test_lane.x", "thread", "a vector lane (tests)")
    assert func_problems(grid(thread_axis="test_lane.x")) == []


def test_an_axis_is_bound_once_on_a_path() -> None:
    assert func_problems(grid(thread_axis="blockIdx.x")) == [
        "func k: loop t bound to blockIdx.x: loop b around it is bound to the same axis "
        "(an axis is bound once on a path)"]


def test_a_block_axis_never_sits_inside_a_thread_axis() -> None:
    assert func_problems(grid(block_axis="threadIdx.y", thread_axis="blockIdx.x")) == [
        "func k: loop t bound to blockIdx.x: it sits inside loop b bound to thread axis threadIdx.y "
        "(block axes go outside thread axes)"]


def test_loops_bound_to_one_axis_share_its_extent() -> None:
    t, u = Var("t"), Var("u")
    same = kernel(seq(bound(t, 32, "threadIdx.x", Store(B, (t,), A[t])),
                      bound(u, 32, "threadIdx.x", Store(B, (u + 32,), A[u + 32]))))
    assert func_problems(same) == []
    different = kernel(seq(bound(t, 32, "threadIdx.x", Store(B, (t,), A[t])),
                           bound(u, 16, "threadIdx.x", Store(B, (u + 32,), A[u + 32]))))
    assert func_problems(different) == [
        "func k: loop u bound to threadIdx.x: extent 16, but loop t is bound to it with extent 32 "
        "(loops bound to one axis share its extent)"]


def test_a_bound_loop_needs_a_positive_extent() -> None:
    problems = func_problems(grid(blocks=0))
    assert problems == ["func k: loop b has extent 0"]


def test_sibling_kernels_may_bind_the_same_axes() -> None:
    b, t, c, u = Var("b"), Var("t"), Var("c"), Var("u")
    first = bound(b, 2, "blockIdx.x", bound(t, 32, "threadIdx.x", Store(B, (b * 32 + t,), A[b * 32 + t])))
    second = bound(c, 2, "blockIdx.x", bound(u, 32, "threadIdx.x", Store(B, (c * 32 + u,), B[c * 32 + u] * 2.0)))
    assert func_problems(kernel(seq(first, second))) == []


def reverse_in_blocks(barrier: bool = True, guard_barrier: bool = False) -> PrimFunc:
    """B[b, t] = A[b, 31 - t]: each thread stores its element to shared memory, and after
    the barrier reads the one its mirror thread stored."""
    b, t = Var("b"), Var("t")
    tile = Buffer("T", (32,), "float32", "shared")
    sync: Stmt = Barrier("shared")
    if guard_barrier:
        sync = IfThenElse(lt(t, 16), sync)
    steps = [Store(tile, (t,), A[b * 32 + t]), *([sync] if barrier else []), Store(B, (b * 32 + t,), tile[31 - t])]
    return kernel(bound(b, 2, "blockIdx.x", Allocate(tile, bound(t, 32, "threadIdx.x", seq(*steps)))))


def test_threads_run_together_up_to_each_barrier() -> None:
    a = np.arange(64, dtype=np.float32)
    out = run_func(reverse_in_blocks(), {"A": a, "B": np.zeros(64, np.float32)})["B"]
    np.testing.assert_array_equal(out, a.reshape(2, 32)[:, ::-1].reshape(64))
    # Without the barrier, a thread reads its mirror's slot before the mirror stores it.
    racy = run_func(reverse_in_blocks(barrier=False), {"A": a, "B": np.zeros(64, np.float32)})["B"]
    assert not np.array_equal(racy, out)


def test_a_barrier_only_some_threads_reach_is_an_error() -> None:
    with pytest.raises(InputError, match=r"func k: 16 of the 32 threads of loop t \(threadIdx.x\) wait at a "
                                         r"barrier the others never reach"):
        run_func(reverse_in_blocks(guard_barrier=True), {"A": np.zeros(64, np.float32),
                                                         "B": np.zeros(64, np.float32)})
