"""The int8 ops (QConv, QMatMul, QAdd, QMul, QAveragePool, Requantize): exact integer semantics."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from hetero.core.ir import GraphBuilder, get_op
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.core.ir.ops.qint import quantize_add_multipliers
from hetero.core.ir.types import TensorType
from hetero.errors import OpAttributeError, ShapeError

RNG = np.random.default_rng(7)


def run(op: str, inputs: list[np.ndarray | None], **attrs: object) -> np.ndarray:
    """Build a one-node graph of ``op`` (attributes completed and checked) and run its reference."""
    b = GraphBuilder()
    values = [None if x is None else b.constant(x) for x in inputs]
    node = b.graph.add_node(op, values, attrs)
    return get_op(op).reference(inputs, node.attrs)[0]


def factors(*ratios: float) -> dict[str, tuple[int, ...]]:
    pairs = [quantize_multiplier(r) for r in ratios]
    return {"multiplier": tuple(m for m, _ in pairs), "shift": tuple(s for _, s in pairs)}


def int8(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype(np.int8)


def assert_rounds_real(y: np.ndarray, real: np.ndarray, y_zero: int, lo: int = -128,
                       hi: int = 127) -> None:
    """``y`` is ``real`` (already divided by the output scale) rounded half up, shifted, clipped.

    Only values within 1e-6 of a rounding tie are excused: there the fixed-point
    multiplier's 2^-31 relative error may fall on either side.
    """
    expected = np.clip(np.floor(real + 0.5) + y_zero, lo, hi)
    clear = np.abs(real - np.floor(real) - 0.5) > 1e-6
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(y[clear], expected[clear])
    assert np.abs(y.astype(np.int64) - expected).max() <= 1


def naive_conv(x: np.ndarray, w: np.ndarray, pad: int, group: int) -> np.ndarray:
    """Float64 2-D convolution, stride 1, written independently of hetero's reference."""
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    m, cg, kh, kw = w.shape
    windows = sliding_window_view(x, (kh, kw), axis=(2, 3))  # N, C, H', W', kh, kw
    out = []
    for o in range(m):
        g = o // (m // group)
        patch = windows[:, g * cg:(g + 1) * cg]
        out.append(np.einsum("nchwij,cij->nhw", patch, w[o].astype(np.float64)))
    return np.stack(out, axis=1)


# -- hand-computed cases -----------------------------------------------------------------


def test_a_1x1_conv_subtracts_x_zero_adds_bias_and_rounds_half_up() -> None:
    x = np.array([10, -5], np.int8).reshape(1, 1, 1, 2)
    w = np.array([3], np.int8).reshape(1, 1, 1, 1)
    y = run("QConv", [x, w, np.array([4], np.int32)], x_zero=2, y_zero=1, **factors(0.5))
    # acc = (8·3 + 4, -7·3 + 4) = (28, -17); halved: 14 and -8.5, which rounds up to -8.
    np.testing.assert_array_equal(y.reshape(-1), [15, -7])
    assert y.dtype == np.int8


def test_a_depthwise_conv_keeps_channels_apart() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int8).reshape(1, 2, 1, 3)
    w = np.array([[1, 1], [2, -1]], np.int8).reshape(2, 1, 1, 2)
    y = run("QConv", [x, w], group=2, **factors(1.0))
    # channel 0: 1+2, 2+3; channel 1: 2·4-5, 2·5-6.
    np.testing.assert_array_equal(y.reshape(2, 2), [[3, 5], [3, 4]])


def test_padding_counts_as_x_zero() -> None:
    x = np.array([7], np.int8).reshape(1, 1, 1, 1)
    w = np.ones((1, 1, 3, 3), np.int8)
    y = run("QConv", [x, w], pads=(1, 1, 1, 1), x_zero=5, **factors(1.0))
    # Only the centre tap is real: 7 - 5 = 2; the eight padded taps add 5 - 5 = 0.
    assert y.reshape(()) == 2


def test_per_channel_multipliers_scale_each_output_channel() -> None:
    x = np.array([40], np.int8).reshape(1, 1, 1, 1)
    w = np.array([1, 1], np.int8).reshape(2, 1, 1, 1)
    y = run("QConv", [x, w], y_zero=-3, **factors(1.0, 0.25))
    np.testing.assert_array_equal(y.reshape(-1), [37, 7])


