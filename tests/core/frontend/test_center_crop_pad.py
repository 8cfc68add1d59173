"""CenterCropPad (opset 18) has no kernel of its own: onnx's function body (Shape, Slice,
Pad) is expanded at import. With its ``shape`` operand constant it runs on llvm_cpu and
matches onnx's reference for cropping, padding and both at once, on chosen or negative
axes, in several dtypes."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero

RNG = np.random.default_rng(5)


@pytest.mark.parametrize(("x_shape", "shape", "axes"), [
    ((20, 10, 3), (10, 7, 3), None),        # crop
    ((10, 7, 3), (20, 10, 3), None),        # pad
    ((20, 8, 3), (10, 10, 3), None),        # crop one axis, pad another
    ((3, 20, 8), (10, 9), (1, 2)),
    ((20, 8, 3), (10, 9), (-3, -2)),
    ((5, 4), (2, 7), (0, 1)),               # odd differences: the extra element at the end
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8])
def test_center_crop_pad_with_a_constant_shape(x_shape: tuple[int, ...], shape: tuple[int, ...],
                                               axes: tuple[int, ...] | None, dtype: type) -> None:
    x = (RNG.standard_normal(x_shape) * 50).astype(dtype)
    attrs = {} if axes is None else {"axes": list(axes)}
    node = helper.make_node("CenterCropPad", ["x", "shape"], ["y"], **attrs)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [node], "ccp", [helper.make_tensor_value_info("x", elem, list(x_shape))],
        [helper.make_tensor_value_info("y", elem, None)],
        initializer=[numpy_helper.from_array(np.array(shape, np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    model = onnx.shape_inference.infer_shapes(model)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    compiled = hetero.compile(hetero.load_onnx(model), targets=["llvm_cpu"], strict=True)
    got = compiled.run({"x": x})["y"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
