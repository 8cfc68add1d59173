"""Pad: every opset's spelling imports, and the reference and llvm_cpu match onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

import hetero
from hetero.core.ir import GraphBuilder
from hetero.errors import DynamicShapeError, ShapeError
from oracle import node_model, run_model

X = (np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 7.5) / 4


def _check(model: onnx.ModelProto, x: np.ndarray, want: np.ndarray | None = None) -> None:
    graph = hetero.load_onnx(model)
    assert [n.op for n in graph.nodes] == ["Pad"]
    if want is None:
        want = run_model(model, {"x": x})[0]
    ours = hetero.run_reference(graph, {"x": x})["out0"]
    np.testing.assert_array_equal(ours, want)
    compiled = hetero.compile(graph, targets=["llvm_cpu"]).run({"x": x})["out0"]
    np.testing.assert_array_equal(compiled, want)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 1, 0, 3], [1, -1, 0, 0, 1, -2], [0, 0, 0, 0, 0, 0]])
def test_opset_19_matches_onnxruntime(mode: str, pads: list[int]) -> None:
    model = node_model("Pad", {"x": X, "pads": np.array(pads, np.int64),
                               "value": np.array(1.5, np.float32)},
                       opset=19, constant_inputs=("pads", "value"), mode=mode)
    _check(model, X)


def test_opset_18_axes_pad_only_the_named_axes() -> None:
    model = node_model("Pad", {"x": X, "pads": np.array([1, 0, 2, -1], np.int64), "value": None,
                               "axes": np.array([-1, 0], np.int64)},
                       opset=18, constant_inputs=("pads", "axes"), mode="edge")
    _check(model, X)


def test_opset_11_pads_and_value_inputs() -> None:
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    model = node_model("Pad", {"x": x, "pads": np.array([1, 2, 0, 1], np.int64),
                               "value": np.array(-7, np.int32)},
                       opset=11, constant_inputs=("pads", "value"))
    _check(model, x)


@pytest.mark.parametrize("opset", [7, 10])
def test_attribute_spelling_before_opset_11(opset: int) -> None:
    model = node_model("Pad", {"x": X}, opset=opset, pads=[0, 1, 1, 0, 2, 0], mode="reflect")
    x = X
    want = np.pad(X, [(0, 0), (1, 2), (1, 0)], mode="reflect")
    _check(model, x, want)
    model = node_model("Pad", {"x": X}, opset=opset, pads=[1, 0, 0, 0, 0, 1], value=2.5)
    _check(model, X, np.pad(X, [(1, 0), (0, 0), (0, 1)], constant_values=2.5))


def test_pads_from_a_graph_input_need_a_constant() -> None:
    model = node_model("Pad", {"x": X, "pads": np.zeros(6, np.int64)}, opset=19)
    with pytest.raises(DynamicShapeError, match="pads"):
        hetero.load_onnx(model)


def test_reflect_past_the_axis_repeats_periodically() -> None:
    b = GraphBuilder("pad")
    x = b.input("x", (3,), "float32")
    b.output(b.Pad(x, pads=(7, 5), mode="reflect"))
    data = np.array([1.0, 2.0, 3.0], np.float32)
    got = hetero.run_reference(b.build(), {"x": data})
    np.testing.assert_array_equal(next(iter(got.values())), np.pad(data, (7, 5), mode="reflect"))


def test_crop_past_the_axis_is_refused() -> None:
    b = GraphBuilder("pad")
    x = b.input("x", (3,), "float32")
    with pytest.raises(ShapeError, match="crop"):
        b.Pad(x, pads=(-2, -2))
    with pytest.raises(ShapeError, match="edge mode cannot pad"):
        b.Pad(x, pads=(-3, 1), mode="edge")


def test_constant_pad_of_a_cropped_away_axis_is_all_fill() -> None:
    b = GraphBuilder("pad")
    x = b.input("x", (2, 3), "float32")
    b.output(b.Pad(x, pads=(0, -3, 1, 2), value=np.array(4.0, np.float32)))
    graph = b.build()
    data = np.ones((2, 3), np.float32)
    want = np.full((3, 2), 4.0, np.float32)
    np.testing.assert_array_equal(next(iter(hetero.run_reference(graph, {"x": data}).values())), want)
    compiled = hetero.compile(graph, targets=["llvm_cpu"]).run({"x": data})
    np.testing.assert_array_equal(next(iter(compiled.values())), want)
