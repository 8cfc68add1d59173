"""DeformConv's reference against onnx's reference and onnxruntime, and compiled on llvm_cpu."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from oracle import run_model


def _case(seed: int):
    rng = np.random.default_rng(seed)
    group, offset_group = [(1, 1), (2, 2), (2, 1), (1, 2)][seed % 4]
    c, oc, k = 4, 2 * group, 3
    height, width = 5, 6
    attrs = {"group": group, "offset_group": offset_group, "pads": [1, 0, 1, 1],
             "strides": [1, 2], "dilations": [1, 1 + seed % 2]}
    oh = height + 2 - k + 1
    ow = (width + 1 - (k - 1) * attrs["dilations"][1] - 1) // 2 + 1
    feeds = {"x": rng.standard_normal((2, c, height, width)).astype(np.float32),
             "w": rng.standard_normal((oc, c // group, k, k)).astype(np.float32),
             "o": (rng.standard_normal((2, 2 * offset_group * k * k, oh, ow)) * 2).astype(np.float32),
             "b": rng.standard_normal(oc).astype(np.float32),
             "m": rng.uniform(0, 1, (2, offset_group * k * k, oh, ow)).astype(np.float32)}
    vi = helper.make_tensor_value_info
    node = helper.make_node("DeformConv", list(feeds), ["y"], **attrs)
    graph = helper.make_graph([node], "deform", [vi(n, TensorProto.FLOAT, a.shape) for n, a in feeds.items()],
                              [vi("y", TensorProto.FLOAT, (2, oc, oh, ow))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), feeds


@pytest.mark.parametrize("seed", range(4))
def test_deform_conv_matches_onnx_reference_and_onnxruntime(seed: int) -> None:
    model, feeds = _case(seed)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(run_model(model, feeds)[0], want, rtol=1e-4, atol=1e-4)
    ours = hetero.run_reference(hetero.load_onnx(model), feeds)["y"]
    # Sums of 18-36 products in float32 by the references: a few ulps of their order.
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)
    got = hetero.compile(model, targets=["llvm_cpu"]).run(feeds)["y"]
    np.testing.assert_allclose(got, ours, rtol=1e-5, atol=1e-5)
