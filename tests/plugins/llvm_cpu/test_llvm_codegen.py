"""The LLVM renderer computes what the tensor IR means: numbers against numpy and run_func."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import (
    Allocate, Block, Buffer, For, IfThenElse, PrimFunc, Store, Var, call, cast, compute, eq, ge, gt,
    logical_and, logical_or, lower, lt, max_, maximum, minimum, ne, placeholder, reduce_axis, run_func,
    select, seq, sum_,
)
from hetero.core.ir.tir.expr import Not, binary
from hetero.plugins.llvm_cpu import CompiledKernel, render
from opcheck import assert_within

RNG = np.random.default_rng(7)


def _compare_with_interpreter(func: PrimFunc, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``func`` compiled and interpreted on the same arrays; assert outputs are identical."""
    kernel = CompiledKernel(func)
    got = kernel.run(**{b.name: arrays[b.name] for b in kernel.inputs})
    want = run_func(func, {**{b.name: np.zeros(b.shape, b.dtype) for b in kernel.outputs}, **arrays})
    for name, value in got.items():
        np.testing.assert_array_equal(value, want[name], err_msg=name)
    return got


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int64", "uint16"])
def test_broadcast_add_matches_numpy_exactly(dtype: str) -> None:
    a = placeholder((4, 1, 5), dtype, "A")
    b = placeholder((3, 1), dtype, "B")
    c = compute((4, 3, 5), lambda i, j, k: a[i, 0, k] + b[j, 0], "C")
    x = (RNG.standard_normal((4, 1, 5)) * 20).astype(dtype)
    y = (RNG.standard_normal((3, 1)) * 20).astype(dtype)
    got = CompiledKernel(lower("badd", [a, b], [c])).run(A=x, B=y)["C"]
    # One addition per element: no contraction is possible, so the result is numpy's bit for bit.
    np.testing.assert_array_equal(got, x + y.reshape(1, 3, 1))


def test_matmul_with_relu_epilogue_within_rounding_bound() -> None:
    n, k, m = 16, 32, 8
    x_t, w_t = placeholder((n, k), "float32", "X"), placeholder((k, m), "float32", "W")
    r = reduce_axis(k, "r")
    y_t = compute((n, m), lambda i, j: maximum(sum_(x_t[i, r] * w_t[r, j], r), 0.0), "Y")
    x = RNG.standard_normal((n, k)).astype(np.float32)
    w = RNG.standard_normal((k, m)).astype(np.float32)
    got = CompiledKernel(lower("dense_relu", [x_t, w_t], [y_t])).run(X=x, W=w)["Y"]
    exact = np.maximum(x.astype(np.float64) @ w.astype(np.float64), 0.0)
    # A k-term dot product in float32 (fused or not) is within k roundings of the exact sum,
    # each at most eps * sum|x||w|; relu adds no rounding.
    assert_within(got, exact.astype(np.float32), np.abs(x) @ np.abs(w), roundings=k)
    assert np.all(got >= 0)


