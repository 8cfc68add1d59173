"""The indexing ops' references and translations against onnxruntime and onnx's reference
evaluator: scatters with repeated indices under each reduction, negative indices, OneHot's
out-of-range rows, the opset forms (Scatter of opset 9, SpaceToDepth's CRD of opset 28,
Range folded at import), and indices out of range refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.errors import DynamicShapeError, InputError, ShapeError
from oracle import node_model, run_node

RNG = np.random.default_rng(7)
DATA = RNG.uniform(-2, 2, (4, 5)).astype(np.float32)


def reference(op: str, inputs: dict[str, np.ndarray], constants: tuple[str, ...] = (),
              **attrs: Any) -> np.ndarray:
    b = GraphBuilder(op.lower())
    operands = [b.constant(a, n) if n in constants else b.input(n, a.shape, a.dtype)
                for n, a in inputs.items()]
    b.output(b.op(op, *operands, **attrs))
    graph = b.build()
    feeds = {n: a for n, a in inputs.items() if n not in constants}
    return run_reference(graph, feeds)[graph.outputs[0].name]


def onnx_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ReferenceEvaluator(model).run(None, feeds)[0]


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_matches_onnxruntime(reduction: str) -> None:
    # Repeats along axis 1 only where a reduction defines what they give.
    if reduction == "none":
        indices = np.array([[4, -5, 2], [-1, 0, 3], [1, 2, 0], [3, -2, -5]], np.int64)
    else:
        indices = np.array([[1, 1, -4], [0, 0, 0], [4, -1, 2], [2, 2, 2]], np.int64)
    updates = RNG.uniform(-2, 2, indices.shape).astype(np.float32)
    inputs = {"data": DATA, "indices": indices, "updates": updates}
    want = run_node("ScatterElements", inputs, axis=1, reduction=reduction)[0]
    got = reference("ScatterElements", inputs, axis=-1, reduction=reduction)
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_matches_onnxruntime(reduction: str) -> None:
    data = RNG.integers(-5, 6, (3, 4, 2)).astype(np.int32)
    rows = [[0, 1], [2, -1], [1, 1]] if reduction == "none" else [[0, 1], [-3, 1], [2, 3], [0, -3]]
    indices = np.array(rows, np.int64)
    updates = RNG.integers(-3, 4, (len(rows), 2)).astype(np.int32)
    inputs = {"data": data, "indices": indices, "updates": updates}
    want = run_node("ScatterND", inputs, reduction=reduction)[0]
    np.testing.assert_array_equal(reference("ScatterND", inputs, reduction=reduction), want)


def test_scatter_none_with_repeats_keeps_the_last_update_as_onnx_reference_does() -> None:
    inputs = {"data": np.zeros(4, np.float32), "indices": np.array([[1], [1], [-3]], np.int64),
              "updates": np.array([1.0, 2.0, 3.0], np.float32)}
    want = onnx_reference(node_model("ScatterND", inputs), inputs)
    got = reference("ScatterND", inputs)
    np.testing.assert_array_equal(got, want)
    assert got[1] == 3.0


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_gather_nd_matches_onnxruntime(batch_dims: int) -> None:
    data = RNG.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    indices = (np.array([[[1, -1], [0, 3]], [[2, 0], [-3, -4]]], np.int64) if batch_dims
               else np.array([[1, -1], [0, 2]], np.int64))
    inputs = {"data": data, "indices": indices}
    want = run_node("GatherND", inputs, batch_dims=batch_dims)[0]
    np.testing.assert_array_equal(reference("GatherND", inputs, batch_dims=batch_dims), want)


def test_gather_elements_matches_onnxruntime_with_a_smaller_index_tensor() -> None:
    indices = np.array([[0, -1], [3, 1], [-4, 2]], np.int64)
    inputs = {"data": DATA, "indices": indices}
    want = run_node("GatherElements", inputs, axis=0)[0]
    np.testing.assert_array_equal(reference("GatherElements", inputs, axis=0), want)


def test_an_index_out_of_range_for_its_own_column_is_refused() -> None:
    data = np.zeros((5, 2), np.float32)
    # 3 is a valid index into axis 0 (size 5) but not into axis 1 (size 2).
    indices = np.array([[3, 1], [0, 3]], np.int64)
    with pytest.raises(InputError, match="index 3 is out of range for axis 1 of size 2"):
        reference("GatherND", {"data": data, "indices": indices})
    with pytest.raises(ShapeError, match="axis 1 of size 2"):
        reference("GatherND", {"data": data, "indices": indices}, constants=("indices",))
    updates = np.zeros(2, np.float32)
    with pytest.raises(InputError, match="axis 1 of size 2"):
        reference("ScatterND", {"data": data, "indices": indices, "updates": updates})
    with pytest.raises(InputError, match="axis 0 of size 4"):
        reference("GatherElements", {"data": DATA, "indices": np.array([[4]], np.int64)})


def test_one_hot_rows_outside_the_depth_are_off_as_in_onnxruntime() -> None:
    indices = np.array([[0, -1, 3], [5, -4, 2]], np.int64)
    values = np.array([-1.0, 7.0], np.float32)
    inputs = {"indices": indices, "depth": np.array(4, np.int64), "values": values}
    for axis in (-1, 0, 1):
        want = run_node("OneHot", inputs, constant_inputs=["depth"], axis=axis)[0]
        got = reference("OneHot", {"indices": indices, "values": values}, depth=4, axis=axis)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_matches_onnxruntime(exclusive: int, reverse: int) -> None:
    inputs = {"x": DATA, "axis": np.array(-1, np.int32)}
    want = run_node("CumSum", inputs, constant_inputs=["axis"], exclusive=exclusive, reverse=reverse)[0]
    got = reference("CumSum", {"x": DATA}, axis=-1, exclusive=exclusive, reverse=reverse)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cumprod_matches_onnx_reference(exclusive: int, reverse: int, dtype: type) -> None:
    """CumProd (opset 26) against onnx's reference; int32 products of 30 values near 100
    wrap around, as onnx's numpy products do."""
    x = (RNG.integers(90, 110, (3, 30)) if dtype == np.int32 else RNG.uniform(0.5, 1.5, (3, 30)))
    x = x.astype(dtype)
    axis = onnx.numpy_helper.from_array(np.array(1, np.int64), "axis")
    value = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), [3, 30])
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = _model([node], [value], ["y"], 26, [axis])
    want = onnx_reference(model, {"x": x})
    np.testing.assert_allclose(_run_imported(model, {"x": x}), want, rtol=1e-6)
    compiled = hetero.compile(hetero.load_onnx(model), targets=["llvm_cpu"])
    np.testing.assert_allclose(compiled.run({"x": x})["y"], want, rtol=1e-5)


