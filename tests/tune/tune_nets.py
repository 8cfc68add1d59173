"""A small convolutional net for the tuner's tests: two equal 3x3 convolutions (one task,
two occurrences), a 1x1 convolution, and a MatMul head."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_net(seed: int = 0) -> onnx.ModelProto:
    """x f32[1,8,8,8] -> conv3x3 -> relu -> conv3x3 -> relu -> conv1x1(16) -> flatten -> matmul(10)."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3"),
        helper.make_node("Flatten", ["c3"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "w4"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes, "tune_convnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [weight("w1", 8, 8, 3, 3), weight("w2", 8, 8, 3, 3), weight("w3", 16, 8, 1, 1), weight("w4", 1024, 10)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
