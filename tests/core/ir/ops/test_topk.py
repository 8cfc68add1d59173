"""TopK's reference against onnx's reference implementation and onnxruntime: ties, NaN,
both directions, every axis; and its inference errors."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator
import pytest

from hetero.core.ir import GraphBuilder, get_op
from hetero.errors import ShapeError
from oracle import run_node


def _onnx_reference(x: np.ndarray, k: int, axis: int, largest: int) -> list[np.ndarray]:
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [node], "topk",
        [helper.make_tensor_value_info("x", elem, x.shape),
         helper.make_tensor_value_info("k", onnx.TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("v", elem, None),
         helper.make_tensor_value_info("i", onnx.TensorProto.INT64, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    return ReferenceEvaluator(model).run(None, {"x": x, "k": np.array([k], np.int64)})


def _ours(x: np.ndarray, k: int, axis: int, largest: int) -> list[np.ndarray]:
    attrs = get_op("TopK").normalize_attrs({"k": k, "axis": axis, "largest": largest}, "test")
    attrs["axis"] %= x.ndim
    return get_op("TopK").reference([x], attrs)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
       largest=st.sampled_from([0, 1]), nan=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float16, np.int32, np.int64, np.uint8]),
       seed=st.integers(0, 2**16))
def test_reference_matches_onnx(shape: list[int], data: st.DataObject, largest: int,
                                nan: bool, dtype: type, seed: int) -> None:
    """Rows full of ties (and NaN, for floats): the same values and indices as onnx's."""
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    k = data.draw(st.integers(0, shape[axis]))
    x = rng.integers(0, 4, shape).astype(dtype)
    if nan and x.dtype.kind == "f":
        x[rng.random(shape) < 0.3] = np.nan
    got, want = _ours(x, k, axis, largest), _onnx_reference(x, k, axis, largest)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0].dtype == x.dtype and got[1].dtype == np.int64


def test_reference_matches_onnxruntime_without_nan() -> None:
    """onnxruntime agrees on ties (the lower index first) in both directions."""
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 3, (3, 7)).astype(np.float32)
    for largest in (0, 1):
        want = run_node("TopK", {"x": x, "k": np.array([4], np.int64)}, n_outputs=2,
                        constant_inputs=("k",), axis=1, largest=largest)
        got = _ours(x, 4, 1, largest)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_nan_ranks_above_every_number() -> None:
    x = np.array([1.0, np.nan, np.inf, -np.inf, np.nan], np.float32)
    values, indices = _ours(x, 5, 0, 1)
    assert indices.tolist() == [1, 4, 2, 0, 3]
    values, indices = _ours(x, 5, 0, 0)
    assert indices.tolist() == [3, 0, 2, 1, 4]


@pytest.mark.parametrize("k", [-1, 6])
def test_k_out_of_range_is_a_shape_error(k: int) -> None:
    b = GraphBuilder("topk")
    x = b.input("x", (2, 5), np.float32)
    with pytest.raises(ShapeError, match="k="):
        b.op("TopK", x, k=k)
