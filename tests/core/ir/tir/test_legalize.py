"""Legalisation keeps a function's meaning: the interpreter gives the same results before
and after, on the edge values of every rule, and only primitives remain."""

from __future__ import annotations

from collections.abc import Callable
import itertools

import ml_dtypes
import numpy as np
import pytest

from hetero.core.ir.tir import Buffer, For, PrimFunc, Store, Var, call, cast, maximum, minimum, run_func
from hetero.core.ir.tir.expr import Expr, binary, bitcast, const
from hetero.core.ir.tir.legalize import Native, check_legal, legalize
from hetero.errors import VerificationError

# The edge values include ones that overflow the narrower types on purpose (to infinity).
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

INT_EDGES = {
    "int64": [-7, 7, 0, -1, 1, 3, -3, 2**63 - 1, -2**63],
    "int32": [-7, 7, 0, -1, 1, 5, -2**31, 2**31 - 1],
    "int8": [-7, 7, 0, -1, 1, 2, -128, 127],
    "uint8": [0, 1, 2, 7, 255, 128],
    "uint64": [0, 1, 3, 2**64 - 1, 2**63],
}
FLOAT_EDGES = [-7.5, 7.5, 0.0, -0.0, 3.0, -3.0, 0.5, np.inf, -np.inf, np.nan, 1e-40, -2.5e-39, 1e30]


def elementwise(fn: Callable[..., Expr], in_dtypes: list[str], out_dtype: str, n: int) -> PrimFunc:
    """``Y[i] = fn(X0[i], X1[i], ...)`` over ``n`` elements."""
    ins = [Buffer(f"X{k}", (n,), dt) for k, dt in enumerate(in_dtypes)]
    out = Buffer("Y", (n,), out_dtype)
    i = Var("i")
    return PrimFunc("f", (*ins, out), For(i, n, Store(out, (i,), fn(*(b[i] for b in ins)))))


def legalized(func: PrimFunc, *arrays: np.ndarray, native: Native = Native()) -> np.ndarray:
    """The interpreter's output of ``func``'s legalised form (checked legal)."""
    legal = check_legal(legalize(func, native), native)
    return _run(legal, arrays)


def before_after(func: PrimFunc, *arrays: np.ndarray, native: Native = Native()) -> tuple[np.ndarray, np.ndarray]:
    """The interpreter's output of ``func`` and of its legalised form."""
    return _run(func, arrays), legalized(func, *arrays, native=native)


def _run(func: PrimFunc, arrays: tuple[np.ndarray, ...]) -> np.ndarray:
    feeds = {f"X{k}": a for k, a in enumerate(arrays)}
    feeds["Y"] = np.zeros(func.params[-1].shape, func.params[-1].dtype)
    with np.errstate(all="ignore"):
        return run_func(func, feeds)["Y"]