def test_max_reduction_is_exact() -> None:
    x_t = placeholder((6, 9), "float32", "X")
    r = reduce_axis(9, "r")
    y_t = compute((6,), lambda i: max_(x_t[i, r], r), "Y")
    x = RNG.standard_normal((6, 9)).astype(np.float32)
    got = CompiledKernel(lower("rowmax", [x_t], [y_t])).run(X=x)["Y"]
    np.testing.assert_array_equal(got, x.max(axis=1))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_division_floors_and_truncates_like_the_interpreter(dtype: str) -> None:
    a_t, b_t = placeholder((64,), dtype, "A"), placeholder((64,), dtype, "B")
    q = compute((64,), lambda i: a_t[i] // b_t[i], "Q")
    m = compute((64,), lambda i: a_t[i] % b_t[i], "M")
    d = compute((64,), lambda i: a_t[i] / b_t[i], "D")
    low = 0 if dtype.startswith("u") else -100
    a = RNG.integers(low, 100, 64).astype(dtype)
    b = RNG.integers(-7 if low else 0, 8, 64).astype(dtype)
    b[:3] = 0  # division by zero gives 0, as in the interpreter (no trap)
    if low:
        b[3:6] = -1
    got = _compare_with_interpreter(lower("idiv", [a_t, b_t], [q, m, d]), {"A": a, "B": b})
    nonzero = b != 0
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["Q"][nonzero], (a // b)[nonzero])
        np.testing.assert_array_equal(got["M"][nonzero], (a % b)[nonzero])
    assert not got["Q"][~nonzero].any() and not got["M"][~nonzero].any()


def test_float_floordiv_and_mod_follow_numpy() -> None:
    a_t, b_t = placeholder((40,), "float64", "A"), placeholder((40,), "float64", "B")
    q = compute((40,), lambda i: a_t[i] // b_t[i], "Q")
    m = compute((40,), lambda i: a_t[i] % b_t[i], "M")
    a = RNG.uniform(-10, 10, 40)
    b = RNG.uniform(-3, 3, 40)
    b[0], a[1], b[1] = 0.0, 0.0, -2.0
    got = _compare_with_interpreter(lower("fdivmod", [a_t, b_t], [q, m]), {"A": a, "B": b})
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["Q"], a // b)
        np.testing.assert_array_equal(got["M"], a % b)


def test_integer_pow_by_squaring() -> None:
    a_t, b_t = placeholder((12,), "int32", "A"), placeholder((12,), "int32", "B")
    p = compute((12,), lambda i: binary("pow", a_t[i], b_t[i]), "P")
    a = np.array([2, 3, -2, 5, 0, 1, 7, -3, 2, 1, -1, -1], np.int32)
    b = np.array([0, 4, 5, 3, 0, 9, 2, 3, -1, -4, -3, -2], np.int32)
    got = CompiledKernel(lower("ipow", [a_t, b_t], [p])).run(A=a, B=b)["P"]
    # Negative exponents: 1 / a**-b truncated toward zero.
    want = [int(x) ** int(y) if y >= 0 else int(1 / (int(x) ** -int(y))) for x, y in zip(a, b)]
    np.testing.assert_array_equal(got, np.array(want, np.int32))


def test_select_compare_and_min_max_handle_nan_like_the_interpreter() -> None:
    a_t, b_t = placeholder((32,), "float32", "A"), placeholder((32,), "float32", "B")
    s = compute((32,), lambda i: select(gt(a_t[i], b_t[i]), a_t[i] * 2.0, b_t[i] - 1.0), "S")
    lo = compute((32,), lambda i: minimum(a_t[i], b_t[i]), "LO")
    hi = compute((32,), lambda i: maximum(a_t[i], b_t[i]), "HI")
    a = RNG.standard_normal(32).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    a[:2], b[2:4], b[4] = np.nan, np.nan, a[4]
    got = _compare_with_interpreter(lower("sel", [a_t, b_t], [s, lo, hi]), {"A": a, "B": b})
    np.testing.assert_array_equal(got["S"], np.where(a > b, a * 2, b - 1))


def test_bool_outputs_from_comparisons_and_logic() -> None:
    a_t, b_t = placeholder((5, 7), "int16", "A"), placeholder((5, 7), "int16", "B")
    both = compute((5, 7), lambda i, j: logical_and(lt(a_t[i, j], b_t[i, j]), ne(a_t[i, j], 0)), "BOTH")
    either = compute((5, 7), lambda i, j: logical_or(eq(a_t[i, j], b_t[i, j]), Not(ge(a_t[i, j], 0))),
                     "EITHER")
    a = RNG.integers(-3, 4, (5, 7)).astype(np.int16)
    b = RNG.integers(-3, 4, (5, 7)).astype(np.int16)
    got = CompiledKernel(lower("logic", [a_t, b_t], [both, either])).run(A=a, B=b)
    assert got["BOTH"].dtype == np.bool_
    np.testing.assert_array_equal(got["BOTH"], (a < b) & (a != 0))
    np.testing.assert_array_equal(got["EITHER"], (a == b) | ~(a >= 0))


def test_bool_inputs_are_read_as_bytes() -> None:
    m_t, x_t = placeholder((9,), "bool", "M"), placeholder((9,), "float32", "X")
    y_t = compute((9,), lambda i: select(m_t[i], x_t[i], cast(m_t[i], "float32") - 5.0), "Y")
    m = RNG.integers(0, 2, 9).astype(bool)
    x = RNG.standard_normal(9).astype(np.float32)
    got = CompiledKernel(lower("mask", [m_t, x_t], [y_t])).run(M=m, X=x)["Y"]
    np.testing.assert_array_equal(got, np.where(m, x, np.float32(-5.0)))


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "tanh", "erf"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transcendental_intrinsics_within_few_ulp(fn: str, dtype: str) -> None:
    x_t = placeholder((50,), dtype, "X")
    y_t = compute((50,), lambda i: call(fn, x_t[i]), "Y")
    x = RNG.uniform(0.01, 4.0, 50).astype(dtype)
    if fn in ("tanh", "erf"):
        x = x - 2
    got = CompiledKernel(lower(f"call_{fn}", [x_t], [y_t])).run(X=x)["Y"]
    want = run_func(lower(f"call_{fn}", [x_t], [y_t]), {"X": x, "Y": np.zeros(50, dtype)})["Y"]
    # glibc's and numpy's implementations are each within about 1-2 ulp of the true value.
    np.testing.assert_array_max_ulp(got, want, maxulp=4)


@pytest.mark.parametrize("fn", ["abs", "floor", "ceil", "round_even"])
def test_exact_intrinsics(fn: str) -> None:
    x_t = placeholder((40,), "float32", "X")
    y_t = compute((40,), lambda i: call(fn, x_t[i]), "Y")
    x = (RNG.uniform(-4, 4, 40) * 2).round() / 4  # many exact halves, to test ties-to-even
    x = x.astype(np.float32)
    got = CompiledKernel(lower(f"exact_{fn}", [x_t], [y_t])).run(X=x)["Y"]
    want = {"abs": np.abs, "floor": np.floor, "ceil": np.ceil, "round_even": np.rint}[fn](x)
    np.testing.assert_array_equal(got, want)


def test_casts_between_floats_ints_and_bools() -> None:
    x_t, n_t = placeholder((24,), "float32", "X"), placeholder((24,), "int32", "N")
    to_int = compute((24,), lambda i: cast(x_t[i], "int32"), "TI")
    to_u8 = compute((24,), lambda i: cast(n_t[i], "uint8"), "TU")
    to_half = compute((24,), lambda i: cast(n_t[i], "float16"), "TH")
    to_f64 = compute((24,), lambda i: cast(x_t[i], "float64") * 3.0, "TD")
    to_bool = compute((24,), lambda i: cast(x_t[i], "bool"), "TB")
    x = RNG.uniform(-50, 50, 24).astype(np.float32)
    x[0], x[1] = 0.0, -0.0
    n = RNG.integers(-1000, 1000, 24).astype(np.int32)
    got = _compare_with_interpreter(lower("casts", [x_t, n_t], [to_int, to_u8, to_half, to_f64, to_bool]),
                                    {"X": x, "N": n})
    np.testing.assert_array_equal(got["TI"], np.trunc(x).astype(np.int32))
    np.testing.assert_array_equal(got["TU"], n.astype(np.uint8))
    np.testing.assert_array_equal(got["TH"], n.astype(np.float16))
    np.testing.assert_array_equal(got["TB"], x != 0)


def test_intermediate_global_allocation_becomes_a_workspace() -> None:
    x_t = placeholder((8, 4), "float32", "X")
    t_t = compute((8, 4), lambda i, j: x_t[i, j] * 2.0, "T")
    r = reduce_axis(4, "r")
    y_t = compute((8,), lambda i: sum_(t_t[i, r], r) + 1.0, "Y")
    func = lower("two_stage", [x_t], [y_t])
    rendered = render(func)
    assert [w.name for w in rendered.workspaces] == ["T"]
    assert len(rendered.entries) == 2
    x = RNG.standard_normal((8, 4)).astype(np.float32)
    got = CompiledKernel(func).run(X=x)["Y"]
    want = run_func(func, {"X": x, "Y": np.zeros(8, np.float32)})["Y"]
    # Same operations in the same order; only x*2 + acc may fuse, and doubling is exact.
    np.testing.assert_array_equal(got, want)


def test_if_then_else_and_large_inner_allocation() -> None:
    i, j = Var("i"), Var("j")
    x_t = placeholder((4, 20000), "float32", "X").buffer
    y_t = placeholder((4,), "float32", "Y").buffer
    tmp = Buffer("tmp", (20000,), "float32")  # 80 kB: over the stack limit, so heap
    fill = For(j, 20000, Store(tmp, (j,), x_t[i, j] * 0.5))
    pick = IfThenElse(lt(i, 2), Store(y_t, (i,), tmp[i * 7]), Store(y_t, (i,), tmp[19999]))
    body = For(i, 4, Allocate(tmp, seq(fill, pick)))
    func = PrimFunc("branchy", (x_t, y_t), Block("Y", body, y_t))
    x = RNG.standard_normal((4, 20000)).astype(np.float32)
    got = CompiledKernel(func).run(X=x)["Y"]
    want = np.array([x[0, 0], x[1, 7], x[2, 19999], x[3, 19999]], np.float32) * np.float32(0.5)
    np.testing.assert_array_equal(got, want)
    assert "malloc" in str(render(func).module)