def test_reverse_sequence_and_eye_like_match_onnxruntime() -> None:
    x = np.arange(12, dtype=np.int64).reshape(4, 3)
    lens = np.array([3, 0, 1, 2], np.int64)
    inputs = {"input": x, "sequence_lens": lens}
    want = run_node("ReverseSequence", inputs, batch_axis=0, time_axis=1)[0]
    np.testing.assert_array_equal(reference("ReverseSequence", inputs, batch_axis=0, time_axis=1), want)
    with pytest.raises(InputError, match="sequence length 4"):
        reference("ReverseSequence", {"input": x, "sequence_lens": np.array([4, 0, 0, 0], np.int64)},
                  batch_axis=0, time_axis=1)
    want = run_node("EyeLike", {"input": DATA}, k=-2, dtype=onnx.TensorProto.INT32)[0]
    np.testing.assert_array_equal(reference("EyeLike", {"input": DATA}, k=-2, dtype=np.int32), want)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[str],
           opset: int, initializers: list[onnx.TensorProto] = ()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, [], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    types = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    model.graph.output.extend(types[o] for o in outputs)
    return model


def _run_imported(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    graph = hetero.load_onnx(model)
    return run_reference(graph, feeds)[graph.outputs[0].name]


@pytest.mark.parametrize(("start", "limit", "delta"), [
    (np.int64(3), np.int64(10), np.int64(3)), (np.int32(10), np.int32(4), np.int32(-2)),
    (np.float32(0.5), np.float32(2.2), np.float32(0.25)), (np.int64(5), np.int64(1), np.int64(1)),
])
def test_range_with_constant_operands_is_folded_at_import(start: Any, limit: Any, delta: Any) -> None:
    consts = [onnx.numpy_helper.from_array(np.array(v), n)
              for n, v in (("s", start), ("l", limit), ("d", delta))]
    model = _model([helper.make_node("Range", ["s", "l", "d"], ["y"])], [], ["y"], 13, consts)
    graph = hetero.load_onnx(model)
    assert not graph.nodes
    got = graph.outputs[0].data
    want = onnx_reference(model, {})
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_range_of_graph_inputs_says_it_needs_constants() -> None:
    scalars = [helper.make_tensor_value_info(n, onnx.TensorProto.INT64, []) for n in "sld"]
    model = _model([helper.make_node("Range", ["s", "l", "d"], ["y"])], scalars, ["y"], 13)
    with pytest.raises(DynamicShapeError, match="start input"):
        hetero.load_onnx(model)


def test_scatter_of_opset_9_is_scatter_elements() -> None:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 5])
    indices = onnx.numpy_helper.from_array(np.array([[1, 0, 3]], np.int64), "i")
    updates = onnx.numpy_helper.from_array(np.array([[9.0, 8.0, 7.0]], np.float32), "u")
    model = _model([helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=1)], [x], ["y"], 9,
                   [indices, updates])
    want = DATA.copy()
    want[0, [1, 0, 3]] = [9.0, 8.0, 7.0]
    np.testing.assert_array_equal(_run_imported(model, {"x": DATA}), want)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_space_to_depth_modes_of_opset_28_match_onnx_reference(mode: str) -> None:
    x = np.arange(2 * 2 * 4 * 6, dtype=np.float32).reshape(2, 2, 4, 6)
    value = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))
    node = helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode=mode)
    model = _model([node], [value], ["y"], 28)
    np.testing.assert_array_equal(_run_imported(model, {"x": x}), onnx_reference(model, {"x": x}))


