"""The tensor IR: expressions, compute definitions and lowering, printer, verifier, interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import (
    Allocate, Buffer, For, ForKind, PrimFunc, Store, Var, cast, compute, const, func_problems,
    lower, lt, max_, maximum, placeholder, reduce_axis, run_func, select, seq, sum_, verify_func,
)
from hetero.errors import InputError, VerificationError


def dense_relu(inline_scale: bool = True) -> PrimFunc:
    x = placeholder((4, 8), "float32", "X")
    w = placeholder((8, 3), "float32", "W")
    r = reduce_axis(8, "r")
    h = compute((4, 8), lambda i, k: x[i, k] * 2.0, "H", inline=inline_scale)
    y = compute((4, 3), lambda i, j: maximum(sum_(h[i, r] * w[r, j], r), 0.0), "Y")
    return lower("dense_relu", [x, w], [y])


def test_index_arithmetic_on_literals_folds() -> None:
    i = Var("i")
    assert (i * 1 + 0) is i
    assert str(seq(Store(Buffer("B", (8,), "int64"), (i * 4 + 2,), const(7, "int64")))) == \
        "B[i * 4 + 2] = 7"
    assert (const(3, "int64") * 4 + 1) == const(13, "int64")


def test_mixed_dtypes_need_a_cast() -> None:
    with pytest.raises(TypeError, match="cast one side"):
        Var("i") + const(1.0, "float32")
    assert cast(Var("i"), "float32").dtype == np.dtype("float32")


def test_lowering_keeps_the_epilogue_at_the_store() -> None:
    text = str(dense_relu())
    assert text == (
        "func dense_relu(X: f32[4,8], W: f32[8,3], Y: f32[4,3]) {\n"
        "  block Y [spatial i:4, j:3; reduction r:8] {\n"
        "    for i in range(4) {\n"
        "      for j in range(3) {\n"
        "        alloc Y_acc: f32[1] local {\n"
        "          Y_acc[0] = 0.0\n"
        "          for r in range(8) {\n"
        "            Y_acc[0] = Y_acc[0] + X[i, r] * 2.0 * W[r, j]\n"
        "          }\n"
        "          Y[i, j] = max(Y_acc[0], 0.0)\n"
        "        }\n"
        "      }\n"
        "    }\n"
        "  }\n"
        "}"
    )


def test_a_stage_that_is_not_inlined_gets_its_own_buffer() -> None:
    text = str(dense_relu(inline_scale=False))
    assert "alloc H: f32[4,8] global {" in text and "block H [spatial i:4, k:8] {" in text


def test_interpreter_computes_the_lowered_function() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    for inline in (True, False):
        out = run_func(dense_relu(inline), {"X": x, "W": w, "Y": np.zeros((4, 3), np.float32)})["Y"]
        # Eight float32 products summed in order: within a few ulps of the float64 result.
        np.testing.assert_allclose(out, np.maximum((2 * x.astype(np.float64)) @ w, 0), rtol=1e-5, atol=1e-6)


def test_max_reduction_and_select() -> None:
    x = placeholder((3, 5), "int32", "X")
    r = reduce_axis(5, "r")
    y = compute((3,), lambda i: max_(select(lt(x[i, r], 0), -x[i, r], x[i, r]), r), "Y")
    f = lower("absmax", [x], [y])
    data = np.arange(-7, 8, dtype=np.int32).reshape(3, 5)
    out = run_func(f, {"X": data, "Y": np.zeros(3, np.int32)})["Y"]
    np.testing.assert_array_equal(out, np.abs(data).max(axis=1))


def test_verifier_names_an_unbound_variable() -> None:
    b = Buffer("B", (4,), "float32")
    f = PrimFunc("bad", (b,), Store(b, (Var("k"),), const(1.0, "float32")))
    with pytest.raises(VerificationError, match="func bad: variable k is used outside any loop"):
        verify_func(f)


def test_verifier_names_an_unknown_buffer_and_a_rank_mismatch() -> None:
    a = Buffer("A", (4,), "float32")
    ghost = Buffer("ghost", (4, 4), "float32")
    i = Var("i")
    f = PrimFunc("bad", (a,), For(i, 4, Store(a, (i,), ghost[i])))
    found = func_problems(f)
    assert any("load of ghost: buffer is not a parameter" in p for p in found)
    assert any("load of ghost: 1 indices for rank 2" in p for p in found)


def test_verifier_checks_store_dtype_and_loop_kinds() -> None:
    a = Buffer("A", (4,), "float32")
    i = Var("i")
    f = PrimFunc("bad", (a,), For(i, 4, Store(a, (i,), const(1, "int32")), ForKind.THREAD_BINDING))
    found = func_problems(f)
    assert any("value is int32, buffer float32" in p for p in found)
    assert any("thread axis" in p for p in found)


def test_verifier_rejects_reusing_an_allocation_name() -> None:
    a = Buffer("A", (4,), "float32")
    i = Var("i")
    f = PrimFunc("bad", (a,), Allocate(Buffer("A", (4,), "float32", "local"),
                                        For(i, 4, Store(a, (i,), const(0.0, "float32")))))
    assert any("allocation A: name already in use" in p for p in func_problems(f))


def test_interpreter_checks_its_arrays() -> None:
    f = dense_relu()
    with pytest.raises(InputError, match="no array for parameter W"):
        run_func(f, {"X": np.zeros((4, 8), np.float32), "Y": np.zeros((4, 3), np.float32)})
    with pytest.raises(InputError, match="X must have shape"):
        run_func(f, {"X": np.zeros((8, 4), np.float32), "W": np.zeros((8, 3), np.float32),
                     "Y": np.zeros((4, 3), np.float32)})


def test_printer_shows_loop_kinds() -> None:
    a = Buffer("A", (8,), "float32")
    i = Var("i")
    f = PrimFunc("k", (a,), For(i, 8, Store(a, (i,), const(0.0, "float32")), ForKind.VECTORIZED))
    assert "for i in range(8) vectorized {" in str(f)
