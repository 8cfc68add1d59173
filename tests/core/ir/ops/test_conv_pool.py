"""Conv and the pooling ops: reference against onnxruntime, inference errors, attributes, FLOPs.

Float tolerances come from the standard bound on a sum of ``k`` rounded terms
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2.2): whatever the order
of summation, the computed sum differs from the exact one by at most
``k * eps * sum(|terms|)``. The reference accumulates in float64 (exact to far
below that) and rounds once, so the gap to onnxruntime must stay within
``(k + 2) * eps * sum(|terms|)`` elementwise, ``eps`` being the dtype's machine
epsilon; ``sum(|terms|)`` is the same op applied to ``|x|`` and ``|w|``.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from hetero.core.ir import GraphBuilder, get_op
from hetero.errors import ShapeError
from opcheck import assert_within, reference
from oracle import run_node

FLOATS = (np.float32, np.float16)


@st.composite
def windows(draw: st.DrawFn, max_rank: int = 3, pad_below_kernel: bool = False) -> dict[str, Any]:
    """Spatial window attributes and an input spatial shape they fit."""
    n = draw(st.integers(1, max_rank))
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    # onnxruntime's pools insist on pads smaller than the kernel.
    most = [k - 1 if pad_below_kernel else 2 for k in kernel]
    pads_begin = [draw(st.integers(0, m)) for m in most]
    pads_end = [draw(st.integers(0, m)) for m in most]
    spatial = []
    for i in range(n):
        extent = dilations[i] * (kernel[i] - 1) + 1
        smallest = max(1, extent - pads_begin[i] - pads_end[i])
        spatial.append(draw(st.integers(smallest, smallest + (6 if n < 3 else 3))))
    return {"kernel_shape": kernel, "dilations": dilations, "strides": strides,
            "pads": pads_begin + pads_end, "spatial": spatial}


@settings(max_examples=40, deadline=None)
@given(win=windows(), groups=st.sampled_from(["one", "two", "depthwise"]),
       per_group=st.integers(1, 3), out_per_group=st.integers(1, 3), batch=st.integers(1, 2),
       bias=st.booleans(), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_conv_matches_onnxruntime(win: dict[str, Any], groups: str, per_group: int,
                                  out_per_group: int, batch: int, bias: bool, dtype: type,
                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    c_in = {"one": per_group, "two": 2 * per_group, "depthwise": 2 + per_group}[groups]
    group = {"one": 1, "two": 2, "depthwise": c_in}[groups]
    c_out = group * out_per_group
    spatial = win.pop("spatial")
    x = rng.uniform(-1, 1, (batch, c_in, *spatial)).astype(dtype)
    w = rng.uniform(-1, 1, (c_out, c_in // group, *win["kernel_shape"])).astype(dtype)
    b = rng.uniform(-1, 1, c_out).astype(dtype) if bias else None
    inputs = {"x": x, "w": w, "b": b}
    ours, node = reference("Conv", inputs, constants=("w", "b"), group=group, **win)
    (theirs,) = run_node("Conv", inputs, constant_inputs=("w", "b"), group=group, **win)
    absolute = [None if a is None else np.abs(a).astype(np.float64) for a in (x, w, b)]
    (magnitude,) = get_op("Conv").reference(absolute, node.attrs)
    terms = c_in // group * math.prod(win["kernel_shape"]) + bias
    assert_within(ours, theirs, magnitude, terms + 2)


def test_conv_completes_derived_attributes() -> None:
    """A Conv given no attributes stores explicit ones taken from its operands."""
    x = np.zeros((1, 2, 7, 6), np.float32)
    _, node = reference("Conv", {"x": x, "w": np.zeros((4, 2, 3, 2), np.float32)}, ("w",))
    assert node.attrs == {"kernel_shape": (3, 2), "strides": (1, 1), "pads": (0, 0, 0, 0),
                          "dilations": (1, 1), "group": 1}
    assert node.output.shape == (1, 4, 5, 5)


@pytest.mark.parametrize("x_shape, w_shape, attrs, message", [
    ((1, 4, 5, 5), (2, 3, 3, 3), {}, r"X has 4 channels but W .* takes 3 per group x group 1 = 3"),
    ((1, 4, 5, 5), (3, 1, 3, 3), {"group": 3}, r"group 3 does not divide the 4 input channels"),
    ((1, 4, 5, 5), (3, 2, 3, 3), {"group": 2}, r"group 2 does not divide the 3 output channels"),
    ((1, 1, 4), (1, 1, 3), {"dilations": (3,)},
     r"kernel extent 7 \(kernel 3, dilation 3\) is larger than the padded input 4 on spatial axis 0: the "
     r"output size would be -2"),
    ((1, 1, 4), (1, 1, 3), {"strides": (1, 1)}, r"strides \[1, 1\] must have 1 entries"),
    ((1, 1, 4, 4), (1, 1, 3), {}, r"must have the rank of X"),
    ((1, 1, 4, 4), (1, 1, 3, 3), {"kernel_shape": (2, 2)}, r"kernel_shape \[2, 2\] differs"),
])
def test_conv_rejects_bad_shapes(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                                 attrs: dict[str, Any], message: str) -> None:
    b = GraphBuilder()
    x = b.input("x", x_shape)
    with pytest.raises(ShapeError, match=r"node conv \(Conv\): .*" + message):
        b.Conv(x, np.zeros(w_shape, np.float32), **attrs)


def test_conv_rejects_bad_bias_and_integer_input() -> None:
    b = GraphBuilder()
    x = b.input("x", (1, 2, 4, 4))
    w = np.zeros((3, 2, 1, 1), np.float32)
    with pytest.raises(ShapeError, match=r"bias B must have shape \[3\]"):
        b.Conv(x, w, np.zeros(2, np.float32))
    with pytest.raises(ShapeError, match="Conv input X must be one of"):
        b.Conv(b.input("xi", (1, 2, 4, 4), "int32"), w.astype(np.int32))


def test_conv_flops_counted_by_hand() -> None:
    # 3x3 conv, 3 -> 4 channels, 8x8 output: 4*64 outputs x 27 MACs = 6912 MACs, + 256 bias adds.
    x = np.zeros((1, 3, 8, 8), np.float32)
    w, b = np.zeros((4, 3, 3, 3), np.float32), np.zeros(4, np.float32)
    _, node = reference("Conv", {"x": x, "w": w, "b": b}, ("w", "b"), pads=(1, 1, 1, 1))
    flops = node.opdef.flops
    assert flops(node.input_types(), [node.output.type], node.attrs) == 2 * 6912 + 256
    # grouped, no bias: 4 outputs channels x 3x3 pixels, each 2 channels x 9 taps = 648 MACs
    _, node = reference("Conv", {"x": np.zeros((1, 4, 5, 5), np.float32),
                                 "w": np.zeros((4, 2, 3, 3), np.float32)}, ("w",), group=2)
    assert flops(node.input_types(), [node.output.type], node.attrs) == 1296


def random_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Uniform floats in [-1, 1), or integers over the dtype's whole range."""
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-1, 1, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


