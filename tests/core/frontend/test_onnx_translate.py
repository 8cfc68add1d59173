"""Op-by-op translation to canonical ops, each checked against onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

import hetero
from hetero.core.ir.graph import Graph
from hetero.errors import UnsupportedOpError
from models import tiny_model
from oracle import run_model

rng = np.random.default_rng(0)
INT64_MAX = np.iinfo(np.int64).max


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def make(nodes: Sequence[onnx.NodeProto], feeds: Mapping[str, np.ndarray],
         outputs: Sequence[str], consts: Mapping[str, np.ndarray] | None = None,
         opset: int = 18) -> onnx.ModelProto:
    """A model of ``nodes``: ``feeds`` are its inputs, ``consts`` its initializers."""
    inputs = {n: (helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
              for n, a in feeds.items()}
    inits = [numpy_helper.from_array(a, n) for n, a in (consts or {}).items()]
    return tiny_model(list(nodes), inputs, list(outputs), inits, opset=opset)


def compare(nodes: Sequence[onnx.NodeProto], feeds: Mapping[str, np.ndarray],
            outputs: Sequence[str] = ("y",), consts: Mapping[str, np.ndarray] | None = None,
            opset: int = 18) -> Graph:
    """Import the model, run it both ways, assert the outputs agree; return the graph."""
    model = make(nodes, feeds, outputs, consts, opset)
    graph = hetero.load_onnx(model)
    ours = hetero.run_reference(graph, dict(feeds))
    for name, expected in zip(outputs, run_model(model, feeds)):
        assert ours[name].dtype == expected.dtype, name
        assert ours[name].shape == expected.shape, name
        # Single ops on small float32 tensors: the two differ by a few ulps of summation order.
        np.testing.assert_allclose(ours[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
    return graph


def node(op: str, inputs: Sequence[str], outputs: Sequence[str] = ("y",), **attrs: object
         ) -> onnx.NodeProto:
    return helper.make_node(op, list(inputs), list(outputs), name=f"my_{op.lower()}", **attrs)


# -- windows and auto_pad -------------------------------------------------------------------
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"])
@pytest.mark.parametrize("spatial", [(9,), (7, 8), (5, 6, 7)], ids=["1d", "2d", "3d"])
def test_conv_auto_pad(auto_pad: str, spatial: tuple[int, ...]) -> None:
    rank = len(spatial)
    extra = {"pads": [1] * rank + [0] * rank} if auto_pad == "NOTSET" else {}
    # onnxruntime refuses dilations with SAME padding, so only the others dilate.
    dilations = [1] * rank if auto_pad.startswith("SAME") else [1] + [2] * (rank - 1)
    conv = node("Conv", ["x", "w", "b"], auto_pad=auto_pad, group=2, strides=[2] * rank,
                dilations=dilations, **extra)
    graph = compare([conv], {"x": f32(1, 4, *spatial)}, consts={"w": f32(6, 2, *[3] * rank),
                                                                "b": f32(6)})
    attrs = graph.nodes[0].attrs
    assert len(attrs["pads"]) == 2 * rank and attrs["kernel_shape"] == (3,) * rank


@pytest.mark.parametrize("auto_pad, pads", [("SAME_UPPER", (0, 0, 1, 1)),
                                            ("SAME_LOWER", (1, 1, 0, 0)),
                                            ("VALID", (0, 0, 0, 0))])
def test_auto_pad_puts_the_odd_pad_where_onnx_says(auto_pad: str, pads: tuple[int, ...]) -> None:
    # 8 wide, kernel 3, stride 2: SAME keeps 4 outputs, which needs 1 pad in total.
    graph = compare([node("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2],
                          auto_pad=auto_pad)], {"x": f32(1, 2, 8, 8)})
    assert graph.nodes[0].attrs["pads"] == pads


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", {"auto_pad": "SAME_LOWER", "strides": [3, 2]}),
    ("MaxPool", {"pads": [1, 0, 1, 0], "ceil_mode": 1, "strides": [2, 2], "dilations": [2, 1]}),
    ("AveragePool", {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("AveragePool", {"pads": [1, 1, 1, 1], "count_include_pad": 1, "strides": [2, 1]}),
    # The last window would start in the end padding: onnxruntime drops it (onnx's shape
    # inference keeps it before opset 22, so hetero must not trust that inference here).
    ("AveragePool", {"pads": [0, 1, 0, 1], "ceil_mode": 1, "strides": [2, 2]}),
    ("MaxPool", {"pads": [0, 1, 0, 1], "ceil_mode": 1, "strides": [2, 2]}),
])
def test_pools(op: str, attrs: dict[str, object]) -> None:
    compare([node(op, ["x"], kernel_shape=[3, 2], **attrs)], {"x": f32(2, 3, 7, 9)})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(op: str) -> None:
    compare([node(op, ["x"])], {"x": f32(2, 3, 5, 4)})


def test_maxpool_indices_when_used() -> None:
    pool = node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], storage_order=1)
    graph = compare([pool], {"x": f32(1, 2, 5, 4)}, ["y", "idx"])
    assert graph.nodes[0].attrs["storage_order"] == 1


# -- normalisation, dense layers --------------------------------------------------------
def test_batchnorm_with_unused_training_outputs() -> None:
    params = {"s": f32(3), "b": f32(3), "m": f32(3), "v": np.abs(f32(3)) + 0.5}
    feeds = {"x": f32(2, 3, 4, 4)}
    inputs = ["x", "s", "b", "m", "v"]
    compare([node("BatchNormalization", inputs, epsilon=1e-3)], feeds, consts=params, opset=9)
    # onnxruntime crashes on the optional training outputs, so only hetero sees them.
    listed = node("BatchNormalization", inputs, ["y", "mean", "var", "saved_m", "saved_v"])
    graph = hetero.load_onnx(make([listed], feeds, ["y"], params, opset=9))
    assert [n.op for n in graph.nodes] == ["BatchNormalization"]
    used = make([listed], feeds, ["y", "saved_m"], params, opset=9)
    used.graph.output[1].CopyFrom(
        helper.make_tensor_value_info("saved_m", onnx.TensorProto.FLOAT, [3]))
    with pytest.raises(UnsupportedOpError, match="'saved_m'"):
        hetero.load_onnx(used)


@pytest.mark.parametrize("outputs", [("y",), ("y", "mean"), ("y", "mean", "inv_std")])
def test_layernorm_extra_outputs(outputs: tuple[str, ...]) -> None:
    feeds, consts = {"x": f32(2, 3, 8)}, {"s": f32(8), "b": f32(8)}
    ln = node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv_std"], axis=1)
    graph = compare([ln], feeds, outputs, consts=consts, opset=17)
    # The statistics are computed only when something reads them.
    assert len(graph.nodes[0].outputs) == (1 if outputs == ("y",) else 3)


def test_layernorm_statistics_are_float_for_float16() -> None:
    x = f32(2, 3, 8).astype(np.float16)
    ln = node("LayerNormalization", ["x", "s"], ["y", "mean", "inv_std"], axis=-1)
    model = make([ln], {"x": x}, ["y", "mean", "inv_std"], {"s": f32(8).astype(np.float16)},
                 opset=17)
    ours = hetero.run_reference(hetero.load_onnx(model), {"x": x})
    for name, expected in zip(("y", "mean", "inv_std"), run_model(model, {"x": x})):
        assert ours[name].dtype == expected.dtype, name
        np.testing.assert_allclose(ours[name], expected, rtol=2e-3, atol=2e-3, err_msg=name)
    assert ours["mean"].dtype == np.float32


def test_lrn() -> None:
    compare([node("LRN", ["x"], size=3, alpha=1e-3, beta=0.7, bias=2.0)], {"x": f32(1, 6, 3, 3)})


@pytest.mark.parametrize("attrs, with_c", [({}, False), ({"transA": 1, "transB": 1, "alpha": 0.5,
                                                          "beta": 2.0}, True)])
def test_gemm(attrs: dict[str, object], with_c: bool) -> None:
    a, b = (f32(4, 3), f32(5, 4)) if attrs else (f32(3, 4), f32(4, 5))
    inputs = ["a", "b", "c"] if with_c else ["a", "b"]
    compare([node("Gemm", inputs, **attrs)], {"a": a}, consts={"b": b, "c": f32(5)})


def test_matmul_broadcasts_batches() -> None:
    compare([node("MatMul", ["a", "b"])], {"a": f32(2, 1, 3, 4), "b": f32(3, 4, 5)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_softmax_axis(axis: int) -> None:
    compare([node("Softmax", ["x"], axis=axis)], {"x": f32(2, 3, 4)})


# -- quantisation ------------------------------------------------------------------------
def test_quantize_without_zero_point_is_uint8() -> None:
    x = np.linspace(-2, 300, 24, dtype=np.float32).reshape(2, 3, 4)
    graph = compare([node("QuantizeLinear", ["x", "scale"])], {"x": x},
                    consts={"scale": np.array(1.5, np.float32)})
    zero_point = graph.nodes[0].inputs[2]
    assert zero_point.dtype == np.uint8 and zero_point.data.tolist() == 0


def test_per_axis_quantize_and_dequantize() -> None:
    x = f32(2, 3, 4) * 50
    consts = {"scale": np.array([0.5, 1.0, 2.0], np.float32), "zp": np.array([-3, 0, 7], np.int8)}
    compare([node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"], axis=-2)],
            {"x": x}, ["q", "y"], consts)


# -- reductions -----------------------------------------------------------------------------
@pytest.mark.parametrize("op, opset, axes_input", [
    ("ReduceMean", 13, False), ("ReduceMean", 18, True), ("ReduceSum", 13, True),
    ("ReduceMax", 18, True), ("ReduceMin", 17, False),
])
def test_reduce_axes_as_attribute_or_input(op: str, opset: int, axes_input: bool) -> None:
    if axes_input:
        nodes = [node(op, ["x", "axes"], keepdims=0)]
    else:
        nodes = [node(op, ["x"], axes=[-1, 0], keepdims=0)]
    graph = compare(nodes, {"x": f32(2, 3, 4)}, consts={"axes": i64(-1, 0)}, opset=opset)
    assert graph.nodes[0].attrs["axes"] == (0, 2)


def test_reduce_without_axes_reduces_everything() -> None:
    compare([node("ReduceSum", ["x"])], {"x": f32(2, 3, 4)})


def test_reduce_noop_with_empty_axes_is_identity() -> None:
    graph = compare([node("ReduceMean", ["x"], noop_with_empty_axes=1)], {"x": f32(2, 3)})
    assert [n.op for n in graph.nodes] == ["Identity"]


# -- elementwise -------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Sum", "Max", "Min"])
def test_variadic_ops_become_chains(op: str) -> None:
    graph = compare([node(op, ["a", "b", "c"])], {"a": f32(2, 1), "b": f32(1, 3), "c": f32(2, 3)})
    binary = "Add" if op == "Sum" else op
    assert [n.op for n in graph.nodes] == [binary, binary]
    assert graph.nodes[-1].outputs[0].name == "y"


def test_single_input_sum_is_identity() -> None:
    assert [n.op for n in compare([node("Sum", ["a"])], {"a": f32(3)}).nodes] == ["Identity"]


@pytest.mark.parametrize("inputs, consts", [
    (["x", "lo", "hi"], {"lo": np.array(-0.5, np.float32), "hi": np.array(0.5, np.float32)}),
    (["x", "", "hi"], {"hi": np.array(0.25, np.float32)}),
    (["x"], {}),
])
def test_clip_bounds_from_inputs(inputs: list[str], consts: dict[str, np.ndarray]) -> None:
    compare([node("Clip", inputs)], {"x": f32(4, 5)}, consts=consts)


def test_clip_with_a_runtime_bound_reads_it_as_an_operand() -> None:
    model = make([node("Clip", ["x", "lo"])], {"x": f32(3), "lo": f32()}, ["y"])
    graph = hetero.load_onnx(model)
    assert [(n.op, [v.name for v in n.inputs]) for n in graph.nodes] == [("Max", ["x", "lo"])]


def test_integer_clip() -> None:
    x = np.arange(-5, 5, dtype=np.int32)
    compare([node("Clip", ["x", "lo", "hi"])], {"x": x},
            consts={"lo": np.array(-2, np.int32), "hi": np.array(3, np.int32)})


@pytest.mark.parametrize("op, attrs, opset", [
    ("LeakyRelu", {"alpha": 0.2}, 18), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 18),
    ("HardSwish", {}, 18), ("Gelu", {"approximate": "tanh"}, 20), ("Gelu", {}, 20),
    ("Erf", {}, 18), ("Sigmoid", {}, 18), ("Tanh", {}, 18), ("Neg", {}, 18), ("Abs", {}, 18),
    ("Floor", {}, 18), ("Ceil", {}, 18), ("Exp", {}, 18), ("Identity", {}, 18),
])
def test_unary(op: str, attrs: dict[str, object], opset: int) -> None:
    compare([node(op, ["x"], **attrs)], {"x": f32(3, 4)}, opset=opset)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Equal", "Less", "GreaterOrEqual"])
def test_binary(op: str) -> None:
    compare([node(op, ["a", "b"])], {"a": f32(2, 3), "b": f32(3)})


def test_pow_with_an_integer_exponent() -> None:
    compare([node("Pow", ["x", "e"])], {"x": np.abs(f32(4)) + 0.1}, consts={"e": i64(2, 3, 1, 0)})


def test_where_and_logic() -> None:
    compare([node("Greater", ["a", "b"], ["m"]), helper.make_node("Not", ["m"], ["n"]),
             helper.make_node("Where", ["n", "a", "b"], ["y"])], {"a": f32(3, 2), "b": f32(2)})


def test_cast() -> None:
    compare([node("Cast", ["x"], to=onnx.TensorProto.INT32)], {"x": f32(5) * 10})


def test_dropout_is_identity_and_its_mask_all_true() -> None:
    feeds = {"x": f32(2, 3)}
    graph = compare([node("Dropout", ["x"], ["y", "mask"])], feeds)
    assert [n.op for n in graph.nodes] == ["Dropout"]
    graph = compare([node("Dropout", ["x"], ["y", "mask"])], feeds, ["y", "mask"])
    np.testing.assert_array_equal(graph.outputs[1].data, np.ones((2, 3), bool))


def test_dropout_in_training_mode_with_ratio_zero_is_the_identity() -> None:
    compare([node("Dropout", ["x", "r", "train"], ["y", "mask"])], {"x": f32(3)}, ["y", "mask"],
            consts={"r": np.array(0.0, np.float32), "train": np.array(True)})


def test_dropout_in_training_mode_is_refused() -> None:
    model = make([node("Dropout", ["x", "", "train"])], {"x": f32(3)}, ["y"],
                 {"train": np.array(True)})
    with pytest.raises(UnsupportedOpError, match="training_mode"):
        hetero.load_onnx(model)


@pytest.mark.parametrize("attrs", [
    {"value": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))},
    {"value_float": 2.5}, {"value_floats": [1.0, 2.0, 3.0]}, {"value_int": 7},
    {"value_ints": [4, 5, 6]},
])
def test_constant_becomes_a_graph_constant(attrs: dict[str, object]) -> None:
    graph = compare([helper.make_node("Constant", [], ["c"], **attrs),
                     helper.make_node("Identity", ["c"], ["y"])], {})
    assert graph.values["c"].is_constant and [n.op for n in graph.nodes] == ["Identity"]


# -- data movement ----------------------------------------------------------------------
def test_reshape_resolves_zero_and_minus_one() -> None:
    graph = compare([node("Reshape", ["x", "shape"])], {"x": f32(2, 3, 4)},
                    consts={"shape": i64(0, -1, 2)})
    assert graph.nodes[0].attrs["shape"] == (2, 6, 2)


def test_reshape_allowzero_keeps_a_literal_zero() -> None:
    graph = compare([node("Reshape", ["x", "shape"], allowzero=1)], {"x": f32(0, 3)},
                    consts={"shape": i64(3, 0)})
    assert graph.nodes[0].attrs["shape"] == (3, 0)


@pytest.mark.parametrize("axis", [0, 2, -1])
def test_flatten(axis: int) -> None:
    compare([node("Flatten", ["x"], axis=axis)], {"x": f32(2, 3, 4)})


@pytest.mark.parametrize("attrs", [{}, {"perm": [1, 2, 0]}])
def test_transpose(attrs: dict[str, object]) -> None:
    compare([node("Transpose", ["x"], **attrs)], {"x": f32(2, 3, 4)})


def test_concat_negative_axis() -> None:
    compare([node("Concat", ["a", "b"], axis=-2)], {"a": f32(2, 3, 4), "b": f32(2, 1, 4)})


@pytest.mark.parametrize("opset, inputs, attrs, sizes", [
    (13, ["x"], {"axis": 1}, (2, 2, 2)),                  # equal parts, one per output
    (13, ["x", "sizes"], {"axis": -1}, (1, 3)),           # sizes from an input
    (18, ["x"], {"axis": 1, "num_outputs": 2}, (3, 3)),   # opset 18's num_outputs
    (11, ["x"], {"axis": 1, "split": [1, 5]}, (1, 5)),    # the attribute, before opset 13
])
def test_split(opset: int, inputs: list[str], attrs: dict[str, object],
               sizes: tuple[int, ...]) -> None:
    names = [f"o{i}" for i in range(len(sizes))]
    graph = compare([node("Split", inputs, names, **attrs)], {"x": f32(2, 6, 4)}, names,
                    {"sizes": i64(1, 3)}, opset=opset)
    assert graph.nodes[0].attrs["split"] == sizes


def test_split_num_outputs_uneven() -> None:
    graph = compare([node("Split", ["x"], ["a", "b", "c"], axis=0, num_outputs=3)],
                    {"x": f32(7, 2)}, ["a", "b", "c"])
    assert graph.nodes[0].attrs["split"] == (3, 3, 1)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ((1, -3), (INT64_MAX, -1), (0, -1), None),
    ((-1,), (-INT64_MAX,), (1,), (-1,)),
    ((10, 0), (-10, 100), (-1, 0), (-2, 3)),
    ((0,), (2,), None, None),
])
def test_slice_raw_onnx_bounds(starts: tuple[int, ...], ends: tuple[int, ...],
                               axes: tuple[int, ...] | None, steps: tuple[int, ...] | None) -> None:
    consts = {"starts": i64(*starts), "ends": i64(*ends)}
    inputs = ["x", "starts", "ends"]
    if axes is not None:
        consts["axes"] = i64(*axes)
        inputs.append("axes")
    if steps is not None:
        consts["steps"] = i64(*steps)
        inputs += [""] * (axes is None) + ["steps"]
    compare([node("Slice", inputs)], {"x": f32(5, 6, 7)}, consts=consts)


def test_gather_negative_indices() -> None:
    compare([node("Gather", ["x", "idx"], axis=1)], {"x": f32(3, 4)}, consts={"idx": i64(-1, 0, 2)})


@pytest.mark.parametrize("op, axes, shape", [("Unsqueeze", (-1, 0), (3, 4)),
                                             ("Squeeze", (-1,), (3, 1, 4, 1)),
                                             ("Squeeze", None, (1, 3, 1))])
def test_unsqueeze_squeeze(op: str, axes: tuple[int, ...] | None, shape: tuple[int, ...]) -> None:
    inputs = ["x"] if axes is None else ["x", "axes"]
    compare([node(op, inputs)], {"x": f32(*shape)}, consts={"axes": i64(*(axes or ()))})


def test_expand() -> None:
    compare([node("Expand", ["x", "shape"])], {"x": f32(3, 1)}, consts={"shape": i64(2, 1, 4)})


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"start": -3, "end": -1}, {"end": 10}])
def test_shape_start_end(attrs: dict[str, int]) -> None:
    compare([node("Shape", ["x"], **attrs)], {"x": f32(2, 3, 4, 5)})


def test_constant_of_shape_keeps_its_value_dtype() -> None:
    value = numpy_helper.from_array(np.array([7], np.int32))
    graph = compare([node("ConstantOfShape", ["shape"], value=value)], {},
                    consts={"shape": i64(2, 3)})
    assert graph.outputs[0].dtype == np.int32


def test_names_are_kept_and_made_unique() -> None:
    # Two nodes share a name, and a node is named like a value (as Caffe2 exports do).
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Relu", ["a"], ["b"], name="relu"),
             helper.make_node("Sum", ["a", "b", "x"], ["y"], name="b"),
             helper.make_node("Neg", ["y"], ["z"])]
    graph = hetero.load_onnx(make(nodes, {"x": f32(3)}, ["z"]))
    names = [n.name for n in graph.nodes]
    assert len(set(names)) == len(names) == 5
    assert names[0] == "relu" and not set(names) & set(graph.values)
    assert {"x", "a", "b", "y", "z"} <= set(graph.values)
    assert all(n for n in names)


def test_batchnorm_in_training_mode_matches_onnx_reference() -> None:
    from onnx.reference import ReferenceEvaluator

    feeds = {"x": f32(3, 4, 5, 2)}
    consts = {"s": f32(4), "b": f32(4), "m": f32(4), "v": np.abs(f32(4)) + 0.5}
    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                          training_mode=1, momentum=0.8, epsilon=1e-3)
    model = make([bn], feeds, ["y", "rm", "rv"], consts, opset=15)
    graph = hetero.load_onnx(model)
    ours = hetero.run_reference(graph, feeds)
    for name, expected in zip(("y", "rm", "rv"), ReferenceEvaluator(model).run(None, feeds)):
        # Means and variances of 30 terms in float32: a few ulps of summation order.
        np.testing.assert_allclose(ours[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