@pytest.mark.parametrize(("op", "extra", "attrs"), [
    ("Tile", {"repeats": np.array([2, 1], np.int64)}, {}),
    ("Trilu", {"k": np.array(-1, np.int64)}, {"upper": 0}),
    ("Trilu", {}, {}),
    ("CumSum", {"axis": np.array(0, np.int64)}, {"reverse": 1}),
])
def test_constant_operands_become_attributes(op: str, extra: dict[str, np.ndarray],
                                             attrs: dict[str, Any]) -> None:
    inputs = {"x": DATA, **extra}
    model = node_model(op, inputs, opset=18, constant_inputs=list(extra), **attrs)
    want = run_node(op, inputs, opset=18, constant_inputs=list(extra), **attrs)[0]
    np.testing.assert_allclose(_run_imported(model, {"x": DATA}), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("opset", "dtype"), [(9, np.int64), (10, np.int32), (9, np.float32), (11, np.int64)])
def test_negative_onehot_indices_keep_their_opsets_meaning(opset: int, dtype: type) -> None:
    """Below opset 11 a negative index gives an all-off row; from 11 it counts from the end.
    The upgrade to 13 must not turn the old meaning into the new one."""
    indices = np.array([[1, -1], [-3, 0]], dtype)
    value = helper.make_tensor_value_info("i", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [2, 2])
    depth = onnx.numpy_helper.from_array(np.array(3, np.int64), "depth")
    values = onnx.numpy_helper.from_array(np.array([0.0, 1.0], np.float32), "values")
    model = _model([helper.make_node("OneHot", ["i", "depth", "values"], ["y"], axis=-1)], [value], ["y"],
                   opset, [depth, values])
    got = _run_imported(model, {"i": indices})
    rows = indices.astype(np.int64)
    want = np.zeros((2, 2, 3), np.float32)
    for index in np.ndindex(rows.shape):
        k = rows[index]
        if 0 <= k < 3 or (opset >= 11 and k >= -3):
            want[(*index, k % 3)] = 1.0
    np.testing.assert_array_equal(got, want)
    if opset >= 11:
        np.testing.assert_array_equal(got, onnx_reference(model, {"i": indices}))
    exe = hetero.compile(model, targets=["llvm_cpu"], strict=True)
    np.testing.assert_array_equal(exe.run({"i": indices})["y"], want)
