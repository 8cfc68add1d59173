"""The int8 lowerings (QConv, QMatMul, QAdd, QMul, QAveragePool, Requantize) against their
references, bit for bit: on the tensor-IR interpreter, and compiled by llvm_cpu with its
default schedule and constant packing, as a fallback region is compiled.

Shapes are small where the interpreter runs (one Python step per tap); the compiled runs
add shapes wide enough for llvm_cpu's tiled and window schedules.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lowercheck import run_lowered

import hetero
from hetero.core.ir import GraphBuilder
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.core.ir.tir import verify_func
from hetero.core.lower import is_lowerable, lower_node

RNG = np.random.default_rng(2026)


def int8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype(np.int8)


def int32(*shape: int, bound: int = 2**14) -> np.ndarray:
    return RNG.integers(-bound, bound, shape).astype(np.int32)


def factors(channels: int, low: float = 1e-3, high: float = 0.05) -> dict[str, tuple[int, ...]]:
    """Per-channel fixed-point factors for ratios drawn from [low, high) (one entry if 1)."""
    pairs = [quantize_multiplier(r) for r in RNG.uniform(low, high, channels)]
    return {"multiplier": tuple(m for m, _ in pairs), "shift": tuple(s for _, s in pairs)}


def assert_exact(op: str, inputs: dict[str, np.ndarray | None], constants: tuple[str, ...] = (),
                 interpret: bool = True, **attrs: Any) -> np.ndarray:
    """``op`` lowered equals its reference exactly, compiled by llvm_cpu (inputs named in
    ``constants`` are graph constants) and, if ``interpret``, on the interpreter; returns
    the reference result."""
    b = GraphBuilder(op.lower())
    operands = [None if a is None else b.constant(a, k) if k in constants else b.input(k, a.shape, a.dtype)
                for k, a in inputs.items()]
    y = b.op(op, *operands, **attrs)
    b.output(y)
    graph = b.build()
    feeds = {k: a for k, a in inputs.items() if a is not None and k not in constants}
    expected = hetero.run_reference(graph, feeds)[y.name]
    got = hetero.compile(graph, targets=["llvm_cpu"]).run(feeds)[y.name]
    assert got.dtype == expected.dtype == np.int8 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if interpret:
        (interpreted,) = run_lowered(verify_func(lower_node(graph.nodes[0])), graph.nodes[0], inputs)
        np.testing.assert_array_equal(interpreted, expected)
    return expected


def test_every_int8_op_is_lowerable() -> None:
    assert all(is_lowerable(op) for op in INTEGER_OPS)


# -- QConv -------------------------------------------------------------------------------


@pytest.mark.parametrize(("x_shape", "w_shape", "per_channel", "bias", "attrs"), [
    # Per-channel factors, asymmetric pads, strides, a bias, both zero points.
    ((1, 3, 6, 5), (4, 3, 3, 2), True, True,
     {"pads": (1, 0, 2, 1), "strides": (2, 1), "x_zero": -3, "y_zero": 5}),
    # Two groups with dilation; one factor for every channel.
    ((2, 4, 5, 5), (4, 2, 2, 2), False, False,
     {"group": 2, "dilations": (2, 1), "x_zero": 7, "y_zero": -9}),
    # Depthwise, padded: padding contributes x_zero - x_zero = 0.
    ((1, 3, 4, 4), (3, 1, 3, 3), True, True, {"group": 3, "pads": (1, 1, 1, 1), "x_zero": 100}),
    # A 1-D convolution, and a fused Relu (y_min = y_zero) with a Clip's upper bound.
    ((1, 2, 7), (3, 2, 3), True, True,
     {"pads": (2, 1), "strides": (2,), "y_zero": -20, "y_min": -20, "y_max": 60}),
])
def test_qconv_matches_the_reference(x_shape: tuple[int, ...], w_shape: tuple[int, ...], per_channel: bool,
                                     bias: bool, attrs: dict[str, Any]) -> None:
    b = int32(w_shape[0]) if bias else None
    assert_exact("QConv", {"x": int8(*x_shape), "w": int8(*w_shape), "b": b}, ("w", "b"),
                 **attrs, **factors(w_shape[0] if per_channel else 1))


def test_qconv_saturates_at_both_ends() -> None:
    # Ratios near 1 drive most sums far past the int8 range.
    y = assert_exact("QConv", {"x": int8(1, 2, 4, 4), "w": int8(3, 2, 2, 2), "b": int32(3)}, ("w", "b"),
                     x_zero=-128, **factors(3, 0.5, 1.0))
    assert (y == -128).any() and (y == 127).any()


@pytest.mark.parametrize("attrs", [
    {"pads": (1, 1, 1, 1)},
    {"strides": (2, 2), "x_zero": 9, "y_zero": 3},
])
def test_qconv_at_the_width_of_the_tiled_schedule(attrs: dict[str, Any]) -> None:
    """16 output channels of a 144-term sum: llvm_cpu's register tile, compiled only."""
    assert_exact("QConv", {"x": int8(1, 16, 9, 10), "w": int8(16, 16, 3, 3), "b": int32(16)}, ("w", "b"),
                 interpret=False, **attrs, **factors(16, 1e-4, 2e-3))


def test_qconv_input_as_a_graph_input_and_weights_as_inputs() -> None:
    assert_exact("QConv", {"x": int8(1, 2, 3, 3), "w": int8(2, 2, 2, 2), "b": int32(2)},
                 x_zero=1, **factors(2))