@settings(max_examples=40, deadline=None)
@given(win=windows(pad_below_kernel=True), ceil_mode=st.integers(0, 1), channels=st.integers(1, 3),
       dtype=st.sampled_from(FLOATS + (np.int8, np.uint8)), seed=st.integers(0, 2**16))
def test_max_pool_matches_onnxruntime(win: dict[str, Any], ceil_mode: int, channels: int,
                                      dtype: type, seed: int) -> None:
    x = random_input(np.random.default_rng(seed), (1, channels, *win.pop("spatial")), dtype)
    ours, _ = reference("MaxPool", {"x": x}, ceil_mode=ceil_mode, **win)
    (theirs,) = run_node("MaxPool", {"x": x}, ceil_mode=ceil_mode, **win)
    if dtype == np.float32:  # onnxruntime's float32 MaxPool fills empty windows with -FLT_MAX
        theirs = np.where(theirs == np.finfo(np.float32).min, np.float32(-np.inf), theirs)
    np.testing.assert_array_equal(ours, theirs)  # a maximum is exact
    assert ours.dtype == theirs.dtype


@settings(max_examples=40, deadline=None)
@given(win=windows(pad_below_kernel=True), ceil_mode=st.integers(0, 1),
       count_include_pad=st.integers(0, 1), dtype=st.sampled_from(FLOATS),
       seed=st.integers(0, 2**16))
