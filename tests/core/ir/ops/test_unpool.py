"""Col2Im imported from ONNX (opset 18) and run on the reference and llvm_cpu, against
onnx's reference evaluator and onnxruntime: overlapping, spaced and padded windows in
1 to 3 dims, and its constant shape inputs refused when they vary."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.errors import HeteroError
from oracle import run_model

RNG = np.random.default_rng(11)


def _col2im_model(x: np.ndarray, image: list[int], block: list[int], **attrs: list[int]
                  ) -> onnx.ModelProto:
    node = helper.make_node("Col2Im", ["x", "image_shape", "block_shape"], ["y"], **attrs)
    out = [x.shape[0], x.shape[1] // math.prod(block), *image]
    inits = [numpy_helper.from_array(np.array(image, np.int64), "image_shape"),
             numpy_helper.from_array(np.array(block, np.int64), "block_shape")]
    graph = helper.make_graph(
        [node], "col2im", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _blocks(image: list[int], block: list[int], strides: list[int], dilations: list[int],
            pads: list[int]) -> int:
    n = len(image)
    return math.prod((image[i] + pads[i] + pads[i + n] - dilations[i] * (block[i] - 1) - 1)
                     // strides[i] + 1 for i in range(n))


@pytest.mark.parametrize(("image", "block", "strides", "dilations", "pads"), [
    ([5, 5], [2, 2], [1, 1], [1, 1], [0, 0, 0, 0]),        # overlapping blocks add up
    ([6, 7], [3, 2], [2, 3], [1, 2], [1, 0, 2, 1]),        # spaced, dilated, padded
    ([9], [3], [2], [2], [2, 1]),
    ([4, 3, 5], [2, 1, 3], [1, 2, 2], [2, 1, 1], [1, 0, 0, 0, 1, 2]),
])
def test_col2im_matches_onnx(image: list[int], block: list[int], strides: list[int],
                             dilations: list[int], pads: list[int]) -> None:
    attrs = {"strides": strides, "dilations": dilations, "pads": pads}
    x = RNG.standard_normal((2, 3 * math.prod(block), _blocks(image, block, **attrs)))
    x = x.astype(np.float32)
    model = _col2im_model(x, image, block, **attrs)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    if len(image) == 2:  # onnxruntime's kernel takes 2-D images
        np.testing.assert_allclose(run_model(model, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    graph = hetero.load_onnx(model)
    np.testing.assert_allclose(run_reference(graph, {"x": x})["y"], want, rtol=1e-6, atol=1e-6)
    got = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_col2im_with_a_wrong_column_count_is_refused() -> None:
    x = np.zeros((1, 4, 10), np.float32)  # a 2x2 block on 5x5 takes 16 positions, not 10
    with pytest.raises(HeteroError, match="must be 16"):
        hetero.load_onnx(_col2im_model(x, [5, 5], [2, 2]))


def _pool_unpool_model(shape: list[int], output_shape: list[int] | None, **attrs: list[int]
                       ) -> onnx.ModelProto:
    """MaxPool's values and indices fed to MaxUnpool (opset 22), as a pooling autoencoder does."""
    unpool_inputs = ["y", "i"] + (["output_shape"] if output_shape else [])
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], **attrs),
             helper.make_node("MaxUnpool", unpool_inputs, ["z"], **attrs)]
    inits = ([numpy_helper.from_array(np.array(output_shape, np.int64), "output_shape")]
             if output_shape else [])
    graph = helper.make_graph(
        nodes, "unpool", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, output_shape or [])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    if output_shape is None:  # the output's shape is MaxUnpool's inference
        del model.graph.output[:]
        inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
        model.graph.output.extend(v for v in inferred if v.name == "z")
    return model


@pytest.mark.parametrize(("shape", "output_shape", "attrs"), [
    ([2, 3, 6, 8], None, {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ([1, 2, 7, 5], None, {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}),
    ([1, 2, 9], None, {"kernel_shape": [3], "strides": [3]}),
    ([1, 1, 4, 6], [1, 1, 4, 6], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    # Odd sizes: MaxPool rounds 5 down to 2, MaxUnpool's own inference would give 4.
    ([1, 2, 5, 5], [1, 2, 5, 5], {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ([1, 1, 7, 5, 3], [1, 1, 7, 5, 3], {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
])
def test_max_pool_then_unpool_matches_onnxruntime(shape: list[int], output_shape: list[int] | None,
                                                  attrs: dict[str, list[int]]) -> None:
    """MaxUnpool undoes MaxPool's selection: the maxima back in place, zeros elsewhere."""
    x = RNG.standard_normal(shape).astype(np.float32)
    model = _pool_unpool_model(shape, output_shape, **attrs)
    want = run_model(model, {"x": x})[0]
    if output_shape is None or output_shape[2:] == [4, 6]:  # onnx's reference agrees here
        np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, {"x": x})[0], want)
    else:  # the maxima of every whole window are back where they were
        kept = want != 0
        np.testing.assert_array_equal(want[kept], x[kept])
    graph = hetero.load_onnx(model)
    np.testing.assert_array_equal(run_reference(graph, {"x": x})["z"], want)
    got = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run({"x": x})["z"]
    np.testing.assert_array_equal(got, want)


def test_max_unpool_index_past_the_output_is_refused_at_run_time() -> None:
    node = helper.make_node("MaxUnpool", ["x", "i"], ["z"], kernel_shape=[2], strides=[2])
    graph = helper.make_graph(
        [node], "unpool", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 2]),
                           helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [1, 1, 2])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [1, 1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    compiled = hetero.compile(hetero.load_onnx(model), targets=["llvm_cpu"], strict=True)
    x = np.ones((1, 1, 2), np.float32)
    np.testing.assert_array_equal(compiled.run({"x": x, "i": np.array([[[3, 3]]])})["z"],
                                  [[[0, 0, 0, 1]]])
    with pytest.raises(HeteroError, match="index 4 is out of range"):
        compiled.run({"x": x, "i": np.array([[[1, 4]]])})
