"""Scale and zero-point rules of hetero.core.quant.params."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.quant import activation_params, quantize_bias, quantize_weight
from hetero.errors import QuantizationError


def test_activation_range_is_widened_to_include_zero() -> None:
    positive = activation_params(1.0, 3.0)  # as if [0, 3]
    assert positive.scale == np.float32(3.0 / 255)
    assert positive.zero_point == -128
    negative = activation_params(-2.0, -1.0)  # as if [-2, 0]
    assert negative.scale == np.float32(2.0 / 255)
    assert negative.zero_point == 127


def test_activation_zero_is_exact_and_range_ends_map_to_int8_ends() -> None:
    p = activation_params(-1.0, 3.0)
    assert p.scale == np.float32(4.0 / 255)
    assert p.zero_point == -64  # round(-128 + 1 / (4/255)) = round(-64.25)
    q = lambda x: np.clip(np.rint(np.float32(x) / p.scale) + p.zero_point, -128, 127)
    assert q(0.0) == p.zero_point
    assert q(-1.0) == -128 and q(3.0) == 127


def test_activation_zero_point_is_clamped_to_int8() -> None:
    # A tiny negative tail rounds the zero point to -128 at most, never below.
    assert activation_params(-1e-9, 1.0).zero_point == -128
    assert activation_params(-1.0, 1e-9).zero_point == 127


def test_all_zero_activation_gets_unit_scale() -> None:
    p = activation_params(0.0, 0.0)
    assert (p.scale, p.zero_point) == (1.0, 0)


def test_non_finite_or_inverted_range_is_refused() -> None:
    with pytest.raises(QuantizationError, match="finite"):
        activation_params(float("nan"), 1.0)
    with pytest.raises(QuantizationError, match="finite"):
        activation_params(2.0, 1.0)


def test_per_channel_weight_round_trips_within_half_a_step() -> None:
    rng = np.random.default_rng(0)
    channel_size = np.arange(1, 9, dtype=np.float32)[:, None, None, None]
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * channel_size
    qw = quantize_weight(w, 0)
    assert qw.values.dtype == np.int8 and qw.scale.shape == (8,) and qw.axis == 0
    assert not qw.zero_point.any() and qw.zero_point.dtype == np.int8
    absmax = np.abs(w).max(axis=(1, 2, 3))
    np.testing.assert_array_equal(qw.scale, (absmax / 127).astype(np.float32))
    assert np.abs(qw.values).max() == 127
    err = np.abs(qw.dequantize() - w)
    assert (err <= qw.scale[:, None, None, None] / 2 * (1 + 1e-6)).all()


def test_weight_axis_one_for_matmul_layout() -> None:
    w = np.array([[1.0, -4.0], [0.5, 2.0]], np.float32)  # [K, N]: channels are columns
    qw = quantize_weight(w, 1)
    np.testing.assert_array_equal(qw.scale, np.float32([1 / 127, 4 / 127]))
    np.testing.assert_array_equal(qw.values, [[127, -127], [64, 64]])


def test_all_zero_channel_gets_unit_scale_and_zero_values() -> None:
    w = np.zeros((3, 2), np.float32)
    w[1] = [0.5, -1.0]
    qw = quantize_weight(w, 0)
    assert qw.scale[0] == 1.0 and qw.scale[2] == 1.0
    assert not qw.values[0].any() and not qw.values[2].any()
    np.testing.assert_array_equal(qw.dequantize(), np.round(w * 127) / 127)


def test_per_tensor_weight_has_scalar_scale() -> None:
    qw = quantize_weight(np.array([0.25, -0.5], np.float32), None)
    assert qw.scale.shape == () and qw.axis is None
    np.testing.assert_array_equal(qw.values, [64, -127])


def test_bias_is_int32_at_input_times_weight_scale() -> None:
    w_scale = np.float32([0.01, 0.02])
    qb = quantize_bias(np.float32([0.3, -0.5]), np.float32(0.1), w_scale)
    assert qb.values.dtype == np.int32 and qb.zero_point.dtype == np.int32
    np.testing.assert_array_equal(qb.scale, np.float32(0.1) * w_scale)
    np.testing.assert_array_equal(qb.values, [300, -250])
    np.testing.assert_allclose(qb.dequantize(), [0.3, -0.5], rtol=1e-6)
