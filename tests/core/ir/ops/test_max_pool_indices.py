"""MaxPool's Indices output imported from ONNX and run on the reference and llvm_cpu,
against onnxruntime: 1- to 3-D windows with padding, dilation, ceil mode, both storage
orders and many ties (the first tap in the window's row-major order wins), and NaN
counted as the maximum, as ArgMax counts it."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np
from onnx import helper
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from models import tiny_model
from oracle import run_model


@st.composite
def windows(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 3))
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    # onnxruntime insists on pads smaller than the kernel.
    pads = [draw(st.integers(0, k - 1)) for k in kernel * 2]
    spatial = []
    for i in range(n):
        extent = dilations[i] * (kernel[i] - 1) + 1
        smallest = max(1, extent - pads[i] - pads[i + n])
        spatial.append(draw(st.integers(smallest, smallest + (4 if n < 3 else 2))))
    return {"kernel_shape": kernel, "dilations": dilations, "strides": strides, "pads": pads,
            "spatial": spatial}


def _model(x: np.ndarray, **attrs: Any):
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    return tiny_model([node], {"x": (elem, list(x.shape))}, ["y", "i"], [], opset=12)


def _both(model, x: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    graph = hetero.load_onnx(model)
    compiled = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run({"x": x})
    return run_reference(graph, {"x": x}), compiled


@settings(max_examples=25, deadline=None)
@given(win=windows(), ceil_mode=st.integers(0, 1), storage_order=st.integers(0, 1),
       dtype=st.sampled_from([np.float32, np.int8]), seed=st.integers(0, 2**16))
def test_max_pool_indices_match_onnxruntime(win: dict[str, Any], ceil_mode: int,
                                            storage_order: int, dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 3, (2, 2, *win.pop("spatial"))).astype(dtype)  # many ties
    model = _model(x, ceil_mode=ceil_mode, storage_order=storage_order, **win)
    want_y, want_i = run_model(model, {"x": x})
    lowest = -np.inf if dtype == np.float32 else np.iinfo(dtype).min
    for got in _both(model, x):
        # A dilated window wholly on padding has no index (-1) and the lowest value;
        # onnxruntime leaves such an index unwritten.
        real = got["i"] != -1
        np.testing.assert_array_equal(got["i"][real], want_i[real])
        np.testing.assert_array_equal(got["y"][real], want_y[real])
        assert np.all(got["y"][~real] == lowest)


def test_a_nan_is_the_maximum_and_its_first_tap_wins() -> None:
    x = np.array([[[[1.0, np.nan, 3.0, np.nan], [5.0, 2.0, np.nan, 0.0]]]], np.float32)
    model = _model(x, kernel_shape=[2, 2], strides=[2, 2])
    for got in _both(model, x):
        np.testing.assert_array_equal(got["y"], [[[[np.nan, np.nan]]]])
        np.testing.assert_array_equal(got["i"], [[[[1, 3]]]])


@pytest.mark.parametrize("used", [("y",), ("y", "i")])
def test_indices_are_computed_only_when_read(used: tuple[str, ...]) -> None:
    x = np.zeros((1, 1, 4, 4), np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])
    model = tiny_model([node], {"x": (1, [1, 1, 4, 4])}, list(used), [], opset=12)
    graph = hetero.load_onnx(model)
    assert len(graph.nodes[0].outputs) == len(used)


def test_a_qdq_max_pool_whose_indices_are_read_stays_float() -> None:
    """lower_qdq moves a QDQ MaxPool to int8 only while it has one output."""
    from hetero.core.ir import GraphBuilder
    from hetero.core.passes.lower_qdq import lower_qdq

    b = GraphBuilder("qdq")
    scale, zero = b.constant(np.array(0.1, np.float32), "s"), b.constant(np.array(0, np.int8), "z")
    x = b.op("DequantizeLinear", b.input("x", (1, 1, 4, 4), "int8"), scale, zero)
    y, i = b.op("MaxPool", x, kernel_shape=(2, 2), indices=1)
    b.output(b.op("QuantizeLinear", y, scale, zero), i)
    assert [n.op for n in lower_qdq(b.build()).nodes] == [
        "DequantizeLinear", "MaxPool", "QuantizeLinear"]