def assert_same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal values, NaN where NaN, and the same sign of every zero (a NaN's sign is no value)."""
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":
        number = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


def pairs(values: list) -> tuple[list, list]:
    a, b = zip(*itertools.product(values, values))
    return list(a), list(b)


@pytest.mark.parametrize("dtype", list(INT_EDGES))
@pytest.mark.parametrize("op", ["div", "floordiv", "mod"])
def test_integer_division_with_zero_divisors_and_int_min(op: str, dtype: str) -> None:
    a, b = (np.array(v, dtype) for v in pairs(INT_EDGES[dtype]))
    before, after = before_after(elementwise(lambda x, y: binary(op, x, y), [dtype] * 2, dtype, a.size), a, b)
    assert_same(after, before)
    if op != "div":  # numpy's floored division, 0 for a zero divisor
        with np.errstate(all="ignore"):
            want = np.floor_divide(a, b) if op == "floordiv" else np.remainder(a, b)
        assert_same(after, np.where(b == 0, 0, want).astype(dtype))


@pytest.mark.parametrize("divisor", [3, -3, 1, 8, 0, -1])
def test_integer_division_by_a_literal(divisor: int) -> None:
    a = np.array(INT_EDGES["int64"] + list(range(-9, 10)), np.int64)
    for op in ("div", "floordiv", "mod"):
        func = elementwise(lambda x: binary(op, x, const(divisor, np.int64)), ["int64"], "int64", a.size)
        before, after = before_after(func, a)
        assert_same(after, before)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_float_floordiv_and_mod_match_numpy(op: str, dtype: str) -> None:
    a, b = (np.array(v, dtype) for v in pairs(FLOAT_EDGES))
    before, after = before_after(elementwise(lambda x, y: binary(op, x, y), [dtype] * 2, dtype, a.size), a, b)
    assert_same(after, before)
    with np.errstate(all="ignore"):
        want = np.floor_divide(a, b) if op == "floordiv" else np.remainder(a, b)
    assert_same(after, want)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("fn", [minimum, maximum])
def test_nan_propagating_min_max_as_compare_and_select(fn: Callable, dtype: str) -> None:
    a, b = (np.array(v, dtype) for v in pairs(FLOAT_EDGES))
    func = elementwise(fn, [dtype] * 2, dtype, a.size)
    before, after = before_after(func, a, b)
    assert_same(after, before)
    np.testing.assert_array_equal(after, (np.minimum if fn is minimum else np.maximum)(a, b))
    # A renderer with IEEE 754-2019 minimum/maximum keeps them as they are.
    native = Native(ieee_minmax=True)
    assert legalize(func, native) is func
    with pytest.raises(VerificationError, match="min of float32|max of float32|of float"):
        check_legal(func)


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint8", "uint32"])
@pytest.mark.parametrize("op", ["shr", "shl"])
def test_shifts_by_any_amount(op: str, dtype: str) -> None:
    info = np.iinfo(dtype)
    values = [0, 5, info.max, info.min, 1] + ([-5, -1] if info.min < 0 else [])
    amounts = [0, 1, 3, info.bits - 1, info.bits, info.bits + 1, 100 % (info.max + 1)] + ([-1] if info.min < 0 else [])
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(values, amounts)))
    before, after = before_after(elementwise(lambda x, y: binary(op, x, y), [dtype] * 2, dtype, a.size), a, b)
    assert_same(after, before)


def _f16_edges() -> list[float]:
    one, eps = 1.0, 2.0 ** -10
    return [one + eps / 2, one + 3 * eps / 2, 65504.0, 65519.0, 65520.0, 1e6, -1e6, 2.0 ** -25,
            3 * 2.0 ** -25, 2.0 ** -24, 2.0 ** -14 * (1 - 2.0 ** -11), -0.0, np.nan, np.inf, 1e-40]


def test_float64_to_float16_rounds_once() -> None:
    # 1 + 2**-11 + 2**-40 is just above the half-way point: float32 first would round it
    # to 1 + 2**-11, the tie, and then to 1; the direct rounding gives 1 + 2**-10.
    x = np.array(_f16_edges() + [1 + 2.0 ** -11 + 2.0 ** -40, -(1 + 2.0 ** -11 + 2.0 ** -40)], np.float64)
    before, after = before_after(elementwise(lambda v: cast(v, "float16"), ["float64"], "float16", x.size), x)
    assert_same(after, before)
    assert_same(after, x.astype(np.float16))
    assert after[-2] == np.float16(1 + 2.0 ** -10)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint16", "int8"])
def test_integer_to_float16(dtype: str) -> None:
    info = np.iinfo(dtype)
    x = np.array([0, 1, -1 % (info.max + 1), 2049, 2051, 65519, 65520, info.max, info.min], np.int64).astype(dtype)
    before, after = before_after(elementwise(lambda v: cast(v, "float16"), [dtype], "float16", x.size), x)
    assert_same(after, before)
    assert_same(after, x.astype(np.float16))


@pytest.mark.parametrize("src", ["float32", "float64", "float16", "int32"])
def test_to_bfloat16_rounds_to_nearest_even(src: str) -> None:
    one = 1.0
    values = [one + 2.0 ** -8, one + 3 * 2.0 ** -8, 3.3895314e38, 3.4e38, -0.0, np.nan, -np.inf, 1e-40,
              1 + 2.0 ** -8 + 2.0 ** -40, 7.0, -300.0]
    if src == "int32":
        values = [0, 1, -1, 257, 259, 2**31 - 1, -2**31, 65535]
    x = np.array(values, np.float64).astype(src) if src != "int32" else np.array(values, np.int32)
    bf = np.dtype(ml_dtypes.bfloat16)
    before, after = before_after(elementwise(lambda v: cast(v, bf), [src], bf, x.size), x)
    assert_same(after.astype(np.float32), before.astype(np.float32))
    assert_same(after.astype(np.float32), x.astype(bf).astype(np.float32))


