"""Loop primitives: split, reorder, fuse, tile and loop kinds, with their preconditions."""

from __future__ import annotations

from textwrap import dedent

import pytest
from schedcheck import add, body_of, conv, matmul, same_numbers

from hetero.core.ir.tir import ForKind
from hetero.core.schedule import LoopRef, Schedule
from hetero.errors import ScheduleError


def test_get_loops_lists_spatial_then_reduction_loops_outermost_first() -> None:
    sch = Schedule(conv())
    assert [l.name for l in sch.get_loops(sch.get_block("Y"))] == ["o", "p", "c", "k"]


def test_split_divisible_has_no_guard() -> None:
    sch = Schedule(add())
    _i, j = sch.get_loops(sch.get_block("C"))
    assert sch.split(j, [2, None]) == [LoopRef("C", "j_0"), LoopRef("C", "j_1")]
    assert body_of(sch.func) == dedent("""\
        block C [spatial i:6, j:10] {
          for i in range(6) {
            for j_0 in range(2) {
              for j_1 in range(5) {
                C[i, j_0 * 5 + j_1] = A[i, j_0 * 5 + j_1] + B[i, j_0 * 5 + j_1]
              }
            }
          }
        }""")
    same_numbers(add(), sch.func)


def test_split_non_divisible_guards_the_original_bound() -> None:
    sch = Schedule(add())
    _, j = sch.get_loops(sch.get_block("C"))
    sch.split(j, [None, 4])
    assert body_of(sch.func) == dedent("""\
        block C [spatial i:6, j:10] {
          for i in range(6) {
            for j_0 in range(3) {
              for j_1 in range(4) {
                if j_0 * 4 + j_1 < 10 {
                  C[i, j_0 * 4 + j_1] = A[i, j_0 * 4 + j_1] + B[i, j_0 * 4 + j_1]
                }
              }
            }
          }
        }""")
    same_numbers(add(), sch.func)


def test_split_into_three_and_of_a_reduction_loop_keeps_numbers() -> None:
    sch = Schedule(matmul())
    i, _j, r = sch.get_loops(sch.get_block("Y"))
    assert [l.name for l in sch.split(i, [None, 2, 2])] == ["i_0", "i_1", "i_2"]
    sch.split(r, [None, 3])
    assert "X[(i_0 * 2 + i_1) * 2 + i_2, r_0 * 3 + r_1]" in str(sch.func)
    same_numbers(matmul(), sch.func)


@pytest.mark.parametrize("factors, rule", [
    ([None, None], "at most one factor may be None"),
    ([2, 2], "fewer than the loop's iterations"),
    ([0, None], "positive integers"),
    ([], "at least one factor"),
])
def test_split_rejects_bad_factors_naming_the_loop(factors: list, rule: str) -> None:
    sch = Schedule(add())
    _, j = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=rule) as info:
        sch.split(j, factors)
    assert "loop j (block C)" in str(info.value)


def test_a_replaced_loop_reference_is_reported_by_name() -> None:
    sch = Schedule(add())
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 2])
    with pytest.raises(ScheduleError, match=r"loop i \(block C\) does not exist.*i_0, i_1, j"):
        sch.split(i, [None, 2])
    with pytest.raises(ScheduleError, match="no block 'D'.*blocks are C"):
        sch.get_block("D")


def test_reorder_swaps_a_perfect_nest() -> None:
    sch = Schedule(add())
    i, j = sch.get_loops(sch.get_block("C"))
    sch.reorder(j, i)
    assert body_of(sch.func) == dedent("""\
        block C [spatial i:6, j:10] {
          for j in range(10) {
            for i in range(6) {
              C[i, j] = A[i, j] + B[i, j]
            }
          }
        }""")
    same_numbers(add(), sch.func)


def test_reorder_of_reduction_loops_keeps_numbers() -> None:
    sch = Schedule(conv())
    _, _, c, k = sch.get_loops(sch.get_block("Y"))
    sch.reorder(k, c)
    assert [l.name for l in sch.get_loops(sch.get_block("Y"))] == ["o", "p", "k", "c"]
    same_numbers(conv(), sch.func)


def test_reorder_refuses_loops_of_an_imperfect_nest() -> None:
    sch = Schedule(matmul())
    i, _, r = sch.get_loops(sch.get_block("Y"))
    with pytest.raises(ScheduleError, match=r"cannot reorder loop r \(block Y\), loop i .*not one perfect nest"):
        sch.reorder(r, i)


