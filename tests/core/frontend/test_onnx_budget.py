"""The element budget: oversized tensors are refused from their shapes, before allocation."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.errors import TensorTooLargeError
from models import tiny_model

HUGE = [1_000_000, 1_000_000]


def _shape(name: str, dims: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(dims, np.int64), name)


def _dims_only(name: str, dims: list[int]) -> onnx.TensorProto:
    """A float tensor that declares ``dims`` but holds no data."""
    tensor = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT)
    tensor.dims.extend(dims)
    return tensor


def _fails_fast_and_lean(model: onnx.ModelProto, match: str) -> None:
    """load_onnx raises TensorTooLargeError in well under a second and a few MB."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(TensorTooLargeError, match=match) as info:
            hetero.load_onnx(model)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - start < 1.0
    assert peak < 32 * 2**20  # a [1e6, 1e6] float32 tensor would be 4 TB
    assert "max_elements=" in str(info.value)


def test_constant_of_shape_huge_fails_instantly() -> None:
    model = tiny_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
                       {}, ["y"], [_shape("s", HUGE)])
    _fails_fast_and_lean(model, r"'fill' \(ConstantOfShape\).*\[1000000, 1000000\].*1,073,741,824")


def test_expand_huge_fails_instantly() -> None:
    model = tiny_model([helper.make_node("Expand", ["x", "s"], ["y"], name="grow")],
                       {"x": (TensorProto.FLOAT, [1, 1])}, ["y"], [_shape("s", HUGE)])
    _fails_fast_and_lean(model, r"'grow' \(Expand\).*\[1000000, 1000000\]")


def test_initializer_is_judged_by_its_dims_before_its_data() -> None:
    # No data at all: reading it would fail, so refusing it proves the dims were checked first.
    weight = _dims_only("big_w", [100_000, 100_000])
    model = tiny_model([helper.make_node("Add", ["x", "big_w"], ["y"])],
                       {"x": (TensorProto.FLOAT, [1])}, ["y"])
    model.graph.initializer.append(weight)
    _fails_fast_and_lean(model, r"initializer 'big_w'.*\[100000, 100000\]")


def test_constant_node_value_over_budget() -> None:
    value = _dims_only("v", [100_000, 100_000])
    model = tiny_model([helper.make_node("Constant", [], ["c"], name="const", value=value)],
                       {}, ["c"])
    _fails_fast_and_lean(model, r"attribute 'value' of node 'const' \(Constant\)")


def test_inferred_tensor_over_budget() -> None:
    model = tiny_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="outer")],
                       {"a": (TensorProto.FLOAT, [300, 1]), "b": (TensorProto.FLOAT, [1, 300])},
                       ["y"])
    with pytest.raises(TensorTooLargeError, match=r"'outer' \(MatMul\): output 'y'.*90,000"):
        hetero.load_onnx(model, max_elements=50_000)
    assert hetero.load_onnx(model, max_elements=90_000).outputs[0].shape == (300, 300)


def test_raising_the_budget_lets_the_model_load() -> None:
    model = tiny_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
                       {}, ["y"], [_shape("s", [10, 10])])
    with pytest.raises(TensorTooLargeError, match="max_elements=100"):
        hetero.load_onnx(model, max_elements=99)
    graph = hetero.load_onnx(model, max_elements=100)
    np.testing.assert_array_equal(hetero.run_reference(graph, {})["y"], np.zeros((10, 10)))
