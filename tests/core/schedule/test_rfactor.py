"""Schedule.rfactor: a reduction folded into a buffer of partials and halved by a tree; its
numbers (via the interpreter, on small integers so every order of a sum is exact), its
loop nest, its trace and its preconditions."""

from __future__ import annotations

import pytest
from schedcheck import matmul, same_numbers

from hetero.core.ir.tir import Allocate, For, IfThenElse, compute, lower, placeholder, reduce_axis, sum_, walk
from hetero.core.ir.tir.compute import prod_
from hetero.core.schedule import LoopRef, Schedule, Trace
from hetero.core.schedule.rfactor import RFactored
from hetero.errors import ScheduleError


def factored_matmul(lanes: int) -> tuple[Schedule, RFactored]:
    """matmul() with its reduction split by ``lanes``, the lane outermost, rfactored at row i."""
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    i, _, r = sch.get_loops(y)
    r0, r1 = sch.split(r, [None, lanes])
    sch.reorder(r1, r0)
    return sch, sch.rfactor(y, r1, i)


@pytest.mark.parametrize("lanes", [4, 3, 1])
def test_rfactor_keeps_the_numbers_whatever_the_lane_count(lanes: int) -> None:
    sch, _ = factored_matmul(lanes)
    same_numbers(matmul(), sch.func)


def test_rfactor_makes_a_shared_buffer_of_partials_and_log2_halving_steps() -> None:
    sch, left = factored_matmul(4)
    [partials] = [s for s in walk(sch.func.body) if isinstance(s, Allocate) and s.buffer.scope == "shared"]
    assert partials.buffer.name == "Y_rf" and partials.buffer.shape == (5, 4)  # one row of j, lanes across
    assert left.reduction == ("r_1", "r_1_1", "r_1_2") and left.lanes == (("j", "j_1", "j_2", "j_3"),)
    assert "if r_1_1 < 2 {" in str(sch.func) and "if r_1_2 < 1 {" in str(sch.func)
    assert sum(isinstance(s, IfThenElse) for s in walk(sch.func.body)) == 2  # the two steps (4 divides 8: no guard)
    # The epilogue (relu) reads the tree's first partial, once a row element.
    assert "Y[i, j_3] = max(Y_rf[j_3, 0], 0.0)" in str(sch.func)


def test_each_rfactored_loop_binds_and_the_trace_replays() -> None:
    sch, left = factored_matmul(4)
    for name in left.reduction:
        sch.bind(LoopRef("Y", name), "threadIdx.x")
    same_numbers(matmul(), sch.func)
    assert [i.kind for i in sch.trace.instructions][:3] == ["split", "reorder", "rfactor"]
    assert Trace.from_json(sch.trace.to_json()).apply(matmul()) == sch.func


def test_an_init_that_is_not_the_identity_is_folded_in_once() -> None:
    x = placeholder((3, 10), "float32", "X")
    r = reduce_axis(10, "r")
    y = compute((3,), lambda i: sum_(x[i, r], r, init=5.0), "Y")
    func = lower("plus_five", [x], [y])
    sch = Schedule(func)
    i, r_loop = sch.get_loops(sch.get_block("Y"))
    r0, r1 = sch.split(r_loop, [None, 4])
    sch.reorder(r1, r0)
    sch.rfactor(sch.get_block("Y"), r1, i)
    same_numbers(func, sch.func)
    assert "5.0 + Y_rf[0]" in str(sch.func)


def test_an_integer_product_is_unchanged() -> None:
    x = placeholder((2, 9), "int32", "X")
    r = reduce_axis(9, "r")
    func = lower("prod", [x], [compute((2,), lambda i: prod_(x[i, r], r), "Y")])
    sch = Schedule(func)
    i, r_loop = sch.get_loops(sch.get_block("Y"))
    r0, r1 = sch.split(r_loop, [None, 8])
    sch.reorder(r1, r0)
    sch.rfactor(sch.get_block("Y"), r1, i)
    same_numbers(func, sch.func)  # lanes past the 9 terms start from the identity, 1
    assert "Y_acc[0] = 1" in str(sch.func)


def test_rfactor_refuses_a_lane_that_is_not_the_outermost_fold_loop_and_a_loop_without_a_reduction() -> None:
    sch = Schedule(matmul())
    y = sch.get_block("Y")
    i, j, r = sch.get_loops(y)
    r0, r1 = sch.split(r, [None, 4])
    with pytest.raises(ScheduleError, match=r"loop r_1 is not the outermost loop that folds Y_acc \(loop r_0\); "
                                            "reorder it outward first"):
        sch.rfactor(y, r1, i)
    with pytest.raises(ScheduleError, match=r"under loop r_0, no one-element accumulator"):
        sch.rfactor(y, r1, r0)
    assert not [s for s in walk(sch.func.body) if isinstance(s, For) and s.var.name.startswith("r_1_")]
