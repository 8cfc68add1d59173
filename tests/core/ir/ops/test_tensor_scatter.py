"""TensorScatter's reference against onnx's, and its refusal of a linear write past the end."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.errors import InputError


def _model(mode: str, axis: int, cache: tuple[int, ...], update: tuple[int, ...]):
    vi = helper.make_tensor_value_info
    node = helper.make_node("TensorScatter", ["c", "u", "w"], ["y"], mode=mode, axis=axis)
    graph = helper.make_graph([node], "ts", [vi("c", TensorProto.FLOAT, cache),
                                             vi("u", TensorProto.FLOAT, update),
                                             vi("w", TensorProto.INT64, [cache[0]])],
                              [vi("y", TensorProto.FLOAT, cache)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


@pytest.mark.parametrize("mode, axis, starts", [
    ("linear", -2, [0, 3]), ("linear", 1, [2, 0]), ("circular", -2, [4, -3]), ("circular", 2, [9, 1]),
])
def test_tensor_scatter_matches_onnx_reference(mode: str, axis: int, starts: list[int]) -> None:
    rng = np.random.default_rng(0)
    cache_shape = (2, 5, 6, 3) if axis in (-2, 2) else (2, 6, 3)
    update_shape = list(cache_shape)
    update_shape[axis] = 3
    model = _model(mode, axis, cache_shape, tuple(update_shape))
    feeds = {"c": rng.standard_normal(cache_shape).astype(np.float32),
             "u": rng.standard_normal(update_shape).astype(np.float32), "w": np.array(starts)}
    expected = ReferenceEvaluator(model).run(None, feeds)[0]
    exe = hetero.compile(model, targets=["llvm_cpu"])
    np.testing.assert_array_equal(exe.run(feeds)["y"], expected)
    np.testing.assert_array_equal(hetero.run_reference(hetero.load_onnx(model), feeds)["y"], expected)


def test_a_linear_write_past_the_cache_end_is_an_input_error() -> None:
    model = _model("linear", -2, (1, 2, 6, 3), (1, 2, 3, 3))
    feeds = {"c": np.zeros((1, 2, 6, 3), np.float32), "u": np.ones((1, 2, 3, 3), np.float32),
             "w": np.array([4])}
    with pytest.raises(InputError, match="out of range"):
        hetero.compile(model, targets=["llvm_cpu"]).run(feeds)