def test_qadd_broadcasts_and_shares_one_shift() -> None:
    a = np.array([[10], [-10]], np.int8)
    b = np.array([0, 4, 8], np.int8)
    ma, mb, shift = quantize_add_multipliers(1.0, 0.5)
    y = run("QAdd", [a, b], a_zero=2, b_zero=0, a_multiplier=ma, b_multiplier=mb, shift=shift,
            y_zero=1)
    # (a - 2) + b / 2 + 1
    np.testing.assert_array_equal(y, [[9, 11, 13], [-11, -9, -7]])
    # Fifteen-bit multipliers: 1.0 is 2^14 · 2^-14.
    assert (ma, mb, shift) == (2**14, 2**13, 14)


def test_qadd_multipliers_have_fifteen_bits_and_keep_the_sum_in_int32() -> None:
    for ratios in [(1.0, 0.5), (0.37, 1.9), (1e-3, 2e-3), (100.0, 3.0)]:
        ma, mb, shift = quantize_add_multipliers(*ratios)
        assert max(ma, mb) < 2**15 and 2**14 <= max(ma, mb)
        assert abs(ma * 2.0**-shift - ratios[0]) <= 2**-14 * max(ratios)
        assert 255 * (ma + mb) < 2**31
    with pytest.raises(ValueError, match="too large for 15-bit"):
        quantize_add_multipliers(2.0**15, 1.0)


def test_qmul_multiplies_the_shifted_operands() -> None:
    y = run("QMul", [np.array([3, -4], np.int8), np.array([5], np.int8)], a_zero=1, b_zero=-1,
            y_zero=0, **{k: v[0] for k, v in factors(0.25).items()})
    # (2·6, -5·6) / 4 = 3, -7.5 → -7
    np.testing.assert_array_equal(y, [3, -7])


def test_global_qaverage_pool_divides_through_the_multiplier() -> None:
    x = np.array([1, 2, 3, 6], np.int8).reshape(1, 1, 2, 2)
    m, s = quantize_multiplier(1 / 4)
    y = run("QAveragePool", [x], kernel_shape=(2, 2), x_zero=-2, multiplier=m, shift=s, y_zero=0)
    # mean of (3, 4, 5, 8) = 5
    assert y.reshape(()) == 5


def test_requantize_clamps_and_moves_the_zero_point() -> None:
    x = np.array([-10, 0, 10, 100], np.int8)
    y = run("Requantize", [x], x_zero=0, y_zero=-128, y_min=-128, y_max=-118, **factors(0.5))
    np.testing.assert_array_equal(y, [-128, -128, -123, -118])


# -- random data against an independent float computation ------------------------------


def test_qconv_matches_a_float_convolution_rounded_once() -> None:
    x, w = int8((2, 4, 6, 6)), int8((6, 2, 3, 3))
    bias = RNG.integers(-5000, 5000, 6).astype(np.int32)
    ratios = RNG.uniform(1e-4, 4e-4, 6)
    y = run("QConv", [x, w, bias], pads=(1, 1, 1, 1), group=2, x_zero=-3, y_zero=5,
            y_min=-100, **factors(*ratios))
    acc = naive_conv(x.astype(np.float64) + 3, w, pad=1, group=2) + bias.reshape(1, -1, 1, 1)
    assert_rounds_real(y, acc * ratios.reshape(1, -1, 1, 1), 5, lo=-100)


def test_qmatmul_matches_a_float_product_per_column() -> None:
    a, b = int8((3, 5, 16)), int8((16, 4))
    bias = RNG.integers(-900, 900, 4).astype(np.int32)
    ratios = RNG.uniform(2e-3, 6e-3, 4)
    y = run("QMatMul", [a, b, bias], a_zero=7, y_zero=-2, **factors(*ratios))
    real = ((a.astype(np.float64) - 7) @ b.astype(np.float64) + bias) * ratios
    assert_rounds_real(y, real, -2)


def test_qadd_and_qmul_match_float_arithmetic() -> None:
    a, b = int8((4, 8)), int8((8,))
    sa, sb, sy = 0.0213, 0.0517, 0.0611
    ma, mb, shift = quantize_add_multipliers(sa / sy, sb / sy)
    y = run("QAdd", [a, b], a_zero=3, b_zero=-4, a_multiplier=ma, b_multiplier=mb, shift=shift,
            y_zero=10)
    real = ((a.astype(np.float64) - 3) * sa + (b.astype(np.float64) + 4) * sb) / sy
    assert_rounds_real(y, real, 10)
    m, s = quantize_multiplier(sa * sb / 0.0137)
    y = run("QMul", [a, b], a_zero=3, b_zero=-4, multiplier=m, shift=s, y_zero=-1)
    real = (a.astype(np.float64) - 3) * (b.astype(np.float64) + 4) * sa * sb / 0.0137
    assert_rounds_real(y, real, -1)


