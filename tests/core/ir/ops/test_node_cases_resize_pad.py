"""onnx's own node cases of Resize, Upsample and Pad, with their operands made constant.

The suite feeds roi, scales, sizes and pads as graph inputs, which hetero does not
take yet (they must be constant); here each such input becomes an initializer holding
the case's value, so every case still checks hetero's numbers (reference and llvm_cpu)
against onnx's expected outputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
from onnx import numpy_helper
import pytest

import hetero
from hetero.errors import UnsupportedOpError

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases

    CASES = {c.name: c for c in collect_testcases(None)
             if len(c.model.graph.node) == 1
             and c.model.graph.node[0].op_type in ("Resize", "Upsample", "Pad")}

#: Cases hetero refuses on purpose, and why.
REFUSED: dict[str, str] = {}


def _constant_operands(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> onnx.ModelProto:
    """``model`` with every graph input but the first turned into an initializer."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    keep = model.graph.input[0].name
    moved = [v for v in model.graph.input if v.name != keep]
    for v in moved:
        model.graph.input.remove(v)
        model.graph.initializer.append(numpy_helper.from_array(feeds[v.name], v.name))
    return model


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name: str) -> None:
    case = CASES[name]
    names = [v.name for v in case.model.graph.input]
    inputs, outputs = case.data_sets[0]
    feeds = dict(zip(names, inputs))
    model = _constant_operands(case.model, feeds)
    if name in REFUSED:
        with pytest.raises(UnsupportedOpError, match=REFUSED[name]):
            hetero.load_onnx(model)
        return
    graph = hetero.load_onnx(model)
    x = {names[0]: feeds[names[0]]}
    expected = outputs[0]
    ours = next(iter(hetero.run_reference(graph, x).values()))
    compiled = next(iter(hetero.compile(graph, targets=["llvm_cpu"]).run(x).values()))
    rtol = 0 if expected.dtype.kind in "iub" else 1e-5
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(compiled, expected, rtol=rtol, atol=rtol)


def _old_model(op: str, opset: int, mode: str, scales: list[float]) -> onnx.ModelProto:
    from onnx import TensorProto, helper

    scales = [float(v) for v in scales]
    inits = [] if opset < 9 else [numpy_helper.from_array(np.array(scales, np.float32), "s")]
    attrs = {"scales": scales} if opset < 9 else {}
    out = [int(np.float32(v) * 5) if k > 1 else 1 for k, v in enumerate(scales)]
    node = helper.make_node(op, ["x"] + (["s"] if inits else []), ["y"], mode=mode, **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


@pytest.mark.parametrize("op, opset, mode, scales", [
    ("Resize", 10, "linear", [1, 1, 2, 0.6]),
    ("Resize", 10, "nearest", [1, 1, 0.6, 1.7]),
    ("Upsample", 9, "linear", [1, 1, 2, 2.5]),
    ("Upsample", 9, "nearest", [1, 1, 1.5, 2.5]),
    ("Upsample", 7, "nearest", [1, 1, 3, 2]),
    ("Upsample", 7, "linear", [1, 1, 1.5, 2]),
])
def test_opsets_before_11_keep_asymmetric_coordinates(op: str, opset: int, mode: str,
                                                      scales: list[float]) -> None:
    """onnx's version converter would read these with Resize-11's half_pixel default;
    onnxruntime runs them with asymmetric coordinates (and ceil/floor nearest)."""
    from oracle import run_model

    model = _old_model(op, opset, mode, scales)
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5) * 0.5 - 3
    want = run_model(model, {"x": x})[0]
    graph = hetero.load_onnx(model)
    np.testing.assert_allclose(hetero.run_reference(graph, {"x": x})["y"], want, rtol=1e-6, atol=1e-6)
    compiled = hetero.compile(graph, targets=["llvm_cpu"]).run({"x": x})["y"]
    np.testing.assert_allclose(compiled, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [11, 12, 13, 18, 19])
@pytest.mark.parametrize("mode, transform, by_sizes", [
    ("linear", "half_pixel", False), ("nearest", "align_corners", True),
    ("cubic", "asymmetric", False), ("linear", "tf_crop_and_resize", True)])
def test_opsets_11_on_match_onnxruntime(opset: int, mode: str, transform: str, by_sizes: bool) -> None:
    """roi, scales and sizes inputs as each opset spells them (an empty scales beside sizes)."""
    from onnx import TensorProto, helper

    from oracle import run_model

    x = np.random.default_rng(0).standard_normal((1, 2, 5, 6)).astype(np.float32)
    inits = [numpy_helper.from_array(np.array([0, 0, 0.1, 0.2, 1, 1, 0.8, 1.1], np.float32), "roi")]
    if by_sizes:
        inits += [numpy_helper.from_array(np.array([], np.float32), "scales"),
                  numpy_helper.from_array(np.array([1, 2, 7, 4], np.int64), "sizes")]
    else:
        inits.append(numpy_helper.from_array(np.array([1, 1, 1.5, 0.7], np.float32), "scales"))
    node = helper.make_node("Resize", ["x"] + [t.name for t in inits], ["y"], mode=mode,
                            coordinate_transformation_mode=transform)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 7, 4])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    want = run_model(model, {"x": x})[0]
    compiled = hetero.compile(hetero.load_onnx(model), targets=["llvm_cpu"]).run({"x": x})["y"]
    np.testing.assert_allclose(compiled, want, rtol=1e-5, atol=1e-5)
