"""Normalisation, matrix-product and softmax lowerings, run on the tensor-IR interpreter,
against each op's reference.

The references compute in float64 and round once; the lowerings compute in float32.
Each float test bounds the gap by ``roundings * eps * magnitude`` elementwise
(:func:`opcheck.assert_within`), where ``magnitude`` is what the op computes from the
absolute values of its terms and ``roundings`` counts the float32 operations an
element goes through (a sum of ``k`` terms: ``k``; Higham 2.2). Integer products are
exact and wrap around.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hetero.core.ir import get_op
from hetero.core.lower import lower_node
from lowercheck import lowered_and_reference
from opcheck import assert_within, reference

RNG = np.random.default_rng(11)
EPS32 = float(np.finfo(np.float32).eps)


def uniform(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


@pytest.mark.parametrize("size", [1, 3, 4])
def test_lrn_matches_reference(size: int) -> None:
    """A sum of ``size`` squares, then scale, offset, power and division: the power
    carries the sum's relative error times beta (< 1) and adds a few ulps of its own."""
    x = uniform(1, 5, 2, 3)
    attrs = {"size": size, "alpha": 0.5, "beta": 0.75, "bias": 1.5}
    ours, expected = lowered_and_reference("LRN", {"x": x}, **attrs)
    assert_within(ours, expected, np.abs(expected.astype(np.float64)), 2 * size + 8)


def test_batch_norm_matches_reference() -> None:
    """Six float32 operations per element, each rounding relative to its operands."""
    x = uniform(2, 3, 2, 2)
    scale, bias, mean = uniform(3), uniform(3), uniform(3)
    var = uniform(3, low=0.1, high=2.0)
    inputs = {"x": x, "scale": scale, "b": bias, "mean": mean, "var": var}
    ours, expected = lowered_and_reference("BatchNormalization", inputs,
                                           ("scale", "b", "mean", "var"), epsilon=1e-3)
    c = (-1, 1, 1)
    std = np.sqrt(var.astype(np.float64) + 1e-3).reshape(c)
    magnitude = (np.abs(x) + np.abs(mean).reshape(c)) / std * np.abs(scale).reshape(c) \
        + np.abs(bias).reshape(c)
    assert_within(ours, expected, magnitude, 8)


@pytest.mark.parametrize("axis, scale_shape, with_bias", [
    (-1, (4,), True), (1, (3, 4), False), (0, (1, 4), True), (2, (1,), True),
])
def test_layer_norm_matches_reference(axis: int, scale_shape: tuple[int, ...],
                                      with_bias: bool) -> None:
    """Mean and deviation are sums of n terms (relative error ~ n eps of the row's
    |x|); the normalised element carries that error scaled by 1/std, and Scale may
    broadcast to the normalised shape."""
    x = uniform(2, 3, 4) * 3 + 1
    scale = uniform(*scale_shape)
    bias = uniform(*scale_shape) if with_bias else None
    inputs = {"x": x, "scale": scale, "b": bias}
    ours, expected = lowered_and_reference("LayerNormalization", inputs, ("scale", "b"),
                                           axis=axis, epsilon=1e-5)
    axes = tuple(range(axis % 3, 3))
    x64 = x.astype(np.float64)
    n = x64[(0,) * (axis % 3)].size
    std = np.sqrt(x64.var(axis=axes, keepdims=True) + 1e-5)
    row = np.abs(x64).mean(axis=axes, keepdims=True)
    magnitude = (np.abs(x64) + row) / std * np.abs(scale) + (0 if bias is None else np.abs(bias))
    assert_within(ours, expected, magnitude, 2 * n + 8)


@pytest.mark.parametrize("trans_a, trans_b, alpha, beta, c_shape", [
    (0, 0, 1.0, 1.0, (3,)), (1, 0, 0.5, 2.0, (2, 1)), (0, 1, 1.0, -1.0, (2, 3)),
    (1, 1, 2.0, 1.0, None), (0, 0, 1.0, 0.5, ()),
])
def test_gemm_matches_reference(trans_a: int, trans_b: int, alpha: float, beta: float,
                                c_shape: tuple[int, ...] | None) -> None:
    """alpha * A'B' + beta * C with C broadcast: k + 3 roundings of the |terms|."""
    m, k, n = 2, 5, 3
    a = uniform(*((k, m) if trans_a else (m, k)))
    b = uniform(*((n, k) if trans_b else (k, n)))
    c = None if c_shape is None else uniform(*c_shape)
    attrs: dict[str, Any] = {"transA": trans_a, "transB": trans_b, "alpha": alpha, "beta": beta}
    inputs = {"a": a, "b": b, "c": c}
    ours, expected = lowered_and_reference("Gemm", inputs, ("b", "c"), **attrs)
    absolute = [None if t is None else np.abs(t).astype(np.float64) for t in (a, b, c)]
    (magnitude,) = get_op("Gemm").reference(absolute, {**attrs, "alpha": abs(alpha),
                                                       "beta": abs(beta)})
    assert_within(ours, expected, magnitude, k + 3)


@pytest.mark.parametrize("a_shape, b_shape", [
    ((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 1, 3, 4), (3, 4, 2)), ((1, 3, 4), (2, 4, 2)),
])
def test_matmul_matches_reference(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    """numpy's promotion of 1-D operands and broadcasting of batch axes; k + 2 roundings."""
    a, b = uniform(*a_shape), uniform(*b_shape)
    ours, expected = lowered_and_reference("MatMul", {"a": a, "b": b}, ("b",))
    magnitude = np.matmul(np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert_within(ours, expected, magnitude, a_shape[-1] + 2)


def test_integer_matmul_wraps_like_the_reference() -> None:
    """int32 products that overflow wrap around identically: exact equality."""
    a = RNG.integers(-2**20, 2**20, (2, 3)).astype(np.int32)
    b = RNG.integers(-2**20, 2**20, (3, 2)).astype(np.int32)
    ours, expected = lowered_and_reference("MatMul", {"a": a, "b": b})
    assert ours.dtype == np.int32
    np.testing.assert_array_equal(ours, expected)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_matches_reference(axis: int) -> None:
    """Within (n + 2 * spread + 4) eps relative: the sum of n exps, the subtraction
    x - max (whose rounding, at most eps * |x - max| <= eps * spread, becomes a relative
    error of the exp), the exp and the division."""
    x = uniform(2, 3, 4, low=-3, high=3)
    ours, expected = lowered_and_reference("Softmax", {"x": x}, axis=axis)
    n, spread = x.shape[axis], 6
    assert_within(ours, expected, expected.astype(np.float64), n + 2 * spread + 4)


def test_softmax_is_stable_for_large_inputs() -> None:
    """Inputs whose exp overflows float32 (exp(1000) is inf) still give finite results:
    the stage subtracts the row maximum first. The integer-valued subtractions are
    exact, leaving the sum of 3, the exp and the division to round."""
    x = np.array([[1000.0, 999.0, 998.0], [-1000.0, 0.0, 88.0]], np.float32)
    ours, expected = lowered_and_reference("Softmax", {"x": x})
    assert np.all(np.isfinite(ours))
    assert_within(ours, expected, expected.astype(np.float64), 3 + 4)


def test_softmax_has_max_exp_sum_and_divide_stages() -> None:
    """Four stages, the three internal ones allocated inside the function."""
    _, node = reference("Softmax", {"x": uniform(2, 3)})
    text = str(lower_node(node))
    for stage in ("softmax_max", "softmax_exp", "softmax_sum"):
        assert f"block {stage} " in text and f"alloc {stage}:" in text
    assert "block softmax " in text
