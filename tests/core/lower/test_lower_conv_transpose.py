"""ConvTranspose's gather lowering against its reference on the tensor-IR interpreter, and
the import of output_shape and auto_pad compiled by llvm_cpu against onnxruntime."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings, strategies as st
import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import verify_func
from hetero.core.lower import lower_node
from hetero.errors import UnsupportedOpError
from hetero.onnx_backend import HeteroBackend
from lowercheck import run_lowered
from models import tiny_model
from oracle import run_model


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 2), data=st.data(), group=st.sampled_from([1, 2]), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_lowered_matches_reference(n: int, data: st.DataObject, group: int, bias: bool,
                                   seed: int) -> None:
    """Strides, dilations, pads (negative ones too), output_padding, groups, bias."""
    draw = data.draw
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n)]
    output_padding = [draw(st.integers(0, s - 1)) for s in strides]
    pads = [draw(st.integers(-1, 1)) for _ in range(2 * n)]
    spatial = [draw(st.integers(1, 3)) for _ in range(n)]
    assume(all(s * (d - 1) + p + dl * (k - 1) + 1 - pads[i] - pads[i + n] >= 1
               for i, (s, d, p, dl, k) in enumerate(zip(strides, spatial, output_padding,
                                                        dilations, kernel))))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (1, 2 * group, *spatial)).astype(np.float32)
    w = rng.uniform(-1, 1, (2 * group, 2, *kernel)).astype(np.float32)
    b = rng.uniform(-1, 1, (2 * group,)).astype(np.float32) if bias else None
    builder = GraphBuilder("ct")
    y = builder.op("ConvTranspose", builder.input("x", x.shape, x.dtype),
                   builder.constant(w, "w"), None if b is None else builder.constant(b, "b"),
                   strides=strides, dilations=dilations, pads=pads,
                   output_padding=output_padding, group=group)
    builder.output(y)
    node = builder.build().nodes[0]
    want = node.opdef.reference([x, w, b], node.attrs)[0]
    (got,) = run_lowered(verify_func(lower_node(node)), node, {"x": x})
    # A sum of at most 2 * prod(kernel) products of magnitude <= 1, plus the bias.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


def _model(x_shape: list[int], w: np.ndarray, **attrs: Any) -> onnx.ModelProto:
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="my_deconv", **attrs)
    return tiny_model([node], {"x": (onnx.TensorProto.FLOAT, x_shape)}, ["y"],
                      [numpy_helper.from_array(w, "w")], opset=17)


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 3], "auto_pad": "VALID"},
    {"strides": [2, 2], "output_shape": [6, 7]},
    {"strides": [2, 2], "output_shape": [6, 6], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "output_shape": [5, 6], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 2], "output_padding": [1, 0], "pads": [1, 0, 0, 1]},
    {"strides": [1, 1], "dilations": [2, 2], "group": 1},
])
def test_import_matches_onnxruntime(attrs: dict[str, Any]) -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 2, 3, 3)).astype(np.float32)
    w = rng.uniform(-1, 1, (2, 2, 3, 3)).astype(np.float32)
    model = _model(list(x.shape), w, **attrs)
    (got,) = HeteroBackend.prepare(model).run([x])
    (want,) = run_model(model, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"strides": [3], "auto_pad": "SAME_UPPER"},  # kernel 2 < stride 3: the total is negative
    {"strides": [2], "output_shape": [10]},
])
def test_outputs_past_the_natural_one_are_refused(attrs: dict[str, Any]) -> None:
    w = np.ones((1, 1, 2), np.float32)
    with pytest.raises(UnsupportedOpError, match="my_deconv.*past the natural"):
        HeteroBackend.prepare(_model([1, 1, 4], w, **attrs))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 3), data=st.data(), group=st.sampled_from([1, 2]), bias=st.booleans(),
       seed=st.integers(0, 2**16))
def test_constant_weights_run_as_a_conv_matching_onnxruntime(
        n: int, data: st.DataObject, group: int, bias: bool, seed: int) -> None:
    """With constant weights the import spreads the input and runs a Conv: pads larger than
    the kernel's reach (cropped), output_padding, dilations and groups agree with
    onnxruntime."""
    draw = data.draw
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    dilations = [draw(st.integers(1, 2)) for _ in range(n)]
    output_padding = [draw(st.integers(0, s - 1)) for s in strides]
    pads = [draw(st.integers(0, 3)) for _ in range(2 * n)]
    spatial = [draw(st.integers(1, 4 if n < 3 else 2)) for _ in range(n)]
    assume(all(s * (d - 1) + p + dl * (k - 1) + 1 - pads[i] - pads[i + n] >= 1
               for i, (s, d, p, dl, k) in enumerate(zip(strides, spatial, output_padding,
                                                        dilations, kernel))))
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (2, 2 * group, *spatial)).astype(np.float32)
    w = rng.uniform(-1, 1, (2 * group, 3, *kernel)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    names = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.uniform(-1, 1, (3 * group,)).astype(np.float32),
                                             "b"))
        names.append("b")
    node = helper.make_node("ConvTranspose", names, ["y"], strides=strides, dilations=dilations,
                            pads=pads, output_padding=output_padding, group=group)
    model = tiny_model([node], {"x": (onnx.TensorProto.FLOAT, list(x.shape))}, ["y"], inits,
                       opset=17)
    (got,) = HeteroBackend.prepare(model).run([x])
    (want,) = run_model(model, {"x": x})
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
