"""The interpreter divides integers exactly: truncating ``div``, floored ``floordiv`` and
``mod`` (the remainder takes the divisor's sign), 0 for a zero divisor, ``MIN // -1``
wrapping to ``MIN`` — checked against Python's exact integers, near 2**62 and 2**64."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import Buffer, For, PrimFunc, Store, Var, run_func, seq
from hetero.core.ir.tir.expr import binary

OPS = ("div", "floordiv", "mod")


def divisions(dtype: str, n: int) -> PrimFunc:
    """div, floordiv and mod of A by B, elementwise, into Q, F and M."""
    a, b = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    outs = [Buffer(name, (n,), dtype) for name in "QFM"]
    i = Var("i")
    body = seq(*(Store(out, (i,), binary(op, a[i], b[i])) for out, op in zip(outs, OPS)))
    return PrimFunc("divisions", (a, b, *outs), For(i, n, body))


def exact(op: str, a: int, b: int, dtype: np.dtype) -> int:
    """What the IR defines, on Python integers, wrapped to ``dtype``."""
    if b == 0:
        value = 0
    elif op == "div":
        value = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    else:
        value = a // b if op == "floordiv" else a % b
    info = np.iinfo(dtype)
    return (value - int(info.min)) % (1 << 8 * dtype.itemsize) + int(info.min)


def run(dtype: str, pairs: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    zeros = np.zeros(len(pairs), dtype)
    return run_func(divisions(dtype, len(pairs)), {"A": a, "B": b, "Q": zeros, "F": zeros, "M": zeros})


def check(dtype: str, pairs: list[tuple[int, int]]) -> None:
    out = run(dtype, pairs)
    dt = np.dtype(dtype)
    for name, op in zip("QFM", OPS):
        want = [exact(op, a, b, dt) for a, b in pairs]
        assert [int(v) for v in out[name]] == want, (op, pairs)


BIG = 2**62


def test_int64_near_two_to_the_62_is_exact() -> None:
    # float64 has 53 bits: every one of these quotients is off through float division.
    pairs = [(BIG + 12345, 3), (BIG + 1, 7), (-(BIG + 5), 3), (BIG + 3, -(2**31 + 11)),
             (2**63 - 1, 2**62 + 1), (2**63 - 1, 10), (-(2**63), 10**9 + 7)]
    check("int64", pairs)
    q = run("int64", [(BIG + 12345, 3)])["Q"][0]
    assert int(q) == (BIG + 12345) // 3 != int(np.trunc(np.float64(BIG + 12345) / 3.0))


def test_signs_follow_truncation_for_div_and_the_floor_for_floordiv_and_mod() -> None:
    pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, -5), (1, 3), (-1, 3)]
    check("int64", pairs)
    out = run("int64", [(-7, 2), (7, -2)])
    assert list(out["Q"]) == [-3, -3] and list(out["F"]) == [-4, -4] and list(out["M"]) == [1, -1]


def test_a_zero_divisor_gives_zero_and_min_over_minus_one_wraps() -> None:
    lo = -(2**63)
    out = run("int64", [(5, 0), (-5, 0), (0, 0), (lo, -1)])
    assert [int(v) for v in out["Q"]] == [0, 0, 0, lo]
    assert [int(v) for v in out["F"]] == [0, 0, 0, lo]
    assert [int(v) for v in out["M"]] == [0, 0, 0, 0]


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint64"])
def test_other_integer_dtypes_are_exact(dtype: str) -> None:
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    pairs = [(hi, 3), (hi - 1, hi), (hi, 1), (lo, 7), (hi, 0), (lo + 1, 2)]
    if lo < 0:
        pairs += [(lo, -1), (-5, 3), (5, -3), (lo, hi)]
    check(dtype, pairs)
