"""MatMulInteger and ConvInteger, rewritten at import (widened, centred on their zero
points, then an int32 MatMul or an exact float64 Conv), compiled by llvm_cpu and compared
bit for bit with onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

from hetero.errors import UnsupportedOpError
from hetero.onnx_backend import HeteroBackend
from models import tiny_model
from oracle import run_model

_ELEM = {np.uint8: onnx.TensorProto.UINT8, np.int8: onnx.TensorProto.INT8}


def _ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _model(op: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray],
           order: list[str], **attrs: Any) -> onnx.ModelProto:
    node = helper.make_node(op, order, ["y"], name=f"my_{op.lower()}", **attrs)
    inputs = {k: (_ELEM[v.dtype.type], list(v.shape)) for k, v in feeds.items()}
    inits = [numpy_helper.from_array(v, k) for k, v in consts.items()]
    return tiny_model([node], inputs, ["y"], inits, opset=13)


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
           want: np.ndarray | None = None) -> None:
    """hetero's output equals ``want``, by default onnxruntime's."""
    names = [i.name for i in model.graph.input]
    (got,) = HeteroBackend.prepare(model).run([feeds[n] for n in names])
    if want is None:
        (want,) = run_model(model, feeds)
    assert got.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.uint8), (np.int8, np.int8),
                                           (np.uint8, np.int8)])
@pytest.mark.parametrize("shapes,zeros", [
    (((4, 3), (3, 5)), "scalar"),
    (((4, 3), (3, 5)), "per_row_and_column"),
    (((2, 4, 7), (7, 5)), "per_row_and_column"),
    (((2, 4, 7), (2, 7, 5)), "none"),
])
def test_matmul_integer(a_type: type, b_type: type, shapes: tuple[tuple[int, ...], ...],
                        zeros: str) -> None:
    rng = np.random.default_rng(0)
    a, b = _ints(rng, shapes[0], a_type), _ints(rng, shapes[1], b_type)
    m, n = shapes[0][-2], shapes[1][-1]
    consts: dict[str, np.ndarray] = {}
    order = ["a", "b"]
    if zeros != "none":
        size_a, size_b = (1, 1) if zeros == "scalar" else (m, n)
        consts = {"a_zero": _ints(rng, (size_a,), a_type), "b_zero": _ints(rng, (size_b,), b_type)}
        if zeros == "scalar":
            consts = {k: v.reshape(()) for k, v in consts.items()}
        order += ["a_zero", "b_zero"]
    model = _model("MatMulInteger", {"a": a, "b": b}, consts, order)
    if zeros == "per_row_and_column":
        # onnxruntime takes only scalar zero points for A: the spec's meaning, in int64.
        a_zero = consts["a_zero"].astype(np.int64)[:, None]
        want = np.matmul(a.astype(np.int64) - a_zero, b.astype(np.int64) - consts["b_zero"])
        _check(model, {"a": a, "b": b}, want.astype(np.int32))
    elif (a_type, b_type) == (np.uint8, np.int8):
        # The spec's result, in int64: onnxruntime's AVX2 u8 x s8 kernel (vpmaddubsw)
        # saturates a pair of products at int16, so where a pair passes 32767 its answer
        # depends on the host (wrong on a Zen 3 without AVX-512 VNNI; hetero is exact).
        a_zero = consts.get("a_zero", np.zeros((), a_type)).astype(np.int64)
        b_zero = consts.get("b_zero", np.zeros((), b_type)).astype(np.int64)
        want = np.matmul(a.astype(np.int64) - a_zero, b.astype(np.int64) - b_zero)
        _check(model, {"a": a, "b": b}, want.astype(np.int32))
    else:
        _check(model, {"a": a, "b": b})


def test_matmul_integer_zero_points_may_be_graph_inputs() -> None:
    rng = np.random.default_rng(1)
    feeds = {"a": _ints(rng, (3, 4), np.uint8), "b": _ints(rng, (4, 2), np.uint8),
             "a_zero": np.array([7], np.uint8), "b_zero": np.array([200], np.uint8)}
    _check(_model("MatMulInteger", feeds, {}, ["a", "b", "a_zero", "b_zero"]), feeds)


@pytest.mark.parametrize("attrs,per_channel", [
    ({}, False),
    ({"pads": [1, 0, 1, 2], "strides": [2, 1]}, True),
    ({"dilations": [2, 1], "group": 2}, True),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, False),
])
def test_conv_integer(attrs: dict[str, Any], per_channel: bool) -> None:
    rng = np.random.default_rng(2)
    group = attrs.get("group", 1)
    x = _ints(rng, (1, 2 * group, 5, 6), np.uint8)
    w = _ints(rng, (4, 2, 3, 3), np.uint8)
    consts = {"w": w, "x_zero": np.array(120, np.uint8),
              "w_zero": _ints(rng, (4,) if per_channel else (), np.uint8)}
    model = _model("ConvInteger", {"x": x}, consts, ["x", "w", "x_zero", "w_zero"], **attrs)
    want = None
    if per_channel:
        # onnxruntime takes only a scalar w_zero: its float Conv of the centred operands
        # (sums of 18 products, exact in float32) is the spec's meaning.
        xc = x.astype(np.float32) - 120
        wc = w.astype(np.float32) - consts["w_zero"].astype(np.float32).reshape(4, 1, 1, 1)
        conv = helper.make_node("Conv", ["x", "w"], ["y"], **attrs)
        float_model = tiny_model([conv], {"x": (onnx.TensorProto.FLOAT, list(x.shape))}, ["y"],
                                 [numpy_helper.from_array(wc, "w")], opset=13)
        want = run_model(float_model, {"x": xc})[0].astype(np.int32)
    _check(model, {"x": x}, want)


def test_conv_integer_whose_sums_could_pass_int32_is_refused() -> None:
    x = np.zeros((1, 4096, 3, 3), np.uint8)
    w = np.zeros((1, 4096, 3, 3), np.uint8)
    model = _model("ConvInteger", {"x": x}, {"w": w}, ["x", "w"])
    with pytest.raises(UnsupportedOpError, match="my_convinteger.*pass int32"):
        HeteroBackend.prepare(model)
