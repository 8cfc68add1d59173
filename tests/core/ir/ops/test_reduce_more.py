"""ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp, ArgMax and
ArgMin: their references against onnxruntime and onnx's reference evaluator, and their
edge values (empty sets, infinities, NaN, ties)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.errors import ShapeError
from oracle import node_model, run_node

RNG = np.random.default_rng(11)
X = RNG.uniform(0.25, 2.0, (3, 4, 5)).astype(np.float32) * RNG.choice((-1, 1), (3, 4, 5))
REDUCTIONS = ("ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
              "ReduceLogSumExp")


def run_hetero(op: str, x: np.ndarray, **attrs: Any) -> np.ndarray:
    b = GraphBuilder(op.lower())
    b.output(b.op(op, b.input("x", x.shape, x.dtype), **attrs))
    graph = b.build()
    return run_reference(graph, {"x": x})[graph.outputs[0].name]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize(("axes", "keepdims"), [((1,), 1), ((0, 2), 0), (None, 1), ((-1,), 0)])
def test_reductions_match_onnxruntime(op: str, axes: tuple[int, ...] | None, keepdims: int) -> None:
    x = np.abs(X) if op == "ReduceLogSum" else X
    attrs: dict[str, Any] = {"keepdims": keepdims}
    inputs: dict[str, np.ndarray] = {"x": x}
    if axes is not None:
        attrs["axes"] = axes
        inputs["axes"] = np.array(axes, np.int64)
    want = run_node(op, inputs, constant_inputs=["axes"], keepdims=keepdims)[0]
    got = run_hetero(op, x, **attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceSumSquare", "ReduceL1"])
def test_integer_reductions_match_onnxruntime(op: str) -> None:
    x = RNG.integers(-3, 4, (3, 4)).astype(np.int64)
    want = run_node(op, {"x": x, "axes": np.array([1])}, constant_inputs=["axes"], keepdims=0)[0]
    np.testing.assert_array_equal(run_hetero(op, x, axes=(1,), keepdims=0), want)


def test_log_sum_exp_is_stable_and_keeps_infinities() -> None:
    x = np.array([[1000.0, 1000.0], [1.0, np.inf], [-np.inf, -np.inf], [np.nan, 1.0]], np.float32)
    got = run_hetero("ReduceLogSumExp", x, axes=(1,), keepdims=0)
    np.testing.assert_allclose(got[0], 1000.0 + np.log(2.0), rtol=1e-6)
    assert got[1] == np.inf and got[2] == -np.inf and np.isnan(got[3])


@pytest.mark.parametrize(("op", "empty"), [("ReduceProd", 1.0), ("ReduceL1", 0.0), ("ReduceL2", 0.0),
                                           ("ReduceSumSquare", 0.0), ("ReduceLogSum", -np.inf),
                                           ("ReduceLogSumExp", -np.inf)])
def test_empty_reductions_give_the_identity(op: str, empty: float) -> None:
    got = run_hetero(op, np.zeros((2, 0, 3), np.float32), axes=(1,), keepdims=1)
    assert got.shape == (2, 1, 3) and np.all(got == empty)


TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0], [0.5, 0.0, 0.5, 0.0]], np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize(("axis", "keepdims"), [(0, 1), (1, 0), (-1, 1)])
def test_arg_extremes_match_onnxruntime(op: str, select_last_index: int, axis: int,
                                        keepdims: int) -> None:
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index}
    want = run_node(op, {"x": TIES}, **attrs)[0]
    got = run_hetero(op, TIES, **attrs)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("select_last_index", [0, 1])
def test_a_nan_is_the_extreme_as_in_onnx_reference(op: str, select_last_index: int) -> None:
    # onnxruntime skips NaN here; hetero follows onnx's reference (numpy), whose
    # choice agrees with the NaN-propagating ReduceMax and ReduceMin.
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 2.0, 1.0, 1.0]], np.float32)
    model = node_model(op, {"x": x}, axis=1, select_last_index=select_last_index)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = run_hetero(op, x, axis=1, select_last_index=select_last_index)
    np.testing.assert_array_equal(got, want)
    assert got[0, 0] == (3 if select_last_index else 1)


def test_arg_extreme_of_an_empty_axis_is_refused() -> None:
    with pytest.raises(ShapeError, match="non-empty axis"):
        run_hetero("ArgMax", np.zeros((2, 0), np.float32), axis=1)


def test_reduce_prod_opset_13_axes_attribute_imports() -> None:
    model = node_model("ReduceProd", {"x": X}, opset=13, axes=[1], keepdims=0)
    graph = hetero.load_onnx(model)
    got = run_reference(graph, {graph.inputs[0].name: X})[graph.outputs[0].name]
    np.testing.assert_allclose(got, np.prod(X.astype(np.float64), axis=1), rtol=1e-6)


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("noop", [0, 1])
def test_empty_axes_reduce_everything_or_each_element_alone_at_opset_18(op: str, noop: int) -> None:
    # With noop_with_empty_axes each element is reduced alone: |x| for ReduceL1 and
    # ReduceL2, x * x for ReduceSumSquare, log(x) for ReduceLogSum, x for the others.
    x = np.abs(X) if op == "ReduceLogSum" else X
    model = node_model(op, {"x": x}, opset=18, noop_with_empty_axes=noop, keepdims=0)
    want = run_node(op, {"x": x}, opset=18, noop_with_empty_axes=noop, keepdims=0)[0]
    graph = hetero.load_onnx(model)
    got = run_reference(graph, {graph.inputs[0].name: x})[graph.outputs[0].name]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)
