"""llvm_cpu renders legalised functions: compiled results match the interpreter on the
edge values of every legalisation rule, and what a CPU cannot map is refused by name."""

from __future__ import annotations

from collections.abc import Callable
import itertools

import ml_dtypes
import numpy as np
import pytest

from hetero.core.ir.tir import Buffer, For, PrimFunc, Store, Var, cast, maximum, minimum, run_func, seq
from hetero.core.ir.tir.expr import Expr, binary, bitcast, call
from hetero.core.ir.tir.stmt import Barrier, Evaluate
from hetero.errors import CodegenError
from hetero.plugins.llvm_cpu import CompiledKernel, render

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

FLOATS = [-7.5, 7.5, 0.0, -0.0, 3.0, -3.0, 0.5, np.inf, -np.inf, np.nan, 1e-40, 1e30]
INTS = {"int64": [-7, 7, 0, -1, 1, 3, 2**63 - 1, -2**63], "int32": [-7, 7, 0, -1, 3, -2**31, 2**31 - 1],
        "int8": [-7, 7, 0, -1, 2, -128, 127], "uint8": [0, 1, 7, 255, 128]}


def _elementwise(fn: Callable[..., Expr], in_dtypes: list, out_dtype: object, n: int) -> PrimFunc:
    ins = [Buffer(f"X{k}", (n,), dt) for k, dt in enumerate(in_dtypes)]
    out = Buffer("Y", (n,), out_dtype)
    i = Var("i")
    return PrimFunc("f", (*ins, out), For(i, n, Store(out, (i,), fn(*(b[i] for b in ins)))))


def _compiled_and_interpreted(func: PrimFunc, *arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    feeds = {f"X{k}": a for k, a in enumerate(arrays)}
    got = CompiledKernel(func).run(**feeds)["Y"]
    with np.errstate(all="ignore"):
        want = run_func(func, {**feeds, "Y": np.zeros(func.params[-1].shape, func.params[-1].dtype)})["Y"]
    return got, want


def _same(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


@pytest.mark.parametrize("dtype", list(INTS))
def test_integer_division_rules(dtype: str) -> None:
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(INTS[dtype], INTS[dtype])))
    for op in ("div", "floordiv", "mod"):
        _same(*_compiled_and_interpreted(_elementwise(lambda x, y: binary(op, x, y), [dtype] * 2, dtype, a.size), a, b))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_float_floordiv_mod_min_max(dtype: str) -> None:
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(FLOATS, FLOATS)))
    for op in ("floordiv", "mod"):
        got, want = _compiled_and_interpreted(_elementwise(lambda x, y: binary(op, x, y), [dtype] * 2, dtype, a.size), a, b)
        _same(got, want)
    for fn in (minimum, maximum):
        got, want = _compiled_and_interpreted(_elementwise(fn, [dtype] * 2, dtype, a.size), a, b)
        np.testing.assert_array_equal(got, want)  # which zero a tie of -0 and +0 gives is open


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint32"])
def test_shifts_by_any_amount(dtype: str) -> None:
    info = np.iinfo(dtype)
    values = [0, 5, int(info.max), int(info.min), 1]
    amounts = [0, 1, info.bits - 1, info.bits, info.bits + 1] + ([-1] if info.min < 0 else [])
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(values, amounts)))
    for op in ("shr", "shl"):
        _same(*_compiled_and_interpreted(_elementwise(lambda x, y: binary(op, x, y), [dtype] * 2, dtype, a.size), a, b))


def test_float16_and_bfloat16_rounding() -> None:
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 65519.0, 65520.0, 2.0 ** -25,
                  3 * 2.0 ** -25, -0.0, np.nan, np.inf, 3.4e38, 1e-40, 1 + 2.0 ** -8 + 2.0 ** -40])
    got, want = _compiled_and_interpreted(_elementwise(lambda v: cast(v, "float16"), ["float64"], "float16", x.size), x)
    _same(got, want)
    _same(got, x.astype(np.float16))
    bf = np.dtype(ml_dtypes.bfloat16)
    for src in ("float64", "float32"):
        data = x.astype(src)
        got, want = _compiled_and_interpreted(_elementwise(lambda v: cast(v, bf), [src], bf, x.size), data)
        _same(got.astype(np.float32), data.astype(bf).astype(np.float32))
        _same(got.astype(np.float32), want.astype(np.float32))
    ints = np.array([2049, 2051, 70000, -1, 0, 2**40 + 1], np.int64)
    got, _ = _compiled_and_interpreted(_elementwise(lambda v: cast(v, "float16"), ["int64"], "float16", ints.size), ints)
    _same(got, ints.astype(np.float16))


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                                  "float8_e8m0fnu", "float4_e2m1fn"])
def test_narrow_floats_every_pattern_and_back(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    count = 16 if name.startswith("float4") else 256
    x = np.arange(count, dtype=np.uint8).view(dtype)
    got, want = _compiled_and_interpreted(_elementwise(lambda v: cast(v, "float32"), [dtype], "float32", count), x)
    _same(got, want)
    values = x.astype(np.float32)
    values = np.concatenate([values, values * np.float32(1.0625), values * np.float32(0.97), [1e-40, 1e30]])
    values = values.astype(np.float32)
    func = _elementwise(lambda v: bitcast(cast(v, dtype), "uint8"), ["float32"], "uint8", values.size)
    got = CompiledKernel(func).run(X0=values)["Y"]
    with np.errstate(all="ignore"):
        want_bits = values.astype(dtype).view(np.uint8)
    nan = np.isnan(values.astype(dtype).astype(np.float32))
    np.testing.assert_array_equal(got[~nan], want_bits[~nan])
    assert np.isnan(got.view(dtype).astype(np.float32)[nan]).all()


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8"])
def test_intrinsics_of_integers(dtype: str) -> None:
    x = np.array([0, 1, 3, 9, 127] + ([-5, -128] if dtype != "uint8" else []), dtype)
    for name in ("abs", "floor", "exp", "sqrt"):
        data = x if name not in ("exp", "sqrt") else x[(x >= 0) & (x < 4)]  # exp(x) fits the dtype
        _same(*_compiled_and_interpreted(_elementwise(lambda v: call(name, v), [dtype], dtype, data.size), data))


def test_barrier_and_call_statements_are_refused_by_name() -> None:
    x, y = Buffer("X", (4,), "float32"), Buffer("Y", (4,), "float32")
    i = Var("i")
    copy = For(i, 4, Store(y, (i,), x[i]))
    with pytest.raises(CodegenError, match="barrier"):
        render(PrimFunc("f", (x, y), seq(copy, Barrier("shared"), copy)))
    with pytest.raises(CodegenError, match="Evaluate.*exp"):
        render(PrimFunc("g", (x, y), seq(copy, Evaluate(call("exp", x[0])))))
