"""Barrier, Evaluate, loop and buffer annotations, buffer partitioning: printed, run and
verified."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import Allocate, Buffer, For, ForKind, PrimFunc, Store, Var, func_problems, run_func, seq
from hetero.core.ir.tir.buffer import Partition
from hetero.core.ir.tir.expr import call
from hetero.core.ir.tir.registry import register_intrinsic
from hetero.core.ir.tir.stmt import Barrier, Evaluate, annotate

A = Buffer("A", (8,), "float32")
B = Buffer("B", (8,), "float32")
T = Buffer("T", (8,), "float32", "shared")


def staged(stmt_between: object = None, **alloc: object) -> PrimFunc:
    """B = reverse(A) through a shared buffer T, with a barrier between fill and read."""
    i, j = Var("i"), Var("j")
    fill = For(i, 8, Store(T, (i,), A[i] * 2.0))
    read = For(j, 8, Store(B, (j,), T[7 - j]))
    body = Allocate(T, seq(fill, Barrier("shared") if stmt_between is None else stmt_between, read),  # type: ignore[arg-type]
                    **alloc)  # type: ignore[arg-type]
    return PrimFunc("staged", (A, B), body)


def run(func: PrimFunc) -> np.ndarray:
    a = np.arange(8, dtype=np.float32)
    return run_func(func, {"A": a, "B": np.zeros(8, np.float32)})["B"]


def test_barrier_prints_verifies_and_runs() -> None:
    func = staged()
    assert "  barrier(shared)\n" in str(func)
    assert func_problems(func) == []
    np.testing.assert_array_equal(run(func), (np.arange(8, dtype=np.float32) * 2.0)[::-1])


def test_a_barrier_on_private_or_unknown_memory_is_refused() -> None:
    assert func_problems(staged(Barrier("local"))) == [
        "func staged: barrier on local memory: it is private to each thread, so there is nothing to "
        "synchronise (use the scope the threads share)"]
    (problem,) = func_problems(staged(Barrier("sharde")))
    assert "unknown memory scope 'sharde' (did you mean 'shared'?)" in problem
    assert "register_scope('sharde', ...)" in problem


def test_evaluate_runs_the_registered_reference_for_its_effect() -> None:
    seen: list[float] = []

    def trace(x: np.float32) -> np.float32:
        seen.append(float(x))
        return x

    register_intrinsic("test_trace_value", 1, trace, doc="records its argument (tests)")
    k = Var("k")
    func = PrimFunc("traced", (A, B), For(k, 3, seq(Evaluate(call("test_trace_value", A[k] + 1.0)),
                                                      Store(B, (k,), A[k]))))
    assert "    evaluate test_trace_value(A[k] + 1.0)\n" in str(func)
    run(func)
    assert seen == [1.0, 2.0, 3.0]


def test_evaluate_needs_a_registered_intrinsic() -> None:
    from hetero.core.ir.tir.expr import Call

    func = staged(Evaluate(Call("no_such_fn", (A[0],), A.dtype)))
    (problem,) = func_problems(func)
    assert "unknown intrinsic 'no_such_fn'" in problem and "register_intrinsic('no_such_fn', ...)" in problem


def test_loop_annotations_print_and_are_checked() -> None:
    i = Var("i")
    loop = For(i, 8, Store(B, (i,), A[i]))
    unrolled = annotate(loop, "unroll_factor", 4)
    assert unrolled.annotation("unroll_factor") == 4 and loop.annotation("unroll_factor") is None
    assert annotate(unrolled, "unroll_factor", 2).annotations == (("unroll_factor", 2),)
    assert str(unrolled).startswith("for i in range(8) unroll_factor=4 {")
    assert func_problems(PrimFunc("f", (A, B), unrolled)) == []
    assert func_problems(PrimFunc("f", (A, B), annotate(loop, "unroll_factor", 0))) == [
        "func f: loop i: annotation unroll_factor must be a positive integer, got 0"]
    (problem,) = func_problems(PrimFunc("f", (A, B), annotate(loop, "unroll_factr", 2)))
    assert problem.startswith("func f: loop i: unknown loop annotation 'unroll_factr' (did you mean 'unroll_factor'?)")
    assert "register_annotation('unroll_factr', 'loop', ...)" in problem


def test_an_initiation_interval_goes_with_a_pipelined_loop() -> None:
    i = Var("i")
    serial = annotate(For(i, 8, Store(B, (i,), A[i])), "ii", 2)
    assert func_problems(PrimFunc("f", (A, B), serial)) == [
        "func f: loop i: an initiation interval (ii) goes with PIPELINED loops only, not serial"]
    pipelined = annotate(For(i, 8, Store(B, (i,), A[i]), ForKind.PIPELINED), "ii", 2)
    assert str(pipelined).startswith("for i in range(8) pipelined ii=2 {")
    assert func_problems(PrimFunc("f", (A, B), pipelined)) == []
    np.testing.assert_array_equal(run(PrimFunc("f", (A, B), pipelined)), np.arange(8, dtype=np.float32))


def test_partitioned_buffer_prints_verifies_and_keeps_its_values() -> None:
    parts = (Partition(0, "cyclic", 4),)
    func = staged(annotations=(("partition", parts),))
    assert "alloc T: f32[8] shared partition=[cyclic(0, 4)] {" in str(func)
    assert func.body.partitions == parts  # type: ignore[attr-defined]
    assert func_problems(func) == []
    np.testing.assert_array_equal(run(func), run(staged()))
    complete = staged(annotations=(("partition", (Partition(0, "complete"),)),))
    assert "partition=[complete(0)]" in str(complete) and func_problems(complete) == []


@pytest.mark.parametrize("parts, rule", [
    ((Partition(1, "cyclic", 2),), "partition of dimension 1, but the buffer has rank 1"),
    ((Partition(0, "cyclic", 0),), "a cyclic partition of dimension 0 (extent 8) needs a factor from 1 to the extent, got 0"),
    ((Partition(0, "block", 9),), "needs a factor from 1 to the extent, got 9"),
    ((Partition(0, "complete", 2),), "a complete partition takes no factor (got 2)"),
    ((Partition(0, "diagonal", 2),), "partition kind 'diagonal' is not one of cyclic, block, complete"),
    ((Partition(0, "cyclic", 2), Partition(0, "block", 2)), "partitions dimension [0, 0] more than once"),
    (Partition(0, "cyclic", 2), "must be a tuple of Partition"),
])
def test_a_bad_partition_is_named(parts: object, rule: str) -> None:
    (problem,) = func_problems(staged(annotations=(("partition", parts),)))
    assert problem.startswith("func staged: allocation T: ") and rule in problem
