"""Quantisation lowerings against the reference: the integers (and the dequantised
floats) must be equal exactly, since both compute in the same dtype, step by step."""

from __future__ import annotations

import numpy as np
import pytest
from lowercheck import lowered_and_reference

RNG = np.random.default_rng(11)
# Quotients by 0.5 land on .5 exactly: round half to even decides them.
HALVES = np.array([0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 200.0, -200.0], np.float32)


def assert_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize(("zero", "scale_shape"), [
    (np.array(3, np.int8), ()), (np.array([128], np.uint8), (1,)), (np.array(-5, np.int8), ()),
])
def test_quantize_rounds_half_to_even_and_saturates(zero: np.ndarray, scale_shape: tuple[int, ...]) -> None:
    scale = np.full(scale_shape, 0.5, np.float32)
    actual, expected = lowered_and_reference(
        "QuantizeLinear", {"x": HALVES, "s": scale, "z": zero.reshape(scale_shape)}, constants=("s", "z"))
    assert_equal(actual, expected)
    assert expected.min() == np.iinfo(zero.dtype).min and expected.max() == np.iinfo(zero.dtype).max


@pytest.mark.parametrize("axis", [1, -2])
def test_quantize_per_axis(axis: int) -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32) * 20
    scale = np.array([0.1, 0.5, 2.0], np.float32)
    zero = np.array([0, 10, -10], np.int8)
    assert_equal(*lowered_and_reference("QuantizeLinear", {"x": x, "s": scale, "z": zero}, axis=axis))


def test_quantize_float64_input_computes_in_float64() -> None:
    x = HALVES.astype(np.float64) / 3
    scale, zero = np.array(1 / 6), np.array(0, np.uint8)
    assert_equal(*lowered_and_reference("QuantizeLinear", {"x": x, "s": scale, "z": zero},
                                        constants=("s", "z")))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32"])
def test_dequantize_per_tensor(dtype: str) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.min, info.min + 1, 0, 1, info.max - 1, info.max], dtype)
    scale, zero = np.array(0.25, np.float32), np.array(info.max // 2, dtype)
    assert_equal(*lowered_and_reference("DequantizeLinear", {"x": x, "s": scale, "z": zero},
                                        constants=("s", "z")))


def test_dequantize_per_axis_without_a_zero_point() -> None:
    x = RNG.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    scale = np.array([0.5, 0.125, 3.0, 1.0], np.float32)
    assert_equal(*lowered_and_reference("DequantizeLinear", {"x": x, "s": scale, "z": None}, axis=2))


def test_dequantize_to_float16() -> None:
    x = RNG.integers(0, 256, (3, 5)).astype(np.uint8)
    scale = np.array([0.1, 0.2, 0.3], np.float16)
    zero = np.array([0, 128, 255], np.uint8)
    assert_equal(*lowered_and_reference("DequantizeLinear", {"x": x, "s": scale, "z": zero},
                                        constants=("s", "z"), axis=0))
