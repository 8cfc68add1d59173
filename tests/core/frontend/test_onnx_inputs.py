"""Graph inputs: dynamic dims are refused until ``input_shapes`` fixes them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.frontend.onnx.convert import compare_types, translate
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.frontend.onnx.shapes import resolve_input_shapes
from hetero.core.ir.types import TensorType
from hetero.errors import DynamicShapeError, InputError, ModelLoadError, ShapeError
from models import tiny_model
from oracle import run_model


def _softmax(shape: list[int | str] | None) -> onnx.ModelProto:
    return tiny_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                      {"x": (TensorProto.FLOAT, shape)}, ["y"])


def test_named_dynamic_dim_is_refused_with_a_fix() -> None:
    with pytest.raises(DynamicShapeError) as info:
        hetero.load_onnx(_softmax(["batch", 10]))
    message = str(info.value)
    assert "input 'x'" in message and "dimension 0" in message and "'batch'" in message
    assert 'input_shapes={"x": [...]}' in message


def test_anonymous_dynamic_dim_is_refused() -> None:
    model = _softmax([4, 10])
    model.graph.input[0].type.tensor_type.shape.dim[1].Clear()
    with pytest.raises(DynamicShapeError, match="input 'x': dimension 1 is dynamic"):
        hetero.load_onnx(model)


def test_unknown_rank_is_refused() -> None:
    with pytest.raises(DynamicShapeError, match="input 'x' has no declared shape"):
        hetero.load_onnx(_softmax(None))


def test_input_shapes_fix_dynamic_dims() -> None:
    model = _softmax(["batch", 10])
    graph = hetero.load_onnx(model, {"x": [3, 10]})
    assert graph.inputs[0].shape == (3, 10) and graph.outputs[0].shape == (3, 10)
    x = np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32)
    np.testing.assert_allclose(hetero.run_reference(graph, {"x": x})["y"],
                               run_model(model, {"x": x})[0], rtol=1e-6, atol=1e-7)


def test_input_shapes_override_declared_dims() -> None:
    graph = hetero.load_onnx(_softmax([1, 10]), {"x": (8, 10)})
    assert graph.inputs[0].shape == (8, 10)


def test_unknown_name_suggests_the_right_one() -> None:
    model = _softmax(["batch", 10])
    model.graph.input[0].name = model.graph.node[0].input[0] = "pixels"
    with pytest.raises(InputError, match=r"'pixel'.*did you mean 'pixels'.*\['pixels'\]"):
        hetero.load_onnx(model, {"pixel": [3, 10]})


def test_rank_mismatch_in_input_shapes() -> None:
    with pytest.raises(InputError, match="'x'.*rank 3.*declares rank 2"):
        hetero.load_onnx(_softmax(["batch", 10]), {"x": [3, 10, 1]})


def test_initializer_listed_as_input_is_a_constant() -> None:
    # IR 3 lists every initializer among the graph inputs; it still is a constant.
    bias = numpy_helper.from_array(np.full(10, 0.5, np.float32), "bias")
    model = tiny_model([helper.make_node("Add", ["x", "bias"], ["y"])],
                       {"x": (TensorProto.FLOAT, [2, 10]), "bias": (TensorProto.FLOAT, [10])},
                       ["y"], [bias])
    graph = hetero.load_onnx(model)
    assert [v.name for v in graph.inputs] == ["x"]
    np.testing.assert_array_equal(graph.values["bias"].data, np.full(10, 0.5, np.float32))
    with pytest.raises(InputError, match="'bias', which is not an input"):
        hetero.load_onnx(model, {"bias": [10]})


def test_unsupported_input_dtype() -> None:
    model = tiny_model([helper.make_node("Identity", ["s"], ["y"])],
                       {"s": (TensorProto.STRING, [2])}, ["y"])
    with pytest.raises(ModelLoadError, match="input 's' has element type STRING"):
        hetero.load_onnx(model)


def test_disagreement_with_onnx_inference_names_the_value() -> None:
    source = read_model(_softmax([2, 10]))
    ctx = translate(source, resolve_input_shapes(source, None), 2**20)
    compare_types(ctx, {"y": TensorType((2, 10), "float32")})  # agreeing types pass
    with pytest.raises(ShapeError, match=r"value 'y'.*f32\[2,10\] in hetero but f32\[2,11\]"):
        compare_types(ctx, {"y": TensorType((2, 11), "float32")})


def test_a_negative_declared_dimension_names_the_model_input_and_dimension() -> None:
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "negdim", [vi("x", TensorProto.FLOAT, [2, -3])],
                              [vi("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ModelLoadError, match=r"model negdim: input 'x' declares dimension 1 as -3, a negative size "
                                             r"\(its shape is \[2, -3\]\); re-export the model, or give"):
        hetero.load_onnx(model)
