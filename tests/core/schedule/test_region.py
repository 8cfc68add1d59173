"""Affine index analysis: the region of a buffer a loop's iterations read."""

from __future__ import annotations

from hetero.core.ir.tir import Var, const
from hetero.core.ir.tir.expr import binary
from hetero.core.ir.tir.printer import format_expr
from hetero.core.schedule.region import affine, read_region

i0, i1, r = Var("i_0"), Var("i_1"), Var("r")


def test_affine_forms_of_index_expressions() -> None:
    assert affine(i0 * 4 + i1 + 2) == ({i0: 4, i1: 1}, 2)
    assert affine((i0 - i1) * 3) == ({i0: 3, i1: -3}, 0)
    assert affine(i0 * 4 - i0 * 4 + r) == ({r: 1}, 0)
    assert affine(i0 // 2) is None
    assert affine(binary("mul", i0, i1)) is None


def test_region_of_offset_reads_has_outer_start_and_constant_extent() -> None:
    reads = [(i0 * 4 + i1,), (i0 * 4 + i1 + 2,)]
    (rng,) = read_region(reads, (12,), [(i0, 3)], {i1: 4})
    assert format_expr(rng.start) == "i_0 * 4" and rng.extent == 6
    assert (rng.may_underflow, rng.may_overflow) == (False, True)


def test_region_of_a_negative_offset_may_underflow() -> None:
    (rng,) = read_region([(i0 - 1 + r,)], (8,), [(i0, 8)], {r: 3})
    assert format_expr(rng.start) == "i_0 - 1" and rng.extent == 3
    assert (rng.may_underflow, rng.may_overflow) == (True, True)


def test_region_refuses_reads_that_differ_in_their_outer_part() -> None:
    reason = read_region([(i0,), (i0 * 2,)], (8,), [(i0, 4)], {})
    assert reason == "reads differ in how index 0 depends on the outer loops"
    assert "uses x, which is not a loop" in read_region([(Var("x"),)], (8,), [(i0, 4)], {})
    assert read_region([(const(3, "int64"),)], (8,), [], {})[0].extent == 1
