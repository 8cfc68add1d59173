"""TopK's lowering (an insertion into a sorted row) against its reference: on the
tensor-IR interpreter, compiled by llvm_cpu on onnx's own node cases (their K made a
constant), and imported from every opset that changed it (1: k an attribute; 10: K an
input; 11: largest)."""

from __future__ import annotations

import warnings

from hypothesis import given, settings, strategies as st
import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

from hetero.core.ir import GraphBuilder, Node
from hetero.core.ir.tir import verify_func
from hetero.core.lower import lower_node
from hetero.onnx_backend import HeteroBackend
from lowercheck import run_lowered
from models import tiny_model
from oracle import run_model


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       largest=st.sampled_from([0, 1]), dtype=st.sampled_from([np.float32, np.int8]),
       seed=st.integers(0, 2**16))
def test_lowered_matches_reference(shape: list[int], data: st.DataObject, largest: int,
                                   dtype: type, seed: int) -> None:
    """Ties, NaN (floats) and every axis: the interpreter gives the reference's outputs."""
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(0, len(shape) - 1))
    k = data.draw(st.integers(1, shape[axis]))  # k = 0: an empty output, which nothing runs
    x = rng.integers(0, 3, shape).astype(dtype)
    if x.dtype.kind == "f":
        x[rng.random(shape) < 0.2] = np.nan
    want, node = _reference_both(x, k, axis, largest)
    got = run_lowered(verify_func(lower_node(node)), node, {"x": x})
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _reference_both(x: np.ndarray, k: int, axis: int, largest: int
                    ) -> tuple[list[np.ndarray], Node]:
    b = GraphBuilder("topk")
    values, indices = b.op("TopK", b.input("x", x.shape, x.dtype), k=k, axis=axis,
                           largest=largest)
    b.output(values, indices)
    node = b.build().nodes[0]
    return node.opdef.reference([x], node.attrs), node


def _node_cases() -> list[object]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # onnx filters by op only while it first gathers its cases: once another test has
        # gathered them all (the whole node suite does), the argument is ignored.
        cases = collect_testcases("TopK")
    return [c for c in cases if [n.op_type for n in c.model.graph.node] == ["TopK"]]


@pytest.mark.parametrize("case", _node_cases(), ids=lambda c: c.name)
def test_onnx_node_cases_with_a_constant_k(case: object) -> None:
    """onnx's cases feed K as a graph input, which hetero refuses; as a constant they pass."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    (inputs, outputs), = case.data_sets[:1]
    k_input = model.graph.input[1]
    model.graph.initializer.append(numpy_helper.from_array(np.asarray(inputs[1]), k_input.name))
    model.graph.input.remove(k_input)
    got = HeteroBackend.prepare(model).run([inputs[0]])
    for g, w in zip(got, outputs):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def _topk_model(opset: int, x: np.ndarray, k: int, **attrs: object) -> onnx.ModelProto:
    inits = []
    if opset < 10:
        node = helper.make_node("TopK", ["x"], ["v", "i"], k=k, **attrs)
    else:
        node = helper.make_node("TopK", ["x", "k"], ["v", "i"], **attrs)
        inits = [numpy_helper.from_array(np.array([k], np.int64), "k")]
    return tiny_model([node], {"x": (onnx.TensorProto.FLOAT, list(x.shape))}, ["v", "i"],
                      inits, opset=opset)


@pytest.mark.parametrize("opset,attrs", [
    (7, {"axis": 0}), (10, {"axis": -1}), (11, {"axis": 1, "largest": 0}),
    (24, {"axis": 0, "largest": 1, "sorted": 1}),
])
def test_every_opset_imports_and_matches_onnxruntime(opset: int, attrs: dict[str, object]) -> None:
    x = np.random.default_rng(opset).integers(-3, 3, (4, 5)).astype(np.float32)
    model = _topk_model(opset, x, 3, **attrs)
    got = HeteroBackend.prepare(model).run([x])
    for g, w in zip(got, run_model(model, {"x": x})):
        np.testing.assert_array_equal(g, w)


def test_k_given_as_a_graph_input_is_specialised_on() -> None:
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="my_topk")
    model = tiny_model([node], {"x": (onnx.TensorProto.FLOAT, [2, 5]),
                                "k": (onnx.TensorProto.INT64, [1])}, ["v", "i"])
    rep = HeteroBackend.prepare(model)
    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32)
    for k in (2, 4):
        values, indices = rep.run([x, np.array([k])])
        np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :k])
        np.testing.assert_array_equal(np.take_along_axis(x, indices, 1), values)
    assert rep.executable.compiled == 2


@pytest.mark.parametrize("largest", [0, 1])
def test_rows_in_the_worst_order_and_full_of_ties_compile_and_match(largest: int) -> None:
    """Every candidate enters and sweeps all k slots (ascending rows for largest), and runs
    of equal values test the tie rule, on llvm_cpu."""
    rows = np.stack([np.arange(40) // 3, np.arange(40)[::-1] // 4, np.full(40, 2)])
    x = rows.astype(np.float32)
    x[1, 7] = np.nan
    model = _topk_model(11, x, 9, axis=1, largest=largest)
    got = HeteroBackend.prepare(model).run([x])
    want, _ = _reference_both(x, 9, 1, largest)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