# -- QMatMul -----------------------------------------------------------------------------


@pytest.mark.parametrize(("a_shape", "n", "bias", "attrs"), [
    ((2, 3, 2, 8), 5, True, {"a_zero": 4, "y_zero": 3}),  # 4-D, per column, with bias
    ((6,), 4, False, {"a_zero": -128}),  # a 1-D row, the lowest zero point
    ((3, 5), 3, True, {"y_zero": 10, "y_min": 10, "y_max": 90}),  # a fused Relu and Clip
])
def test_qmatmul_matches_the_reference(a_shape: tuple[int, ...], n: int, bias: bool,
                                       attrs: dict[str, Any]) -> None:
    k = a_shape[-1]
    assert_exact("QMatMul", {"a": int8(*a_shape), "w": int8(k, n), "bias": int32(n) if bias else None},
                 ("w", "bias"), **attrs, **factors(n, 1e-3, 0.02))


def test_qmatmul_at_the_width_of_the_tiled_schedule_saturates() -> None:
    y = assert_exact("QMatMul", {"a": int8(1, 24, 64), "w": int8(64, 48), "bias": int32(48)},
                     ("w", "bias"), interpret=False, a_zero=-5, **factors(48, 1e-4, 0.05))
    assert (y == -128).any() and (y == 127).any()


# -- QAdd and QMul -----------------------------------------------------------------------


@pytest.mark.parametrize(("a_shape", "b_shape", "attrs"), [
    ((2, 3, 4), (3, 1), {"a_zero": 3, "b_zero": -7, "a_multiplier": 20000, "b_multiplier": 9000,
                         "shift": 15, "y_zero": 1}),
    # Large multipliers: most sums saturate; a fused Relu raises the floor.
    ((5,), (2, 1, 5), {"a_zero": -128, "b_zero": 127, "a_multiplier": 2**15, "b_multiplier": 2**14,
                       "shift": 14, "y_zero": -4, "y_min": -4}),
    # Multipliers of 1 and a shift of 1: every odd sum is a tie, rounded half toward +inf.
    ((4, 4), (4, 4), {"a_multiplier": 1, "b_multiplier": 1, "shift": 1}),
])
def test_qadd_matches_the_reference(a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                                    attrs: dict[str, Any]) -> None:
    assert_exact("QAdd", {"a": int8(*a_shape), "b": int8(*b_shape)}, **attrs)


@pytest.mark.parametrize(("a_shape", "b_shape", "attrs"), [
    ((2, 3, 4), (4,), {"a_zero": 3, "b_zero": -7, "multiplier": 1 << 30, "shift": 37, "y_zero": 1}),
    ((3, 1), (1, 6), {"multiplier": 2**31 - 1, "shift": 62}),  # the largest shift: all round to 0
    ((16,), (16,), {"multiplier": 1 << 30, "shift": 31, "y_max": 50}),  # halves: ties and a clip
])
def test_qmul_matches_the_reference(a_shape: tuple[int, ...], b_shape: tuple[int, ...],
                                    attrs: dict[str, Any]) -> None:
    assert_exact("QMul", {"a": int8(*a_shape), "b": int8(*b_shape)}, **attrs)


# -- QAveragePool ------------------------------------------------------------------------


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1), "strides": (2, 2), "x_zero": 5, "y_zero": -3},
    {"kernel_shape": (2, 3), "dilations": (2, 1), "x_zero": -100},
    {"kernel_shape": (4,), "pads": (3, 2), "strides": (3,)},
])
def test_qaverage_pool_matches_the_reference(attrs: dict[str, Any]) -> None:
    rank = len(attrs["kernel_shape"])
    multiplier, shift = quantize_multiplier(1.3 / np.prod(attrs["kernel_shape"]))
    assert_exact("QAveragePool", {"x": int8(2, 3, *(7,) * rank)}, multiplier=multiplier, shift=shift,
                 **attrs)


# -- Requantize --------------------------------------------------------------------------


def test_requantize_rounds_ties_toward_plus_infinity() -> None:
    x = np.arange(-4, 5, dtype=np.int8)
    y = assert_exact("Requantize", {"x": x}, multiplier=(1,), shift=(1,))
    # floor((v + 1) / 2): -1.5 rounds to -1, -0.5 to 0, 0.5 to 1 (a truncating shift would not).
    np.testing.assert_array_equal(y, [-2, -1, -1, 0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_requantize_int32_per_channel_at_the_extremes(axis: int) -> None:
    x = RNG.integers(-2**31, 2**31, (3, 4, 5), dtype=np.int64).astype(np.int32)
    x.flat[:2] = [-2**31, 2**31 - 1]
    channels = x.shape[axis]
    # The widest multipliers and shifts the op allows, mixed with ordinary ones.
    multiplier = (2**31 - 1, 1, *factors(channels - 2)["multiplier"])
    shift = (62, 1, *factors(channels - 2)["shift"])
    assert_exact("Requantize", {"x": x}, multiplier=multiplier, shift=shift, axis=axis, y_zero=-1)


def test_requantize_int8_with_zero_points_and_a_clamp() -> None:
    assert_exact("Requantize", {"x": int8(2, 3, 4)}, x_zero=-128, y_zero=127, y_min=0,
                 multiplier=(2**31 - 1,), shift=(31,))
