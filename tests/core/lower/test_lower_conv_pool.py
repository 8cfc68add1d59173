"""Conv and pooling lowerings, run on the tensor-IR interpreter, against each op's reference.

Float tolerances follow the bound on a sum of ``k`` rounded terms (Higham, *Accuracy
and Stability of Numerical Algorithms*, 2.2): in any order, a float sum differs from
the exact one by at most ``k * eps * sum(|terms|)``. The reference accumulates in
float64 and rounds once, so the lowering (which accumulates in float32) must stay
within ``(k + 2) * eps * sum(|terms|)`` elementwise, ``sum(|terms|)`` being the op's
own reference applied to ``|x|`` and ``|w|``. Max pooling only compares, so it is exact.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np

from hetero.core.ir import get_op
from hetero.core.lower import lower_node
from lowercheck import lowered_and_reference
from opcheck import assert_within, reference


@st.composite
def windows(draw: st.DrawFn, max_rank: int = 2) -> dict[str, Any]:
    """Spatial window attributes and an input spatial shape they fit (kept tiny: the
    interpreter runs one Python step per tap)."""
    n = draw(st.integers(1, max_rank))
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n)]
    strides = [draw(st.integers(1, 2)) for _ in range(n)]
    pads = [draw(st.integers(0, 2)) for _ in range(2 * n)]
    spatial = []
    for i in range(n):
        extent = dilations[i] * (kernel[i] - 1) + 1
        smallest = max(1, extent - pads[i] - pads[i + n])
        spatial.append(draw(st.integers(smallest, smallest + 3)))
    return {"kernel_shape": kernel, "dilations": dilations, "strides": strides, "pads": pads,
            "spatial": spatial}


def conv_magnitude(node_attrs: dict[str, Any], *arrays: np.ndarray | None) -> np.ndarray:
    """Conv's reference on the absolute values: the sum of |terms| per output."""
    absolute = [None if a is None else np.abs(a).astype(np.float64) for a in arrays]
    (magnitude,) = get_op("Conv").reference(absolute, node_attrs)
    return magnitude


@settings(max_examples=15, deadline=None)
@given(win=windows(), groups=st.sampled_from(["one", "two", "depthwise"]),
       out_per_group=st.integers(1, 2), bias=st.booleans(), seed=st.integers(0, 2**16))