def test_qaverage_pool_with_padding_matches_a_float_mean_that_counts_the_padding() -> None:
    x = int8((1, 3, 5, 5))
    m, s = quantize_multiplier(0.8 / 9)
    y = run("QAveragePool", [x], kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
            x_zero=4, multiplier=m, shift=s, y_zero=0)
    shifted = np.pad(x.astype(np.float64) - 4, [(0, 0), (0, 0), (1, 1), (1, 1)])
    mean = sliding_window_view(shifted, (3, 3), axis=(2, 3))[:, :, ::2, ::2].mean(axis=(-2, -1))
    assert_rounds_real(y, mean * 0.8, 0)


def test_per_channel_requantize_runs_along_its_axis() -> None:
    x = RNG.integers(-5000, 5000, (2, 3, 4)).astype(np.int32)
    ratios = (0.01, 0.02, 0.03)
    y = run("Requantize", [x], axis=-2, y_zero=2, **factors(*ratios))
    assert_rounds_real(y, x * np.array(ratios).reshape(1, 3, 1), 2)


# -- overflow, inference and cost ------------------------------------------------------------


def test_worst_case_data_with_a_large_k_stays_exact() -> None:
    # K = 512·3·3 = 4608 products of -255 · -128 sum to 150,405,120 > 2^24: float32 would
    # round it, the integer path must not.
    c = 512
    x = np.full((1, c, 3, 3), -128, np.int8)
    w = np.full((2, c, 3, 3), -128, np.int8)
    bias = np.array([0, 2**31 - 1 - 255 * 128 * 9 * c], np.int32)
    ratios = (100 / (255 * 128 * 9 * c), 127 / (2**31 - 1))
    got = run("QConv", [x, w, bias], x_zero=127, **factors(*ratios)).reshape(-1)
    accs = (255 * 128 * 9 * c, 2**31 - 1)
    for acc, (m, s), y in zip(accs, map(quantize_multiplier, ratios), got):
        assert y == min(127, (acc * m + (1 << (s - 1))) >> s)
    assert got[0] == 100
    a = np.full((2, 9 * c), 127, np.int8)
    b = np.full((9 * c, 3), -128, np.int8)
    m, s = quantize_multiplier(100 / (255 * 128 * 9 * c))
    y = run("QMatMul", [a, b], a_zero=-128, multiplier=(m,), shift=(s,))
    np.testing.assert_array_equal(y, np.full((2, 3), -100))


@pytest.mark.parametrize("case, error, words", [
    ("float input", ShapeError, "QConv input X must be one of ['int8']"),
    ("float bias", ShapeError, "QConv bias B must be one of ['int32']"),
    ("3 multipliers", OpAttributeError, "multiplier has 3 entries; it needs 1 (per tensor) or 4"),
    ("inverted clamp", OpAttributeError, "[y_min, y_max] = [10, -10]"),
    ("y_zero out of range", OpAttributeError, "y_zero 200 is outside the int8 range"),
])
def test_qconv_inference_names_what_is_wrong(case: str, error: type, words: str) -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4), "float32" if case == "float input" else "int8")
    bias = np.zeros(4, np.float32 if case == "float bias" else np.int32)
    attrs = {**factors(*(0.1,) * (3 if case == "3 multipliers" else 1)), "y_zero": 0}
    if case == "inverted clamp":
        attrs.update(y_min=10, y_max=-10)
    if case == "y_zero out of range":
        attrs["y_zero"] = 200
    with pytest.raises(error) as info:
        b.QConv(x, np.zeros((4, 2, 3, 3), np.int8), bias, name="qc", **attrs)
    assert words in str(info.value) and "qc (QConv)" in str(info.value)


def test_qconv_derives_its_window_and_counts_two_flops_a_mac() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 8, 6, 6), "int8")
    y = b.QConv(x, np.zeros((4, 2, 3, 3), np.int8), group=4, pads=(1, 1, 1, 1), **factors(0.1))
    node = y.producer
    assert node.attrs["kernel_shape"] == (3, 3) and node.attrs["strides"] == (1, 1)
    assert y.type == TensorType((1, 4, 6, 6), "int8")
    flops = get_op("QConv").flops(node.input_types(), [y.type], node.attrs)
    # 144 outputs, each 2 input channels x 9 taps
    assert flops == 2 * 144 * 2 * 9
