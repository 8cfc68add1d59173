"""Lowerings of the trigonometric, rounding, Mod, activation and bitwise ops, run on the
tensor-IR interpreter against each op's reference, special values and edge amounts included.

Ops built from exact steps (selects, comparisons, bit operations, remainders) must agree
bit for bit; those that call a transcendental intrinsic within a few ulp.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lowercheck import lowered_and_reference

RNG = np.random.default_rng(5)
X = np.concatenate([RNG.uniform(-5, 5, 16),
                    [0.0, -0.0, 0.5, -0.5, 2.5, -2.5, 1.0, np.nan]]).astype(np.float32)
UNIT = np.linspace(-0.9, 0.9, 13).astype(np.float32)
SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0, -3.5], np.float32)

EXACT: list[tuple[str, np.ndarray, dict[str, Any]]] = [
    ("Round", X, {}),
    ("Sign", X, {}),
    ("Sign", np.array([-128, -1, 0, 1, 127], np.int8), {}),
    ("Sign", np.array([0, 1, 255], np.uint8), {}),
    ("IsNaN", SPECIALS, {}),
    ("IsInf", SPECIALS, {}),
    ("IsInf", SPECIALS, {"detect_negative": 0}),
    ("IsInf", SPECIALS, {"detect_positive": 0}),
    ("IsInf", SPECIALS, {"detect_positive": 0, "detect_negative": 0}),
    ("ThresholdedRelu", X, {"alpha": 0.5}),
    ("Shrink", X, {"lambd": 0.5, "bias": 0.25}),
    ("Shrink", np.array([-9, -2, -1, 0, 1, 2, 9], np.int64), {"lambd": 1.5, "bias": 1.5}),
    ("Shrink", np.array([0, 1, 2, 9, 255], np.uint8), {"lambd": 1.0, "bias": 0.5}),
    ("Softsign", X, {}),
    ("BitwiseNot", np.array([-128, -1, 0, 5, 127], np.int8), {}),
    ("BitwiseNot", np.array([0, 5, 65535], np.uint16), {}),
]


@pytest.mark.parametrize(("op", "x", "attrs"), EXACT,
                         ids=[f"{op}-{x.dtype}-{i}" for i, (op, x, _) in enumerate(EXACT)])
def test_exact_unary_lowerings_match_the_reference(op: str, x: np.ndarray, attrs: dict[str, Any]) -> None:
    got, want = lowered_and_reference(op, {"x": x}, **attrs)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


TRANSCENDENTAL: list[tuple[str, np.ndarray, dict[str, Any]]] = [
    ("Sin", X, {}), ("Cos", X, {}), ("Tan", UNIT, {}), ("Asin", UNIT, {}), ("Acos", UNIT, {}),
    ("Atan", X, {}), ("Sinh", X, {}), ("Cosh", X, {}), ("Asinh", X, {}),
    ("Acosh", np.abs(X) + 1, {}), ("Atanh", UNIT, {}),
    ("Elu", X, {"alpha": 0.5}), ("Selu", X, {}), ("Celu", X, {"alpha": 2.0}),
    ("Softplus", np.concatenate([X, np.array([-100, 100, np.inf, -np.inf], np.float32)]), {}),
    ("Mish", X, {}), ("Swish", X, {"alpha": 1.702}),
    ("Sin", X.astype(np.float16), {}), ("Elu", X.astype(np.float16), {}),
    ("Softplus", X.astype(np.float64), {}),
]


@pytest.mark.parametrize(("op", "x", "attrs"), TRANSCENDENTAL,
                         ids=[f"{op}-{x.dtype}-{i}" for i, (op, x, _) in enumerate(TRANSCENDENTAL)])
def test_transcendental_lowerings_match_the_reference(op: str, x: np.ndarray, attrs: dict[str, Any]) -> None:
    got, want = lowered_and_reference(op, {"x": x}, **attrs)
    eps = float(np.finfo(x.dtype).eps)
    np.testing.assert_allclose(got, want, rtol=4 * eps, atol=4 * eps)


MOD_FLOATS = (
    np.array([5.5, -5.5, 5.5, -5.5, -0.0, 0.0, np.inf, 3.0, 5.0, -5.0, 5.0, np.nan, 7.0], np.float32),
    np.array([2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 2.0, 0.0, np.inf, np.inf, -np.inf, 1.0, 3.5], np.float32),
)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_float_mod_keeps_the_special_values_and_signs_of_zero(fmod: int, dtype: str) -> None:
    a, b = (m.astype(dtype) for m in MOD_FLOATS)
    got, want = lowered_and_reference("Mod", {"a": a, "b": b}, fmod=fmod)
    np.testing.assert_array_equal(got, want)
    zeros = want == 0
    if fmod == 0:  # a floored zero takes b's sign (fmod=1 leaves -0 % b open)
        assert np.array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]))


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64"])
def test_integer_mod_broadcasts_and_rounds_as_told(fmod: int, dtype: str) -> None:
    signed = np.dtype(dtype).kind == "i"
    a = np.array([[-7, -6, -1, 0], [1, 5, 7, 100]] if signed else [[7, 6, 1, 0], [1, 5, 7, 200]], dtype)
    b = np.array([3, -3, 4, -5] if signed else [3, 2, 4, 5], dtype)
    got, want = lowered_and_reference("Mod", {"a": a, "b": b}, fmod=fmod)
    np.testing.assert_array_equal(got, want)


def test_prelu_reads_a_broadcast_slope() -> None:
    x = RNG.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    slope = RNG.uniform(-1, 1, (3, 1)).astype(np.float32)
    got, want = lowered_and_reference("PRelu", {"x": x, "slope": slope})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "uint64"])
def test_bitwise_lowerings_match_the_reference(op: str, dtype: str) -> None:
    info = np.iinfo(dtype)
    a = np.array([[info.min, -1 if info.min else 1, 0, info.max], [5, 12, 100, 77]], dtype)
    b = np.array([info.max, 6, 3, info.min], dtype)
    got, want = lowered_and_reference(op, {"a": a, "b": b})
    np.testing.assert_array_equal(got, want)


def test_xor_lowers_to_inequality_of_booleans() -> None:
    got, want = lowered_and_reference("Xor", {"a": np.array([True, False, True, False]),
                                             "b": np.array([True, True, False, False])})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint32", "int64", "uint64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_gives_the_fill_for_every_amount_out_of_range(dtype: str, direction: str) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, 5, 0, 1, 7, info.max, 3, info.max], dtype)
    amounts = [0, 1, 2, info.bits - 1, info.bits, info.bits + 3, 3, 1, info.bits - 1]
    if info.min:
        amounts[-2] = -1  # a negative amount reads as a huge one
    y = np.array(amounts).astype(dtype)
    got, want = lowered_and_reference("BitShift", {"x": x, "y": y}, direction=direction)
    np.testing.assert_array_equal(got, want)