def test_fuse_makes_one_loop_and_divides_its_index() -> None:
    sch = Schedule(add())
    i, j = sch.get_loops(sch.get_block("C"))
    assert sch.fuse(i, j) == LoopRef("C", "i_j_fused")
    assert body_of(sch.func) == dedent("""\
        block C [spatial i:6, j:10] {
          for i_j_fused in range(60) {
            C[i_j_fused // 10, i_j_fused % 10] = A[i_j_fused // 10, i_j_fused % 10] + B[i_j_fused // 10, i_j_fused % 10]
          }
        }""")
    same_numbers(add(), sch.func)


def test_fuse_of_three_loops_keeps_numbers() -> None:
    sch = Schedule(add())
    i, j = sch.get_loops(sch.get_block("C"))
    j0, j1 = sch.split(j, [None, 5])
    sch.fuse(i, j0, j1)
    same_numbers(add(), sch.func)


def test_fuse_refuses_loops_out_of_order() -> None:
    sch = Schedule(add())
    i, j = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"cannot fuse loop j \(block C\), loop i \(block C\)"):
        sch.fuse(j, i)


def test_tile_splits_then_puts_outer_parts_first() -> None:
    sch = Schedule(matmul())
    i, j, _ = sch.get_loops(sch.get_block("Y"))
    tiles = sch.tile([i, j], [4, 2])
    assert [l.name for l in tiles] == ["i_0", "j_0", "i_1", "j_1"]
    assert body_of(sch.func).startswith(dedent("""\
        block Y [spatial i:6, j:5; reduction r:8] {
          for i_0 in range(2) {
            for j_0 in range(3) {
              for i_1 in range(4) {
                for j_1 in range(2) {
                  if i_0 * 4 + i_1 < 6 and j_0 * 2 + j_1 < 5 {
                    alloc Y_acc: f32[1] local {"""))
    same_numbers(matmul(), sch.func)


def test_loop_kinds_print_and_keep_numbers() -> None:
    sch = Schedule(conv())
    o, p, _c, k = sch.get_loops(sch.get_block("Y"))
    sch.parallel(o)
    sch.unroll(k)
    p0, _p1 = sch.split(p, [None, 4])
    sch.bind(p0, "threadIdx.x")
    text = str(sch.func)
    assert "for o in range(4) parallel {" in text
    assert "for k in range(3) unrolled {" in text
    assert "for p_0 in range(2) thread_binding(threadIdx.x) {" in text
    same_numbers(conv(), sch.func)


def test_vectorize_an_innermost_loop() -> None:
    sch = Schedule(add())
    _, j = sch.get_loops(sch.get_block("C"))
    _, j1 = sch.split(j, [None, 5])
    sch.vectorize(j1)
    assert "for j_1 in range(5) vectorized {" in str(sch.func)
    same_numbers(add(), sch.func)


def test_vectorize_refuses_a_loop_that_holds_another() -> None:
    sch = Schedule(add())
    i, _ = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"cannot vectorize loop i \(block C\): it contains loop j"):
        sch.vectorize(i)


@pytest.mark.parametrize("primitive", ["parallel", "vectorize", "bind"])
def test_a_reduction_loop_cannot_run_its_iterations_at_once(primitive: str) -> None:
    sch = Schedule(matmul())
    _, _, r = sch.get_loops(sch.get_block("Y"))
    args = (r, "threadIdx.x") if primitive == "bind" else (r,)
    with pytest.raises(ScheduleError, match=r"loop r \(block Y\).*store to Y_acc does not index by r"):
        getattr(sch, primitive)(*args)


def test_a_loop_has_one_kind_and_a_split_comes_first() -> None:
    sch = Schedule(add())
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.parallel(i)
    with pytest.raises(ScheduleError, match=r"cannot make loop i \(block C\) unrolled: it is already parallel"):
        sch.unroll(i)
    with pytest.raises(ScheduleError, match=r"cannot split loop i \(block C\): it is already parallel"):
        sch.split(i, [None, 2])


def test_bind_checks_the_axis_and_that_it_is_free() -> None:
    sch = Schedule(add())
    i, j = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match=r"cannot bind loop i \(block C\) to 'warp.x'"):
        sch.bind(i, "warp.x")
    sch.bind(i, "threadIdx.x")
    with pytest.raises(ScheduleError, match="loop i in the same nest is already bound"):
        sch.bind(j, "threadIdx.x")
    assert sch.func.body.body.kind is ForKind.THREAD_BINDING  # type: ignore[attr-defined]
