"""Stage primitives: cache_read, cache_write, compute_at, compute_inline, with their preconditions."""

from __future__ import annotations

from textwrap import dedent

import pytest
from schedcheck import body_of, chain, conv, matmul, same_numbers

from hetero.core.ir.tir import (
    Allocate,
    Block,
    Buffer,
    For,
    PrimFunc,
    Store,
    Var,
    compute,
    const,
    lower,
    placeholder,
    reduce_axis,
    seq,
    sum_,
)
from hetero.core.schedule import BlockRef, Schedule
from hetero.errors import ScheduleError


def scale_shift() -> PrimFunc:
    """B = A * 2, C = B + 1 on 6x10: a consumer that reads its producer element for element."""
    a = placeholder((6, 10), "float32", "A")
    b = compute((6, 10), lambda i, j: a[i, j] * 2.0, "B")
    c = compute((6, 10), lambda i, j: b[i, j] + 1.0, "C")
    return lower("scale_shift", [a], [c])


def test_cache_read_copies_the_buffer_before_the_block() -> None:
    sch = Schedule(matmul())
    assert sch.cache_read(sch.get_block("Y"), "X", "shared") == BlockRef("X_shared")
    assert body_of(sch.func) == dedent("""\
        alloc X_shared: f32[6,8] shared {
          block X_shared [spatial ax0:6, ax1:8] {
            for ax0 in range(6) {
              for ax1 in range(8) {
                X_shared[ax0, ax1] = X[ax0, ax1]
              }
            }
          }
          block Y [spatial i:6, j:5; reduction r:8] {
            for i in range(6) {
              for j in range(5) {
                alloc Y_acc: f32[1] local {
                  Y_acc[0] = 0.0
                  for r in range(8) {
                    Y_acc[0] = Y_acc[0] + X_shared[i, r] * W[r, j]
                  }
                  Y[i, j] = max(Y_acc[0], 0.0)
                }
              }
            }
          }
        }""")
    same_numbers(matmul(), sch.func)


def test_cache_write_computes_into_the_cache_and_copies_it_out() -> None:
    sch = Schedule(matmul())
    assert sch.cache_write(sch.get_block("Y"), "local") == BlockRef("Y_local")
    text = body_of(sch.func)
    assert text.startswith("alloc Y_local: f32[6,5] local {\n  block Y [spatial i:6, j:5; reduction r:8] {")
    assert "      Y_local[i, j] = max(Y_acc[0], 0.0)" in text
    assert text.endswith(dedent("""\
          block Y_local [spatial ax0:6, ax1:5] {
            for ax0 in range(6) {
              for ax1 in range(5) {
                Y[ax0, ax1] = Y_local[ax0, ax1]
              }
            }
          }
        }"""))
    same_numbers(matmul(), sch.func)


@pytest.mark.parametrize("buffer, scope, rule", [
    ("Z", "shared", "does not read Z"),
    ("W", "global", "W is already in global scope"),
    ("W", "texture", "unknown memory scope 'texture'"),
])
def test_cache_read_rejects_naming_the_block(buffer: str, scope: str, rule: str) -> None:
    sch = Schedule(matmul())
    with pytest.raises(ScheduleError, match=f"cache_read of {buffer} for block Y: .*{rule}"):
        sch.cache_read(sch.get_block("Y"), buffer, scope)


def test_compute_at_fills_one_row_per_iteration() -> None:
    func = scale_shift()
    sch = Schedule(func)
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    assert body_of(sch.func) == dedent("""\
        alloc B: f32[6,10] global {
          block C [spatial i:6, j:10] {
            for i in range(6) {
              block B [spatial i:6, j:10] {
                for j in range(10) {
                  B[i, j] = A[i, j] * 2.0
                }
              }
              for j in range(10) {
                C[i, j] = B[i, j] + 1.0
              }
            }
          }
        }""")
    assert [str(l) for l in sch.get_loops(sch.get_block("B"))] == ["loop i (block C)", "loop j (block B)"]
    same_numbers(func, sch.func)


def test_compute_at_covers_affine_offsets_and_guards_the_edge() -> None:
    sch = Schedule(chain())
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), i0)
    assert body_of(sch.func) == dedent("""\
        alloc B: f32[12] global {
          block C [spatial i:10] {
            for i_0 in range(3) {
              block B [spatial i:12] {
                for i in range(6) {
                  if i_0 * 4 + i < 12 {
                    B[i_0 * 4 + i] = A[i_0 * 4 + i] * 2.0 + 1.0
                  }
                }
              }
              for i_1 in range(4) {
                if i_0 * 4 + i_1 < 10 {
                  C[i_0 * 4 + i_1] = B[i_0 * 4 + i_1] + B[i_0 * 4 + i_1 + 2]
                }
              }
            }
          }
        }""")
    same_numbers(chain(), sch.func)