def test_conv_matches_reference(win: dict[str, Any], groups: str, out_per_group: int,
                                bias: bool, seed: int) -> None:
    """Pads, strides, dilations and groups: within the summation bound of the reference."""
    rng = np.random.default_rng(seed)
    c_in, group = {"one": (2, 1), "two": (4, 2), "depthwise": (3, 3)}[groups]
    c_out = group * out_per_group
    spatial = win.pop("spatial")
    x = rng.uniform(-1, 1, (1, c_in, *spatial)).astype(np.float32)
    w = rng.uniform(-1, 1, (c_out, c_in // group, *win["kernel_shape"])).astype(np.float32)
    b = rng.uniform(-1, 1, c_out).astype(np.float32) if bias else None
    inputs = {"x": x, "w": w, "b": b}
    ours, expected = lowered_and_reference("Conv", inputs, ("w", "b"), group=group, **win)
    _, node = reference("Conv", inputs, ("w", "b"), group=group, **win)
    terms = c_in // group * math.prod(win["kernel_shape"]) + bias
    assert_within(ours, expected, conv_magnitude(node.attrs, x, w, b), terms + 2)


def test_conv_3d_with_float16_accumulates_in_float32() -> None:
    """A 3-D float16 Conv is within one float16 rounding (plus the float32 sum's bound)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 2, 3, 4, 3)).astype(np.float16)
    w = rng.uniform(-1, 1, (2, 2, 2, 2, 2)).astype(np.float16)
    attrs = {"pads": (1, 0, 1, 0, 1, 1), "strides": (1, 2, 1)}
    ours, expected = lowered_and_reference("Conv", {"x": x, "w": w}, ("w",), **attrs)
    _, node = reference("Conv", {"x": x, "w": w}, ("w",), **attrs)
    magnitude = conv_magnitude(node.attrs, x, w)
    # One float16 rounding of the result: half an ulp is eps/2 of its magnitude.
    terms = 2 * 8
    bound = 0.5 * np.finfo(np.float16).eps * np.abs(expected.astype(np.float64)) \
        + (terms + 2) * np.finfo(np.float32).eps * magnitude + np.finfo(np.float16).tiny
    assert ours.dtype == np.float16
    assert np.all(np.abs(ours.astype(np.float64) - expected.astype(np.float64)) <= 2 * bound)


def test_conv_without_padding_reads_without_bounds_checks() -> None:
    """A window that never leaves the input gets no select; one that can, gets one."""
    x = np.zeros((1, 2, 5, 5), np.float32)
    w = np.zeros((2, 2, 3, 3), np.float32)
    _, plain = reference("Conv", {"x": x, "w": w}, ("w",))
    _, padded = reference("Conv", {"x": x, "w": w}, ("w",), pads=(1, 0, 0, 0))

    assert "select(" not in str(lower_node(plain))
    assert str(lower_node(padded)).count("select(") == 1


@settings(max_examples=15, deadline=None)
@given(win=windows(), ceil_mode=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_max_pool_equals_reference(win: dict[str, Any], ceil_mode: int, seed: int) -> None:
    """Padding never wins; a dilated window wholly on padding gives -inf, as the reference."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, 2, *win.pop("spatial"))).astype(np.float32)
    ours, expected = lowered_and_reference("MaxPool", {"x": x}, ceil_mode=ceil_mode, **win)
    np.testing.assert_array_equal(ours, expected)


def test_max_pool_int8_pads_with_the_integer_minimum() -> None:
    x = np.array([[[[-128, -100, 5], [7, -128, 127], [-3, 0, -128]]]], np.int8)
    ours, expected = lowered_and_reference("MaxPool", {"x": x}, kernel_shape=(2, 2),
                                           pads=(1, 1, 1, 1), strides=(2, 2))
    assert ours.dtype == np.int8
    np.testing.assert_array_equal(ours, expected)


@settings(max_examples=15, deadline=None)
@given(win=windows(), ceil_mode=st.integers(0, 1), include_pad=st.integers(0, 1),
       seed=st.integers(0, 2**16))
def test_average_pool_matches_reference(win: dict[str, Any], ceil_mode: int, include_pad: int,
                                        seed: int) -> None:
    """The divisor counts real taps (plus explicit pads with count_include_pad), never the
    ceil-mode overhang; a sum of k taps then one division: k + 2 roundings."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, 2, *win.pop("spatial"))).astype(np.float32)
    attrs = {"ceil_mode": ceil_mode, "count_include_pad": include_pad, **win}
    ours, expected = lowered_and_reference("AveragePool", {"x": x}, **attrs)
    magnitude, _ = reference("AveragePool", {"x": np.abs(x)}, **attrs)
    assert_within(ours, expected, magnitude.astype(np.float64),
                  math.prod(win["kernel_shape"]) + 2)


def test_average_pool_divisor_on_a_hand_checked_case() -> None:
    """1-D, kernel 3, stride 2, pads (1, 0), ceil mode, over [1, 2, 3, 4, 5]: the windows
    hold (pad, 1, 2), (2, 3, 4) and (4, 5, overhang). The pad counts only with
    count_include_pad; the overhang never does."""
    x = np.array([[[1.0, 2.0, 3.0, 4.0, 5.0]]], np.float32)
    attrs = {"kernel_shape": (3,), "strides": (2,), "pads": (1, 0), "ceil_mode": 1}
    for include_pad, means in ((0, [1.5, 3.0, 4.5]), (1, [1.0, 3.0, 4.5])):
        ours, expected = lowered_and_reference("AveragePool", {"x": x},
                                               count_include_pad=include_pad, **attrs)
        np.testing.assert_array_equal(ours, np.array([[means]], np.float32))
        np.testing.assert_array_equal(ours, expected)


def test_global_pools_match_reference() -> None:
    """The mean over 12 taps: 12 + 2 roundings of the sum of |x|; the maximum is exact."""
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 3, 4, 3)).astype(np.float32)
    ours, expected = lowered_and_reference("GlobalAveragePool", {"x": x})
    magnitude = np.abs(x).astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert ours.shape == (2, 3, 1, 1)
    assert_within(ours, expected, magnitude, 12 + 2)
    ours, expected = lowered_and_reference("GlobalMaxPool", {"x": x})
    np.testing.assert_array_equal(ours, expected)