def test_average_pool_matches_onnxruntime(win: dict[str, Any], ceil_mode: int,
                                          count_include_pad: int, dtype: type, seed: int) -> None:
    x = random_input(np.random.default_rng(seed), (2, 2, *win.pop("spatial")), dtype)
    attrs = dict(win, ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    ours, node = reference("AveragePool", {"x": x}, **attrs)
    # AveragePool's dilations arrived in opset 19; nothing else changed.
    (theirs,) = run_node("AveragePool", {"x": x}, opset=19, **attrs)
    (magnitude,) = get_op("AveragePool").reference([np.abs(x).astype(np.float64)], node.attrs)
    assert_within(ours, theirs, magnitude, math.prod(win["kernel_shape"]) + 2)


def test_ceil_mode_drops_a_window_that_starts_in_the_end_padding() -> None:
    x = np.array([[[1.0, 2.0, 3.0, 4.0]]], np.float32)
    attrs = {"kernel_shape": (2,), "strides": (2,), "pads": (0, 1), "ceil_mode": 1}
    ours, _ = reference("MaxPool", {"x": x}, **attrs)
    np.testing.assert_array_equal(ours, [[[2.0, 4.0]]])  # not a third window on padding alone
    np.testing.assert_array_equal(ours, run_node("MaxPool", {"x": x}, **attrs)[0])


def test_average_pool_divisor_never_counts_the_ceil_overhang() -> None:
    x = np.arange(1.0, 6.0, dtype=np.float32).reshape(1, 1, 5)
    attrs = {"kernel_shape": (3,), "strides": (2,), "pads": (1, 1), "ceil_mode": 1}
    # windows over [pad, 1, 2], [2, 3, 4], [4, 5, pad]: the pads count only with count_include_pad
    excluded, _ = reference("AveragePool", {"x": x}, **attrs)
    included, _ = reference("AveragePool", {"x": x}, count_include_pad=1, **attrs)
    np.testing.assert_allclose(excluded, [[[1.5, 3.0, 4.5]]], rtol=1e-7)
    np.testing.assert_allclose(included, [[[1.0, 3.0, 3.0]]], rtol=1e-7)
    # and with the ceil overhang: [4, 5] then [5, overhang] counts one tap, pad or not
    attrs = {"kernel_shape": (2,), "strides": (2,), "ceil_mode": 1, "count_include_pad": 1}
    np.testing.assert_allclose(reference("AveragePool", {"x": x}, **attrs)[0], [[[1.5, 3.5, 5.0]]])


def test_a_window_wholly_on_padding_gives_minus_infinity_or_zero() -> None:
    # Taps at -1 and +1 around a single element: both land on padding.
    x = np.full((1, 1, 1, 1), 7.0, np.float32)
    attrs = {"kernel_shape": (1, 2), "dilations": (1, 2), "pads": (0, 1, 0, 1)}
    np.testing.assert_array_equal(reference("MaxPool", {"x": x}, **attrs)[0], -np.inf)
    np.testing.assert_array_equal(reference("MaxPool", {"x": x.astype(np.int8)}, **attrs)[0], -128)
    for include in (0, 1):
        ours, _ = reference("AveragePool", {"x": x}, count_include_pad=include, **attrs)
        (theirs,) = run_node("AveragePool", {"x": x}, opset=19, count_include_pad=include, **attrs)
        np.testing.assert_array_equal(ours, 0.0)
        np.testing.assert_array_equal(ours, theirs)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=3, max_size=5), dtype=st.sampled_from(FLOATS),
       op=st.sampled_from(["GlobalAveragePool", "GlobalMaxPool"]), seed=st.integers(0, 2**16))
def test_global_pools_match_onnxruntime(shape: list[int], dtype: type, op: str, seed: int) -> None:
    x = random_input(np.random.default_rng(seed), tuple(shape), dtype)
    ours, _ = reference(op, {"x": x})
    (theirs,) = run_node(op, {"x": x})
    assert ours.shape == tuple(shape[:2]) + (1,) * (len(shape) - 2)
    if op == "GlobalMaxPool":
        np.testing.assert_array_equal(ours, theirs)
    else:
        magnitude = np.abs(x.astype(np.float64)).mean(axis=tuple(range(2, x.ndim)), keepdims=True)
        assert_within(ours, theirs, magnitude, math.prod(shape[2:]) + 2)


def test_pools_complete_derived_attributes() -> None:
    _, node = reference("MaxPool", {"x": np.zeros((1, 1, 6, 6, 6), np.float32)},
                        kernel_shape=(2, 2, 2))
    assert node.attrs == {"kernel_shape": (2, 2, 2), "strides": (1, 1, 1), "pads": (0,) * 6,
                          "dilations": (1, 1, 1), "ceil_mode": 0, "indices": 0,
                          "storage_order": 0}
    assert node.output.shape == (1, 1, 5, 5, 5)


