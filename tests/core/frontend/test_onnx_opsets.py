"""Every opset from 7 to the newest imports and computes what onnxruntime computes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.frontend.onnx.opsets import MIN_OPSET, newest_opset
from hetero.errors import ModelLoadError
from models import tiny_model
from oracle import run_model


def _const(name: str, values: object, dtype: type = np.int64) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, dtype), name)


def model_at(opset: int) -> onnx.ModelProto:
    """Conv, Relu, Clip, ReduceMean, Squeeze, Unsqueeze, Split, Reshape and Softmax,
    written the way ``opset`` spells them (attributes before inputs took over)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             _const("shape", [2, -1])]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"])]
    if opset < 11:
        nodes.append(helper.make_node("Clip", ["r"], ["cl"], min=0.0, max=2.0))
    else:
        inits += [_const("lo", 0.0, np.float32), _const("hi", 2.0, np.float32)]
        nodes.append(helper.make_node("Clip", ["r", "lo", "hi"], ["cl"]))
    if opset < 18:
        nodes.append(helper.make_node("ReduceMean", ["cl"], ["m"], axes=[2], keepdims=1))
    else:
        inits.append(_const("rax", [2]))
        nodes.append(helper.make_node("ReduceMean", ["cl", "rax"], ["m"], keepdims=1))
    if opset < 13:
        nodes += [helper.make_node("Squeeze", ["m"], ["s"], axes=[2]),
                  helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0]),
                  helper.make_node("Split", ["u"], ["p", "q"], axis=3, split=[2, 3])]
    else:
        inits += [_const("sax", [2]), _const("uax", [0]), _const("sizes", [2, 3])]
        nodes += [helper.make_node("Squeeze", ["m", "sax"], ["s"]),
                  helper.make_node("Unsqueeze", ["s", "uax"], ["u"]),
                  helper.make_node("Split", ["u", "sizes"], ["p", "q"], axis=3)]
    nodes += [helper.make_node("Reshape", ["q", "shape"], ["rs"]),
              helper.make_node("Softmax", ["rs"], ["y"], axis=1),
              # On a 4-D tensor, Softmax before opset 13 normalises over all dims from axis on.
              helper.make_node("Softmax", ["cl"], ["z"], axis=1)]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 5, 5])}, ["y", "p", "z"], inits,
                       opset=opset)
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    if model.ir_version < 4:  # IR 3 lists every initializer among the graph inputs
        model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                                 for t in inits)
    return model


@pytest.mark.parametrize("opset", range(MIN_OPSET, newest_opset() + 1))
def test_every_opset_matches_onnxruntime(opset: int) -> None:
    model = model_at(opset)
    onnx.checker.check_model(model)
    x = np.random.default_rng(1).standard_normal((2, 3, 5, 5)).astype(np.float32)
    graph = hetero.load_onnx(model)
    ours = hetero.run_reference(graph, {"x": x})
    theirs = run_model(model, {"x": x})
    # A handful of float32 ops; both sides round differently but only in the last bits.
    for name, expected in zip(["y", "p", "z"], theirs):
        np.testing.assert_allclose(ours[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
    assert [v.name for v in graph.inputs] == ["x"]  # initializers are constants, not inputs


def test_old_opset_upgrade_keeps_softmax_semantics() -> None:
    graph = hetero.load_onnx(model_at(11))
    # Opset 11's coerce-to-2D Softmax becomes a canonical Softmax between Flatten and Reshape.
    reshape = graph.values["z"].producer
    softmax = reshape.inputs[0].producer
    chain = (reshape.op, softmax.op, softmax.inputs[0].producer.op)
    assert chain == ("Reshape", "Softmax", "Flatten")


def _relu_model(opset: int) -> onnx.ModelProto:
    model = tiny_model([helper.make_node("Relu", ["x"], ["y"])],
                       {"x": (TensorProto.FLOAT, [2])}, ["y"], opset=max(opset, MIN_OPSET))
    model.opset_import[0].version = opset
    return model


@pytest.mark.parametrize("opset", [6, newest_opset() + 1])
def test_opset_out_of_range_is_refused(opset: int) -> None:
    with pytest.raises(ModelLoadError, match=f"opset {opset}.*opsets {MIN_OPSET} to"):
        hetero.load_onnx(_relu_model(opset))


def test_missing_default_domain_is_refused() -> None:
    model = _relu_model(13)
    model.opset_import[0].domain = "com.example"
    with pytest.raises(ModelLoadError, match="default ONNX domain"):
        hetero.load_onnx(model)
