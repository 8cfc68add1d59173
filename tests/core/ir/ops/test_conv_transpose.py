"""ConvTranspose's reference against onnxruntime and onnx's reference implementation:
1-D to 3-D, strides, pads, dilations, output_padding, groups, bias; and its errors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np
from onnx.reference import ReferenceEvaluator
import pytest

from hetero.core.ir import GraphBuilder
from hetero.errors import ShapeError
from oracle import node_model, run_node


@st.composite
def geometries(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 3))
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n)]
    # onnxruntime takes output_padding below the stride (PyTorch: below stride or dilation).
    output_padding = [draw(st.integers(0, s - 1)) for s in strides]
    spatial = [draw(st.integers(1, 4 if n < 3 else 2)) for _ in range(n)]
    pads = []
    for side in range(2):
        for i in range(n):
            natural = (strides[i] * (spatial[i] - 1) + output_padding[i]
                       + dilations[i] * (kernel[i] - 1) + 1)
            room = natural - 1 - (pads[i] if side else 0)
            pads.append(draw(st.integers(0, min(2, room))))
    return {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads,
            "output_padding": output_padding, "spatial": spatial}


def _ours(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, attrs: dict[str, Any]) -> np.ndarray:
    builder = GraphBuilder("ct")
    y = builder.op("ConvTranspose", builder.input("x", x.shape, x.dtype), builder.constant(w, "w"),
                   None if b is None else builder.constant(b, "b"), **attrs)
    builder.output(y)
    node = builder.build().nodes[0]
    return node.opdef.reference([x, w, b], node.attrs)[0]


@settings(max_examples=40, deadline=None)
@given(geo=geometries(), group=st.sampled_from([1, 2]), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_reference_matches_onnxruntime(geo: dict[str, Any], group: int, bias: bool,
                                       seed: int) -> None:
    rng = np.random.default_rng(seed)
    spatial = geo.pop("spatial")
    c_in, per_out = 2 * group, 2
    x = rng.uniform(-1, 1, (2, c_in, *spatial)).astype(np.float32)
    w = rng.uniform(-1, 1, (c_in, per_out, *geo["kernel_shape"])).astype(np.float32)
    b = rng.uniform(-1, 1, (per_out * group,)).astype(np.float32) if bias else None
    attrs = {**geo, "group": group}
    got = _ours(x, w, b, attrs)
    (want,) = run_node("ConvTranspose", {"x": x, "w": w, "b": b}, **attrs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 3], "pads": [1, 0, 1, 2], "output_padding": [1, 1]},
    {"strides": [1, 2], "dilations": [2, 1]},  # (its grouped path fails to reshape)
])
def test_reference_matches_onnx_reference(attrs: dict[str, Any]) -> None:
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (1, 2, 3, 4)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 3, 3, 2)).astype(np.float32)
    model = node_model("ConvTranspose", {"x": x, "w": w}, **attrs)
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "w": w})
    got = _ours(x, w, None, attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_float16_rounds_once() -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (1, 2, 3)).astype(np.float16)
    w = rng.uniform(-1, 1, (2, 2, 2)).astype(np.float16)
    got = _ours(x, w, None, {"strides": [2]})
    want = _ours(x.astype(np.float32), w.astype(np.float32), None, {"strides": [2]})
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want.astype(np.float16))


@pytest.mark.parametrize("attrs,match", [
    ({"output_padding": [2]}, "output_padding"),
    ({"pads": [3, 3]}, "no output"),
    ({"group": 3}, "divisible by group"),
])
def test_bad_attributes_are_shape_errors(attrs: dict[str, Any], match: str) -> None:
    b = GraphBuilder("ct")
    x = b.input("x", (1, 2, 2), np.float32)
    w = b.constant(np.ones((2, 1, 2), np.float32), "w")
    with pytest.raises(ShapeError, match=match):
        b.op("ConvTranspose", x, w, strides=[2], **attrs)