@pytest.mark.parametrize("op, x_shape, dtype, attrs, message", [
    ("MaxPool", (1, 1, 3, 3), "float32", {"kernel_shape": (5, 1)},
     r"kernel extent 5 \(kernel 5, dilation 1\) is larger than the padded input 3 on spatial "
     r"axis 0: the output size would be -1"),
    ("MaxPool", (1, 1, 3, 3), "float32", {"kernel_shape": (2,)}, r"kernel_shape \[2\] must have 2"),
    ("MaxPool", (1, 1, 3, 3), "float32", {"kernel_shape": (2, 2), "strides": (0, 1)},
     r"strides \[0, 1\] must all be >= 1"),
    ("MaxPool", (4, 3), "float32", {"kernel_shape": (2,)}, r"at least one spatial axis"),
    ("AveragePool", (1, 1, 3, 3), "int8", {"kernel_shape": (2, 2)}, r"input X must be one of"),
    ("GlobalAveragePool", (1, 1, 3), "int32", {}, r"input X must be one of"),
])
def test_pools_reject_bad_shapes(op: str, x_shape: tuple[int, ...], dtype: str,
                                 attrs: dict[str, Any], message: str) -> None:
    b = GraphBuilder()
    x = b.input("x", x_shape, dtype)
    with pytest.raises(ShapeError, match=rf"\({op}\): .*{message}"):
        b.op(op, x, **attrs)


def test_pool_flops_counted_by_hand() -> None:
    # 2x2 windows, stride 2, on 2 channels of 4x4: 8 outputs of 4 taps each
    x = np.zeros((1, 2, 4, 4), np.float32)
    for op, expected in (("MaxPool", 32), ("AveragePool", 32 + 8)):
        _, node = reference(op, {"x": x}, kernel_shape=(2, 2), strides=(2, 2))
        assert node.opdef.flops(node.input_types(), [node.output.type], node.attrs) == expected
    _, node = reference("GlobalAveragePool", {"x": x})
    assert node.opdef.flops(node.input_types(), [node.output.type], node.attrs) == 32


def resnet50_convs() -> list[tuple[int, int, int, int, int]]:
    """(C_in, C_out, input size, kernel, stride) of every convolution of ResNet-50 at 224x224."""
    layers = [(3, 64, 224, 7, 2)]
    size, c_in = 56, 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for block in range(blocks):
            s = stride if block == 0 else 1
            layers += [(c_in, width, size, 1, 1), (width, width, size, 3, s),
                       (width, 4 * width, size // s, 1, 1)]
            if block == 0:
                layers.append((c_in, 4 * width, size, 1, s))
            c_in, size = 4 * width, size // s
    return layers


@pytest.mark.slow
def test_conv_reference_runs_resnet50_in_seconds() -> None:
    """All 53 convolutions of ResNet-50 (about 4 GMACs) well inside the few seconds asked for.

    A reference that looped over pixels in Python would take minutes; the limit leaves
    several times the 0.5 to 1.5 s this takes on two cores.
    """
    import time

    rng = np.random.default_rng(0)
    conv = get_op("Conv")
    elapsed = 0.0
    for c_in, c_out, size, k, s in resnet50_convs():
        x = rng.standard_normal((1, c_in, size, size), dtype=np.float32)
        w = rng.standard_normal((c_out, c_in, k, k), dtype=np.float32)
        attrs = {"kernel_shape": (k, k), "strides": (s, s), "pads": (k // 2,) * 4,
                 "dilations": (1, 1), "group": 1}
        start = time.perf_counter()
        (y,) = conv.reference([x, w, None], attrs)
        elapsed += time.perf_counter() - start
        assert y.shape == (1, c_out, -(-size // s), -(-size // s))
    assert elapsed < 8.0, f"the reference Conv took {elapsed:.1f} s for ResNet-50"


@pytest.mark.parametrize("attrs, width, want", [
    # The window is one wider than the padded input: an empty axis, as in onnxruntime.
    ({"kernel_shape": (3,), "dilations": (3,), "pads": (1, 1)}, 0, []),
    # The same with stride 2: onnx's shape inference and onnxruntime round (-1) / 2 + 1
    # toward zero, to one window that hangs past the end and covers x[2] alone.
    ({"kernel_shape": (3,), "dilations": (3,), "pads": (1, 1), "strides": (2,)}, 1, [2.0]),
])
def test_a_pool_window_wider_than_its_padded_input_follows_onnx(attrs: dict[str, Any], width: int,
                                                                 want: list[float]) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    got, node = reference("MaxPool", {"x": x}, **attrs)
    assert node.output.shape == (1, 1, width)
    np.testing.assert_array_equal(got.ravel(), want)


def test_nan_in_a_max_pool_window_propagates() -> None:
    # As the Max op and numpy's max do, wherever the NaN sits in the window (onnxruntime
    # drops it or not by its position): the result does not depend on the order of a scan.
    x = np.array([[[np.nan, 1, 2, np.nan, 5, 4]]], np.float32)
    got, _ = reference("MaxPool", {"x": x}, kernel_shape=(2,), strides=(2,))
    np.testing.assert_array_equal(got.ravel(), [np.nan, np.nan, 5])