def test_cache_read_then_compute_at_stages_a_sliding_window() -> None:
    sch = Schedule(conv())
    y = sch.get_block("Y")
    x_local = sch.cache_read(y, "X", "local")
    _, p, _, _ = sch.get_loops(y)
    sch.compute_at(x_local, p)
    assert body_of(sch.func) == dedent("""\
        alloc X_local: f32[3,10] local {
          block Y [spatial o:4, p:8; reduction c:3, k:3] {
            for o in range(4) {
              for p in range(8) {
                block X_local [spatial ax0:3, ax1:10] {
                  for ax0 in range(3) {
                    for ax1 in range(3) {
                      X_local[ax0, p + ax1] = X[ax0, p + ax1]
                    }
                  }
                }
                alloc Y_acc: f32[1] local {
                  Y_acc[0] = 0.0
                  for c in range(3) {
                    for k in range(3) {
                      Y_acc[0] = Y_acc[0] + X_local[c, p + k] * W[o, c, k]
                    }
                  }
                  Y[o, p] = Y_acc[0]
                }
              }
            }
          }
        }""")
    same_numbers(conv(), sch.func)


def test_compute_at_of_a_reduction_stage_renames_clashing_loops() -> None:
    x = placeholder((4, 6), "float32", "X")
    r = reduce_axis(6, "j")
    s = compute((4,), lambda i: sum_(x[i, r], r), "S")
    out = compute((4, 3), lambda i, j: s[i] * 2.0, "Out")
    func = lower("row_sum_scale", [x], [out])
    sch = Schedule(func)
    _, j = sch.get_loops(sch.get_block("Out"))
    sch.compute_at(sch.get_block("S"), j)
    assert "for j_1 in range(6) {" in str(sch.func)
    same_numbers(func, sch.func)


def test_compute_at_refuses_what_it_cannot_bound() -> None:
    sch = Schedule(chain())
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    fused = sch.fuse(i0, i1)
    with pytest.raises(ScheduleError, match=r"compute_at of block B under loop i_0_i_1_fused \(block C\): "
                                            r"index 0 of a read is not affine"):
        sch.compute_at(sch.get_block("B"), fused)


def test_compute_at_refuses_a_scheduled_producer_and_an_output() -> None:
    sch = Schedule(chain())
    (bi,) = sch.get_loops(sch.get_block("B"))
    sch.split(bi, [None, 4])
    (ci,) = sch.get_loops(sch.get_block("C"))
    with pytest.raises(ScheduleError, match="compute_at of block B .*one loop per dimension of B"):
        sch.compute_at(sch.get_block("B"), ci)
    fresh = Schedule(chain())
    (bi,) = fresh.get_loops(fresh.get_block("B"))
    with pytest.raises(ScheduleError, match="compute_at of block C .*writes parameter C"):
        fresh.compute_at(fresh.get_block("C"), bi)


def test_compute_at_refuses_a_loop_that_does_not_follow_the_block() -> None:
    sch = Schedule(chain())
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"compute_at of block B under loop i \(block B\): "
                                            "the block must come before the loop"):
        sch.compute_at(sch.get_block("B"), i)


def test_cache_write_refuses_a_block_inside_a_loop() -> None:
    sch = Schedule(scale_shift())
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), i)
    with pytest.raises(ScheduleError, match="cache_write of block B: the block sits inside loop i"):
        sch.cache_write(sch.get_block("B"), "local")


def test_compute_inline_substitutes_the_stage() -> None:
    sch = Schedule(chain())
    sch.compute_inline(sch.get_block("B"))
    assert body_of(sch.func) == dedent("""\
        block C [spatial i:10] {
          for i in range(10) {
            C[i] = A[i] * 2.0 + 1.0 + (A[i + 2] * 2.0 + 1.0)
          }
        }""")
    same_numbers(chain(), sch.func)


def test_compute_inline_refuses_reductions_and_outputs() -> None:
    x = placeholder((4, 6), "float32", "X")
    r = reduce_axis(6, "k")
    s = compute((4,), lambda i: sum_(x[i, r], r), "S")
    out = compute((4,), lambda i: s[i] * 2.0, "Out")
    sch = Schedule(lower("row_sum_scale", [x], [out]))
    with pytest.raises(ScheduleError, match="compute_inline of block S: .*single store.*reduction"):
        sch.compute_inline(sch.get_block("S"))
    with pytest.raises(ScheduleError, match="compute_inline of block Out: .*writes parameter Out"):
        sch.compute_inline(sch.get_block("Out"))


def test_compute_at_guards_a_region_that_may_start_below_zero() -> None:
    a = placeholder((10,), "float32", "A")
    b = compute((10,), lambda i: a[i] + 1.0, "B")
    c = compute((10,), lambda i: b[9 - i] * 3.0, "C")
    func = lower("reverse", [a], [c])
    sch = Schedule(func)
    (i,) = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), i0)
    assert "if i_0 * -4 + 6 + i >= 0 {" in str(sch.func)
    same_numbers(func, sch.func)


def test_compute_inline_refuses_a_value_whose_input_is_overwritten_later() -> None:
    a = Buffer("A", (4,), "float32")
    b = Buffer("B", (4,), "float32")
    c = Buffer("C", (4,), "float32")
    i = Var("i")
    body = Allocate(b, seq(
        Block("B", For(i, 4, Store(b, (i,), a[i] * 2.0)), b),
        Block("A", For(i, 4, Store(a, (i,), const(0.0, "float32"))), a),
        Block("C", For(i, 4, Store(c, (i,), b[i] + 1.0)), c),
    ))
    sch = Schedule(PrimFunc("overwrite", (a, c), body))
    with pytest.raises(ScheduleError, match="compute_inline of block B: A, which it reads, is written again"):
        sch.compute_inline(sch.get_block("B"))
