"""Elementwise lowerings, run on the tensor-IR interpreter, against each op's reference.

Where the lowering performs the reference's float operations in the same order, the
results must be equal bit for bit. Transcendentals (exp, log, tanh, pow) may come
from a different libm path (numpy's vector loops vs a scalar call): those allow a
few units in the last place of the result.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lowercheck import lowered_and_reference
from opcheck import assert_within, reference

from hetero.core.ir.tir import Store, walk
from hetero.core.lower import lower_node

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32) * 3
X[0, 0, :2] = (0.0, -0.0)
X[0, 1, :3] = (2.5, -2.5, -3.0)  # round-half and integral values for Floor/Ceil/HardSwish
POSITIVE = np.abs(X) + 0.25


def assert_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


EXACT_UNARY: list[tuple[str, np.ndarray, dict[str, Any]]] = [
    ("Relu", X, {}),
    ("LeakyRelu", X, {"alpha": 0.1}),
    ("HardSigmoid", X, {"alpha": 0.3, "beta": 0.4}),
    ("HardSwish", X, {}),
    ("Erf", X, {}),
    ("Sqrt", POSITIVE, {}),
    ("Reciprocal", X + 0.125, {}),
    ("Floor", X, {}),
    ("Ceil", X, {}),
    ("Neg", X, {}),
    ("Abs", X, {}),
    ("Identity", X, {}),
    ("Dropout", X, {}),
    ("Clip", X, {"min": -1.0, "max": 2.0}),
    ("Clip", X, {"min": 0.5}),
    ("Relu", np.array([-5, 0, 7], np.int32), {}),
    ("Neg", np.array([-5, 0, 7], np.int64), {}),
    ("Abs", np.array([-128, -3, 0, 5, 127], np.int8), {}),
    ("Abs", np.array([0, 5, 255], np.uint8), {}),
    ("Clip", np.array([-9, -3, -2, 0, 3, 4, 9], np.int32), {"min": -2.5, "max": 3.5}),
    ("Clip", np.array([0, 100, 255], np.uint8), {"min": -1e9, "max": 200.0}),
    ("Not", np.array([True, False, True]), {}),
    ("Identity", np.array([[True, False]]), {}),
    ("Cast", X, {"to": np.dtype("int32")}),
    ("Cast", X, {"to": np.dtype("bool")}),
    ("Cast", X, {"to": np.dtype("float16")}),
    ("Cast", np.array([-7, 0, 3], np.int32), {"to": np.dtype("float32")}),
    ("Cast", np.array([True, False]), {"to": np.dtype("float32")}),
    ("Cast", np.array([300, -129, 5], np.int64), {"to": np.dtype("int8")}),
    ("Cast", np.array([2, 0, -1], np.int64), {"to": np.dtype("bool")}),
]


@pytest.mark.parametrize(("op", "x", "attrs"), EXACT_UNARY,
                         ids=[f"{op}-{x.dtype}-{i}" for i, (op, x, _) in enumerate(EXACT_UNARY)])
def test_unary_op_equals_its_reference_exactly(op: str, x: np.ndarray, attrs: dict[str, Any]) -> None:
    assert_equal(*lowered_and_reference(op, {"x": x}, **attrs))


@pytest.mark.parametrize(("op", "x"), [("Exp", X), ("Log", POSITIVE), ("Tanh", X), ("Sigmoid", X)])
def test_transcendental_op_is_within_a_few_ulps(op: str, x: np.ndarray) -> None:
    actual, expected = lowered_and_reference(op, {"x": x})
    # Each libm result is within about 1 ulp of the true value; sigmoid adds an
    # addition and a division, each one more rounding.
    assert_within(actual, expected, np.abs(expected), roundings=4)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_within_the_roundings_of_its_formula(approximate: str) -> None:
    actual, expected = lowered_and_reference("Gelu", {"x": X}, approximate=approximate)
    # The reference keeps 1 + erf(..) in float64; the lowering rounds it (and tanh's
    # argument) in float32. Each rounding errs by eps times a term no larger than
    # |x| * 2 (|0.5 x| times 1 + |erf|), and there are at most six of them.
    assert_within(actual, expected, 2 * np.abs(X), roundings=6)


A = RNG.standard_normal((2, 3, 4)).astype(np.float32)
B_ROW = RNG.standard_normal((3, 1)).astype(np.float32) + 2.0
I_A = np.array([[7, -7, 9, -9], [100, -100, 0, 5]], np.int32)
I_B = np.array([2, 2, -4, -4], np.int32)

EXACT_BINARY: list[tuple[str, np.ndarray, np.ndarray]] = [
    ("Add", A, B_ROW),
    ("Sub", A, np.float32(1.5).reshape(())),
    ("Mul", B_ROW, A),
    ("Div", A, B_ROW),
    ("Max", A, B_ROW - 2),
    ("Min", A[0], B_ROW[:, 0][:, None] - 2),
    ("Equal", I_A, I_B),
    ("Less", A, B_ROW - 2),
    ("LessOrEqual", I_A, I_B),
    ("Greater", A, B_ROW - 2),
    ("GreaterOrEqual", I_A, I_B),
    ("Add", np.array([100, -100, 5], np.int8), np.array([100, -100, 5], np.int8)),
    ("Sub", I_A, I_B),
    ("Mul", I_A, I_B),
    ("Div", I_A, I_B),
    ("Div", np.array([-9, 9, -9, 9, -1], np.int64), np.array([2, -2, -2, 2, 3], np.int64)),
    ("Max", I_A, I_B),
    ("Min", I_A, I_B),
    ("And", np.array([[True], [False]]), np.array([True, False, True])),
    ("Or", np.array([[True], [False]]), np.array([True, False, True])),
    ("Equal", np.array([True, False]), np.array([[True], [False]])),
]


@pytest.mark.parametrize(("op", "a", "b"), EXACT_BINARY,
                         ids=[f"{op}-{a.dtype}-{i}" for i, (op, a, _) in enumerate(EXACT_BINARY)])
def test_binary_op_broadcasts_and_equals_its_reference(op: str, a: np.ndarray, b: np.ndarray) -> None:
    assert_equal(*lowered_and_reference(op, {"a": a, "b": b}))


def test_pow_is_within_a_few_ulps() -> None:
    base, exponent = POSITIVE, RNG.uniform(-2, 2, (4,)).astype(np.float32)
    actual, expected = lowered_and_reference("Pow", {"a": base, "b": exponent})
    assert_within(actual, expected, np.abs(expected), roundings=4)


def test_where_broadcasts_all_three_operands() -> None:
    cond = np.array([[True], [False], [True]])
    x = RNG.standard_normal((1, 4)).astype(np.float32)
    y = np.float32(-1.0).reshape(())
    assert_equal(*lowered_and_reference("Where", {"c": cond, "x": x, "y": y}))


def test_binary_with_a_constant_operand_takes_it_as_a_parameter() -> None:
    actual, expected = lowered_and_reference("Add", {"a": A, "b": B_ROW}, constants=("b",))
    assert_equal(actual, expected)


def test_elementwise_lowering_is_one_store_per_element() -> None:
    _, node = reference("Relu", {"x": X})
    stores = [s for s in walk(lower_node(node).body) if isinstance(s, Store)]
    assert len(stores) == 1 and stores[0].buffer.shape == X.shape
