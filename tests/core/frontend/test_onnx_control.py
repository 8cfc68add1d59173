"""If with a condition known at import (or at a specialisation) is inlined."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.frontend.onnx.translate_control import MAX_NESTING
from hetero.core.staging import StagedExecutable
from hetero.errors import DataDependentError, UnsupportedOpError
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
    then.g.node[0].op_type = "RandomNormalLike"
    with pytest.raises(UnsupportedOpError, match="its then_branch uses RandomNormalLike"):
        hetero.load_onnx(model)


def _scan_model(reverse: int, out_axis: int) -> onnx.ModelProto:
    """Scan: a running sum over x's axis 1 (reverse when asked), its partial sums stacked."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "row"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["partial"])], "body",
        [vi("acc", TensorProto.FLOAT, [3]), vi("row", TensorProto.FLOAT, [3])],
        [vi("acc_out", TensorProto.FLOAT, [3]), vi("partial", TensorProto.FLOAT, [3])])
    node = helper.make_node("Scan", ["init", "x"], ["total", "partials"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[reverse],
                            scan_output_axes=[out_axis])
    out_shape = [4, 3] if out_axis == 0 else [3, 4]
    graph = helper.make_graph([node], "scan", [vi("init", TensorProto.FLOAT, [3]),
                                               vi("x", TensorProto.FLOAT, [3, 4])],
                              [vi("total", TensorProto.FLOAT, [3]), vi("partials", TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("reverse, out_axis", [(0, 0), (1, 1)])
def test_scan_unrolls_over_its_static_length(reverse: int, out_axis: int) -> None:
    model = _scan_model(reverse, out_axis)
    feeds = {"init": np.ones(3, np.float32), "x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    got = hetero.compile(model).run(feeds)
    for name, want in zip(("total", "partials"), run_model(model, feeds)):
        np.testing.assert_array_equal(got[name], want)


def _loop_model(cond_from_data: bool = False) -> onnx.ModelProto:
    """Loop M times: s = s * 2 + i, each iteration's s stacked as a scan output."""
    body_nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["s", "two"], ["doubled"]),
                  helper.make_node("Add", ["doubled", "fi"], ["s_out"]),
                  helper.make_node("Identity", ["s_out"], ["each"])]
    if cond_from_data:  # keep going while the state stays below 100: decided by data
        body_nodes += [helper.make_node("ReduceMax", ["s_out"], ["peak"], keepdims=0),
                       helper.make_node("Less", ["peak", "hundred"], ["cond_out"])]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    body = helper.make_graph(
        body_nodes, "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s", TensorProto.FLOAT, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", TensorProto.FLOAT, [2]),
         vi("each", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
         numpy_helper.from_array(np.array(100.0, np.float32), "hundred")])
    node = helper.make_node("Loop", ["M", "cond", "s0"], ["s_final", "all"], body=body)
    graph = helper.make_graph([node], "loop", [vi("s0", TensorProto.FLOAT, [2]), vi("M", TensorProto.INT64, [])],
                              [vi("s_final", TensorProto.FLOAT, [2]), vi("all", TensorProto.FLOAT, ["T", 2])],
                              [numpy_helper.from_array(np.array(True), "cond")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_loop_with_a_trip_count_unrolls_and_specialises_on_it() -> None:
    model = _loop_model()
    exe = hetero.compile(model)
    for trips in (3, 5):
        feeds = {"s0": np.array([1.0, -1.0], np.float32), "M": np.array(trips, np.int64)}
        got = exe.run(feeds)
        for name, want in zip(("s_final", "all"), run_model(model, feeds)):
            np.testing.assert_array_equal(got[name], want)
    assert exe.specialized_on == ("M",)


def test_a_loop_that_stops_on_data_runs_on_the_host() -> None:
    model = _loop_model(cond_from_data=True)
    with pytest.raises(DataDependentError, match="whether its body runs again depends on data"):
        hetero.load_onnx(model, input_values={"M": 5})
    exe = hetero.compile(model)  # specialised on M, each specialisation staged
    for s0, trips in (([1.0, -1.0], 50), ([30.0, 1.0], 50), ([1.0, 2.0], 2)):
        feeds = {"s0": np.array(s0, np.float32), "M": np.array(trips, np.int64)}
        got = exe.run(feeds)
        for name, want in zip(("s_final", "all"), run_model(model, feeds)):
            np.testing.assert_array_equal(got[name], want)


def test_a_loop_too_long_to_unroll_runs_on_the_host() -> None:
    from hetero.core.frontend.onnx.translate_control import MAX_UNROLLED_NODES

    model = _loop_model()
    with pytest.raises(DataDependentError, match=f"more than the {MAX_UNROLLED_NODES} nodes hetero unrolls"):
        hetero.load_onnx(model, input_values={"M": MAX_UNROLLED_NODES})
    feeds = {"s0": np.array([1e-30, -1e-30], np.float32), "M": np.array(MAX_UNROLLED_NODES, np.int64)}
    exe = hetero.compile(model, input_values={"M": MAX_UNROLLED_NODES})
    assert isinstance(exe, StagedExecutable)
    got = exe.run({"s0": feeds["s0"]})
    for name, want in zip(("s_final", "all"), run_model(model, feeds)):
        np.testing.assert_array_equal(got[name], want)


def test_an_if_inside_a_loop_body_inlines_in_every_iteration() -> None:
    # Loop 3 times: s = If(true) then Relu(s) - 1 ... each iteration's If adds its own nodes.
    then = helper.make_graph([helper.make_node("Sub", ["s", "one"], ["t"])], "then", [],
                             [vi("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Add", ["s", "one"], ["e"])], "else", [],
                              [vi("e", TensorProto.FLOAT, [2])])
    body = helper.make_graph(
        [helper.make_node("If", ["yes"], ["s_out"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("s", TensorProto.FLOAT, [2])],
        [vi("cond_out", TensorProto.BOOL, []), vi("s_out", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array(True), "yes"), numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "", "s0"], ["y"], body=body)], "m",
                              [vi("s0", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])],
                              [numpy_helper.from_array(np.array(3, np.int64), "M")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    feeds = {"s0": np.array([5.0, -5.0], np.float32)}
    np.testing.assert_array_equal(hetero.compile(model).run(feeds)["y"], run_model(model, feeds)[0])
