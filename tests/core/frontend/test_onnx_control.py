"""If with a condition known at import (or at a specialisation) is inlined."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.frontend.onnx.translate_control import MAX_NESTING
from hetero.errors import UnsupportedOpError
from oracle import run_model

vi = helper.make_tensor_value_info


def _branch(name: str, op: str, out: str) -> onnx.GraphProto:
    """A branch computing ``out = op(x)`` from the outer graph's ``x``."""
    return helper.make_graph([helper.make_node(op, ["x"], [out])], name, [],
                             [vi(out, TensorProto.FLOAT, None)])


def _if_model(cond_nodes, inputs, x_shape, inits=()) -> onnx.ModelProto:
    node = helper.make_node("If", ["cond"], ["y"], then_branch=_branch("then", "Relu", "t"),
                            else_branch=_branch("else", "Neg", "e"))
    graph = helper.make_graph([*cond_nodes, node], "m", inputs, [vi("y", TensorProto.FLOAT, x_shape)],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("cond", [True, False])
def test_an_if_on_a_constant_is_its_branch(cond: bool) -> None:
    model = _if_model([], [vi("x", TensorProto.FLOAT, [2, 3])], [2, 3],
                      [numpy_helper.from_array(np.array(cond), "cond")])
    graph = hetero.load_onnx(model)
    assert [n.op for n in hetero.optimize(graph).nodes] == ["Relu" if cond else "Neg"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(hetero.compile(model).run({"x": x})["y"], run_model(model, {"x": x})[0])


def test_an_if_on_the_batch_size_follows_each_specialisation() -> None:
    # Exporters' If(Equal(Shape(x)[0], 1)): decided once the batch is known.
    consts = [numpy_helper.from_array(np.array([0], np.int64), "zero"),
              numpy_helper.from_array(np.array([1], np.int64), "one")]
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Equal", ["batch", "one"], ["eq"]),
             helper.make_node("Squeeze", ["eq", "zero"], ["cond"])]
    model = _if_model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3])], ["N", 3], consts)
    exe = hetero.compile(model)
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
        np.testing.assert_array_equal(exe.run({"x": x})["y"], run_model(model, {"x": x})[0])


def test_an_if_on_a_graph_input_is_specialised_on_its_value() -> None:
    model = _if_model([], [vi("x", TensorProto.FLOAT, [4]), vi("cond", TensorProto.BOOL, [])], [4])
    exe = hetero.compile(model)
    x = np.array([-1, 2, -3, 4], np.float32)
    for cond in (True, False, True):
        feeds = {"x": x, "cond": np.array(cond)}
        np.testing.assert_array_equal(exe.run(feeds)["y"], run_model(model, feeds)[0])
    assert exe.specialized_on == ("cond",) and exe.compiled == 2


def _nested(depth: int) -> onnx.ModelProto:
    """``depth`` Ifs, each the then_branch of the one outside it, on a constant true."""
    inner = _branch("leaf", "Relu", "leaf_out")
    for level in range(depth - 1, -1, -1):
        out = f"y{level}" if level else "y"
        node = helper.make_node("If", ["cond"], [out], then_branch=inner,
                                else_branch=_branch(f"else{level}", "Neg", f"e{level}"))
        inner = helper.make_graph([node], f"level{level}", [], [vi(out, TensorProto.FLOAT, None)])
    graph = helper.make_graph(list(inner.node), "m", [vi("x", TensorProto.FLOAT, [3])],
                              [vi("y", TensorProto.FLOAT, [3])],
                              [numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_nested_ifs_inline_and_their_depth_is_bounded() -> None:
    graph = hetero.load_onnx(_nested(3))
    assert [n.op for n in hetero.optimize(graph).nodes] == ["Relu"]
    with pytest.raises(UnsupportedOpError, match=f"Ifs nest more than {MAX_NESTING} deep"):
        hetero.load_onnx(_nested(MAX_NESTING + 1))


def test_an_op_hetero_lacks_inside_a_branch_is_named() -> None:
    model = _if_model([], [vi("x", TensorProto.FLOAT, [3])], [3],
                      [numpy_helper.from_array(np.array(True), "cond")])
    then = next(a for a in model.graph.node[0].attribute if a.name == "then_branch")
    then.g.node[0].op_type = "Unique"
    with pytest.raises(UnsupportedOpError, match="its then_branch uses Unique"):
        hetero.load_onnx(model)
