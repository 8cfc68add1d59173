"""Static operands computed from shapes fold into explicit canonical attributes."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.errors import DynamicShapeError
from models import tiny_model
from oracle import run_model


def _i64(name: str, *values: int) -> object:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _check(model: object, x: np.ndarray) -> hetero.Graph:
    graph = hetero.load_onnx(model)
    ours = hetero.run_reference(graph, {"x": x})
    for out, expected in zip(graph.outputs, run_model(model, {"x": x})):
        np.testing.assert_array_equal(ours[out.name], expected)
    return graph


def test_pytorch_flatten_chain_becomes_one_reshape() -> None:
    # x.view(x.size(0), -1), as torch.onnx exports it.
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name="/Shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="/Gather", axis=0),
        helper.make_node("Unsqueeze", ["batch", "axes0"], ["batch_1d"], name="/Unsqueeze"),
        helper.make_node("Concat", ["batch_1d", "minus_one"], ["target"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"], name="/Reshape"),
    ]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 4, 5])}, ["y"],
                       [numpy_helper.from_array(np.array(0, np.int64), "zero"), _i64("axes0", 0),
                        _i64("minus_one", -1)])
    graph = _check(model, np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5))
    nodes = [(n.name, n.op, n.attrs["shape"]) for n in graph.nodes]
    assert nodes == [("/Reshape", "Reshape", (2, 60))]
    assert set(graph.values) == {"x", "y"}  # the dead chain and its constants are gone


def test_arithmetic_on_dims_folds() -> None:
    # x.view(b, c * h, w // 1), the dims read off Shape and combined with Split, Mul and Div.
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "one", "three"], ["ch"]),
        helper.make_node("Split", ["ch"], ["c", "h"], axis=0, num_outputs=2),
        helper.make_node("Mul", ["c", "h"], ["c_times_h"]),
        helper.make_node("Shape", ["x"], ["w"], start=-1),
        helper.make_node("Div", ["w", "one"], ["w_div"]),
        helper.make_node("Shape", ["x"], ["b"], end=1),
        helper.make_node("Concat", ["b", "c_times_h", "w_div"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 4, 5])}, ["y"],
                       [_i64("one", 1), _i64("three", 3)])
    graph = _check(model, np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32))
    assert [n.op for n in graph.nodes] == ["Reshape"]
    assert graph.nodes[0].attrs["shape"] == (2, 12, 5)


def test_constant_of_shape_from_an_input_shape() -> None:
    value = numpy_helper.from_array(np.array([1.5], np.float32))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"], value=value),
             helper.make_node("Add", ["x", "ones"], ["y"])]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [3, 2])}, ["y"])
    graph = _check(model, np.ones((3, 2), np.float32))
    assert [n.op for n in graph.nodes] == ["ConstantOfShape", "Add"]
    assert graph.nodes[0].attrs["shape"] == (3, 2)


def test_shape_as_a_graph_output_stays() -> None:
    nodes = [helper.make_node("Shape", ["x"], ["y"])]
    graph = _check(tiny_model(nodes, {"x": (TensorProto.FLOAT, [3, 2])}, ["y"]),
                   np.zeros((3, 2), np.float32))
    assert [n.op for n in graph.nodes] == ["Shape"]


def test_runtime_dependent_static_operand_is_refused() -> None:
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape_by_input")]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 6]),
                               "target": (TensorProto.INT64, [2])}, ["y"])
    with pytest.raises(DynamicShapeError, match="'reshape_by_input'.*shape input 'target'"):
        hetero.load_onnx(model)


def test_dead_compute_is_dropped_but_live_nodes_kept() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["unused"], name="dead"),
             helper.make_node("Neg", ["x"], ["y"], name="live")]
    graph = hetero.load_onnx(tiny_model(nodes, {"x": (TensorProto.FLOAT, [2])}, ["y"]))
    assert [n.name for n in graph.nodes] == ["live"] and "unused" not in graph.values
