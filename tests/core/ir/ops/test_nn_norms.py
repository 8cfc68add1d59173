"""LogSoftmax, Hardmax, InstanceNormalization, GroupNormalization, RMSNormalization and
LpNormalization imported from ONNX and run on llvm_cpu, against onnxruntime (onnx's
reference where onnxruntime has no kernel): the opset differences (LogSoftmax's and
Hardmax's flattening below 13, GroupNormalization's per-group parameters at 18) and the
edge values."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.onnx_backend import HeteroBackend
from oracle import node_model, run_model

RNG = np.random.default_rng(23)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def run_both(op: str, inputs: dict[str, np.ndarray], opset: int, constant: tuple[str, ...] = (),
             oracle: str = "onnxruntime", **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    """hetero's (llvm_cpu) and the oracle's result for one ``op`` node."""
    try:
        model = node_model(op, inputs, opset=opset, constant_inputs=constant, **attrs)
    except KeyError:  # onnx infers no output type for some function ops: it is X's
        model = _same_type_model(op, inputs, opset, constant, **attrs)
    feeds = {k: v for k, v in inputs.items() if k not in constant}
    if oracle == "onnxruntime":
        want = run_model(model, feeds)[0]
    else:
        want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = HeteroBackend.prepare(model, device="CPU").run(list(feeds.values()))[0]
    return got, want


def _same_type_model(op: str, inputs: dict[str, np.ndarray], opset: int,
                     constant: tuple[str, ...], **attrs: Any) -> onnx.ModelProto:
    """A model of one ``op`` node whose output has the type of its first input."""
    first = next(iter(inputs.values()))
    elem = helper.np_dtype_to_tensor_dtype(first.dtype)
    graph = helper.make_graph(
        [helper.make_node(op, list(inputs), ["out0"], **attrs)], op.lower(),
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items() if k not in constant],
        [helper.make_tensor_value_info("out0", elem, first.shape)],
        initializer=[numpy_helper.from_array(inputs[k], k) for k in constant])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


#: (opset, axis) pairs that exist: negative axes arrive with opset 11.
OPSET_AXES = [(opset, axis) for opset in (7, 11, 13) for axis in (None, 0, 1, 2, -1)
              if not (opset < 11 and axis == -1)]


@pytest.mark.parametrize(("opset", "axis"), OPSET_AXES)
def test_log_softmax_flattens_below_opset_13(opset: int, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    got, want = run_both("LogSoftmax", {"x": X}, opset, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("opset", "axis"), OPSET_AXES)
def test_hardmax_flattens_below_opset_13(opset: int, axis: int | None) -> None:
    attrs = {} if axis is None else {"axis": axis}
    got, want = run_both("Hardmax", {"x": X}, opset, **attrs)
    np.testing.assert_array_equal(got, want)


def test_hardmax_picks_the_first_of_tied_maxima() -> None:
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float32)
    got, want = run_both("Hardmax", {"x": x}, 13)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, [[0, 1, 0], [1, 0, 0]])


def test_instance_normalization_matches_onnxruntime() -> None:
    x = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale, bias = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
    got, want = run_both("InstanceNormalization", {"x": x, "scale": scale, "bias": bias}, 13,
                         ("scale", "bias"), epsilon=1e-3)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups", [2, 6])
def test_group_normalization_takes_opset_18_parameters_per_group(groups: int) -> None:
    # onnx's checker refuses GroupNormalization at opsets 18 to 20 (deprecated), so the
    # canonical op's per-group parameters are checked here against opset 18's definition:
    # scale and bias index the group, not the channel.
    x = RNG.standard_normal((2, 6, 3, 2)).astype(np.float32)
    scale = RNG.standard_normal(groups).astype(np.float32)
    bias = RNG.standard_normal(groups).astype(np.float32)
    b = GraphBuilder("gn18")
    b.output(b.op("GroupNormalization", b.input("x", x.shape, x.dtype), scale, bias,
                  num_groups=groups, epsilon=1e-4))
    graph = b.build()
    grouped = x.astype(np.float64).reshape(2, groups, -1)
    centred = grouped - grouped.mean(axis=2, keepdims=True)
    normal = centred / np.sqrt(np.square(centred).mean(axis=2, keepdims=True) + 1e-4)
    want = normal * scale[:, None] + bias[:, None]
    want = want.reshape(x.shape).astype(np.float32)
    reference = run_reference(graph, {"x": x})[graph.outputs[0].name]
    got = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run({"x": x})
    np.testing.assert_allclose(reference, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-4, atol=1e-5)


def test_group_normalization_opset_21_matches_onnxruntime() -> None:
    x = RNG.standard_normal((1, 4, 5)).astype(np.float32)
    scale, bias = RNG.standard_normal(4).astype(np.float32), RNG.standard_normal(4).astype(np.float32)
    got, want = run_both("GroupNormalization", {"x": x, "scale": scale, "bias": bias}, 21,
                         ("scale", "bias"), num_groups=2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_rms_normalization_matches_onnx_reference(axis: int) -> None:
    scale = RNG.standard_normal(X.shape[axis:][-1:]).astype(np.float32)
    got, want = run_both("RMSNormalization", {"x": X, "scale": scale}, 23, ("scale",),
                         oracle="reference", axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_normalization_matches_onnxruntime_with_a_zero_norm(p: int, axis: int) -> None:
    x = np.array(X)
    x[0, 0, :] = 0.0
    x[:, 1, 1] = 0.0
    got, want = run_both("LpNormalization", {"x": x}, 13, p=p, axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