@pytest.mark.parametrize("dst", ["float32", "float16", "int32", "float64"])
def test_from_bfloat16_is_exact(dst: str) -> None:
    bf = np.dtype(ml_dtypes.bfloat16)
    x = np.array([1.0, -2.5, 3.0e38, -0.0, np.inf, 1e-39, 1000.0, 65504.0], np.float32).astype(bf)
    if dst == "int32":
        x = x[np.isfinite(x.astype(np.float32)) & (np.abs(x.astype(np.float32)) < 2**31)]
    before, after = before_after(elementwise(lambda v: cast(v, dst), [bf], dst, x.size), x)
    assert_same(after, before)
    assert_same(after, x.astype(dst))


NARROW_FLOATS = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
                 "float4_e2m1fn"]


@pytest.mark.parametrize("name", NARROW_FLOATS)
def test_narrow_float_decodes_every_pattern(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    count = 16 if name.startswith("float4") else 256
    x = np.arange(count, dtype=np.uint8).view(dtype)
    before, after = before_after(elementwise(lambda v: cast(v, "float32"), [dtype], "float32", count), x)
    assert_same(after, before)
    assert_same(after, x.astype(np.float32))


def _encode_inputs(dtype: np.dtype) -> np.ndarray:
    """Every value of ``dtype``, the points half-way between neighbours and just beside
    them, values past the largest, float32 subnormals, infinities and NaN."""
    count = 16 if dtype.name.startswith("float4") else 256
    grid = np.unique(np.arange(count, dtype=np.uint8).view(dtype).astype(np.float64))
    grid = grid[np.isfinite(grid)]
    mids = (grid[1:] + grid[:-1]) / 2
    near = np.concatenate([mids * (1 + 2.0 ** -20), mids * (1 - 2.0 ** -20)])
    extra = np.array([1e-40, -1e-40, 1e30, -1e30, np.inf, -np.inf, np.nan, grid.max() * 1.1])
    return np.concatenate([grid, mids, near, extra]).astype(np.float32)


@pytest.mark.parametrize("name", NARROW_FLOATS)
def test_float32_to_narrow_float_rounds_like_ml_dtypes(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = _encode_inputs(dtype)
    func = elementwise(lambda v: bitcast(cast(v, dtype), "uint8"), ["float32"], "uint8", x.size)
    after = legalized(func, x)
    with np.errstate(all="ignore"):
        want = x.astype(dtype)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(after[~nan], want.view(np.uint8)[~nan])
    assert np.isnan(after.view(dtype).astype(np.float32)[nan]).all()


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
def test_narrow_int_conversions(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    lo, hi = int(ml_dtypes.iinfo(dtype).min), int(ml_dtypes.iinfo(dtype).max)
    floats = np.array([lo, hi, lo - 0.5, hi + 0.9, hi + 1.0, lo - 1.0, 0.7, -0.7, np.nan, 100.0], np.float32)
    to_narrow = elementwise(lambda v: bitcast(cast(v, dtype), "uint8"), ["float32"], "uint8", floats.size)
    after = legalized(to_narrow, floats)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(after, floats.astype(dtype).view(np.uint8))
    ints = np.array([lo, hi, 0, 20, -9, 100, -128, 127], np.int64)
    after = legalized(elementwise(lambda v: bitcast(cast(v, dtype), "uint8"), ["int64"], "uint8", ints.size), ints)
    np.testing.assert_array_equal(after, ints.astype(dtype).view(np.uint8))
    every = np.arange(lo, hi + 1).astype(dtype)
    before, after = before_after(elementwise(lambda v: cast(v, "int32"), [dtype], "int32", every.size), every)
    assert_same(after, before)
    assert_same(after, np.arange(lo, hi + 1, dtype=np.int32))


def test_narrow_to_narrow_and_literals() -> None:
    e4, e5 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
    x = np.arange(256, dtype=np.uint8).view(e4)
    before, after = before_after(elementwise(lambda v: cast(v, e5), [e4], e5, 256), x)
    assert_same(after.astype(np.float32), before.astype(np.float32))
    func = elementwise(lambda v: cast(const(1.5, e4), "float32") + cast(v, "float32"), [e4], "float32", 256)
    before, after = before_after(func, x)
    assert_same(after, before)


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint8", "bool"])
def test_intrinsics_of_integers(dtype: str) -> None:
    x = np.array([0, 1, 3, -128, 127, -5] if dtype.startswith("int") else [0, 1, 3, 200], np.int64).astype(dtype)
    for name in ("abs", "floor", "ceil", "round_even"):
        before, after = before_after(elementwise(lambda v: call(name, v), [dtype], dtype, x.size), x)
        assert_same(after, before)
    if dtype != "bool":  # exp and sqrt of an integer: in float64, cast back
        small = x[(x.astype(np.int64) >= 0) & (x.astype(np.int64) < 20)]
        for name in ("exp", "sqrt"):
            before, after = before_after(elementwise(lambda v: call(name, v), [dtype], dtype, small.size), small)
            assert_same(after, before)


def test_check_legal_names_the_operation_and_legalize_keeps_the_input() -> None:
    func = elementwise(lambda x, y: binary("floordiv", x, y), ["int32"] * 2, "int32", 4)
    with pytest.raises(VerificationError, match="floordiv of int32"):
        check_legal(func)
    legal = legalize(func)
    assert "//" in str(func) and "//" not in str(legal) and "tdiv" in str(legal)
    assert check_legal(legal) is legal
    primitive = elementwise(lambda x, y: x + y, ["int32"] * 2, "int32", 4)
    assert legalize(primitive) is primitive


def test_shared_operands_stay_shared() -> None:
    """Nested floored divisions grow linearly, not exponentially, as objects."""
    i = Var("i")
    e: Expr = i
    for k in range(12):
        e = binary("floordiv", e, Var("n", np.dtype("int64"))) + k
    out = Buffer("Y", (4,), "int64")
    legal = legalize(PrimFunc("f", (out,), For(i, 4, Store(out, (i,), e))))
    seen: set[int] = set()

    def count(x: object) -> None:
        if id(x) in seen or not hasattr(x, "dtype"):
            return
        seen.add(id(x))
        for child in vars(x).values():
            for c in child if isinstance(child, tuple) else (child,):
                count(c)

    count(legal.body.body.value)  # type: ignore[attr-defined]
    assert len(seen) < 12 * 30


def _dot4_numpy(acc: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """acc + sum over bytes k of a's byte k unsigned times b's byte k signed, wrapped to int32."""
    ua = a.astype("<i4").view(np.uint8).reshape(-1, 4).astype(np.int64)
    sb = b.astype("<i4").view(np.int8).reshape(-1, 4).astype(np.int64)
    return (acc.astype(np.int64) + (ua * sb).sum(axis=1)).astype(np.uint32).astype(np.int64).astype(np.int32)


def test_dot4_u8s8_is_four_byte_products_and_legalizes_to_them() -> None:
    rng = np.random.default_rng(4)
    edges = np.array([0, -1, 2**31 - 1, -2**31, 0x7F7F7F7F, -0x7F7F7F80, 0x80808080 - 2**32, 0x01FF80FF], np.int64)
    acc, a, b = (np.concatenate([rng.integers(-2**31, 2**31, 40), np.repeat(edges, 8)[:64]]).astype(np.int32)
                 for _ in range(3))
    b[40:] = np.tile(edges, 8)[:64].astype(np.int32)  # every pair of edge words
    func = elementwise(lambda s, x, y: call("dot4_u8s8", s, x, y), ["int32"] * 3, "int32", acc.size)
    before, after = before_after(func, acc, a, b)
    assert_same(before, _dot4_numpy(acc, a, b))
    assert_same(after, before)
    # A renderer with the instruction keeps the call; one without gets only primitives.
    with pytest.raises(VerificationError, match="dot4_u8s8"):
        check_legal(func)
    native = Native(dot4_u8s8=True)
    assert legalize(func, native) is func and check_legal(func, native) is func
    assert "dot4_u8s8" not in str(legalize(func))
