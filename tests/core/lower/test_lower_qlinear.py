"""QLinearMatMul and QLinearConv, rewritten at import (an exact integer accumulation, then
onnxruntime's requantisation: float32(acc) * (a_scale * b_scale / y_scale), rounded half
to even, plus the zero point, saturated), compiled by llvm_cpu and compared bit for bit
with onnxruntime over random scales, zero points and per-channel weights."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

from hetero.onnx_backend import HeteroBackend
from models import tiny_model
from oracle import run_model

_ELEM = {np.dtype(np.uint8): onnx.TensorProto.UINT8, np.dtype(np.int8): onnx.TensorProto.INT8}


def _ints(rng: np.random.Generator, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def _scale(rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    shape = () if size is None else (size,)
    return rng.uniform(0.001, 0.05, shape).astype(np.float32)


def _compare(op: str, names: list[str], arrays: dict[str, np.ndarray], feeds: list[str],
             **attrs: Any) -> None:
    node = helper.make_node(op, names, ["y"], name=f"my_{op.lower()}", **attrs)
    inputs = {k: (_ELEM[arrays[k].dtype], list(arrays[k].shape)) for k in feeds}
    inits = [numpy_helper.from_array(arrays[k], k) for k in names if k and k not in feeds]
    model = tiny_model([node], inputs, ["y"], inits, opset=13)
    (got,) = HeteroBackend.prepare(model).run([arrays[k] for k in feeds])
    (want,) = run_model(model, {k: arrays[k] for k in feeds})
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype,shapes,per_column", [
    (np.uint8, ((5, 16), (16, 7)), False),
    (np.int8, ((2, 5, 16), (16, 7)), True),
    (np.uint8, ((3, 40), (40, 9)), True),
])
def test_qlinear_matmul_is_bit_exact(seed: int, dtype: type, shapes: tuple[tuple[int, ...], ...],
                                     per_column: bool) -> None:
    rng = np.random.default_rng(seed)
    n = shapes[1][-1]
    arrays = {"a": _ints(rng, shapes[0], dtype), "a_scale": _scale(rng),
              "a_zero": _ints(rng, (), dtype), "b": _ints(rng, shapes[1], dtype),
              "b_scale": _scale(rng, n if per_column else None),
              "b_zero": _ints(rng, (n,) if per_column else (), dtype),
              "y_scale": _scale(rng) * 20, "y_zero": _ints(rng, (), dtype)}
    names = ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"]
    _compare("QLinearMatMul", names, arrays, ["a"])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("attrs,per_channel,bias", [
    ({}, False, False),
    ({"pads": [1, 1, 1, 1], "strides": [2, 1]}, True, True),
    ({"group": 2, "dilations": [1, 2]}, True, True),
    ({"auto_pad": "SAME_UPPER"}, False, True),
])
def test_qlinear_conv_is_bit_exact(seed: int, attrs: dict[str, Any], per_channel: bool,
                                   bias: bool) -> None:
    rng = np.random.default_rng(seed)
    group = attrs.get("group", 1)
    c_out = 4
    # Activations of 7 bits, as onnxruntime's own quantiser makes them (reduce_range) for
    # hosts without VNNI: its AVX2 u8 x s8 kernel (vpmaddubsw) saturates a pair of
    # products at int16, so with full-range activations its answer depends on the host
    # (wrong on a Zen 3), and this test compares with it bit for bit.
    arrays = {"x": rng.integers(0, 128, (1, 2 * group, 6, 7)).astype(np.uint8), "x_scale": _scale(rng),
              "x_zero": rng.integers(0, 128, ()).astype(np.uint8),  # padding reads it too
              "w": _ints(rng, (c_out, 2, 3, 3), np.int8),
              "w_scale": _scale(rng, c_out if per_channel else None),
              # onnxruntime takes int8 weights with a zero point of 0 (symmetric).
              "w_zero": np.zeros((c_out,) if per_channel else (), np.int8),
              "y_scale": _scale(rng) * 30, "y_zero": _ints(rng, (), np.uint8),
              "b": rng.integers(-3000, 3000, (c_out,)).astype(np.int32)}
    names = ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"]
    if bias:
        names.append("b")
    _compare("QLinearConv", names, arrays, ["x"], **attrs)


def test_qlinear_conv_bias_given_at_run_time_is_specialised_on() -> None:
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], name="my_qconv")
    one = np.array(0.1, np.float32)
    inits = [numpy_helper.from_array(a, k) for k, a in (
        ("xs", one), ("xz", np.array(0, np.uint8)), ("w", np.ones((1, 1, 1, 1), np.uint8)),
        ("ws", one), ("wz", np.array(0, np.uint8)), ("ys", one), ("yz", np.array(0, np.uint8)))]
    model = tiny_model([node], {"x": (onnx.TensorProto.UINT8, [1, 1, 2, 2]),
                                "b": (onnx.TensorProto.INT32, [1])}, ["y"], inits, opset=13)
    rep = HeteroBackend.prepare(model)
    assert rep.executable.specialized_on == ("b",)
    x = np.array([[[[1, 2], [3, 4]]]], np.uint8)
    for bias in (0, 20):
        # y = round(0.1 * 0.1 * (x + bias) / 0.1) = round(0.1 * (x + bias)), saturated to uint8
        expected = np.clip(np.rint(0.1 * (x.astype(np.float64) + bias)), 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(rep.run([x, np.array([bias], np.int32)])[0], expected)


def test_qlinear_matmul_rounds_ties_to_even_as_onnxruntime() -> None:
    """A combined scale of 1/2 puts every odd accumulator on a tie."""
    rng = np.random.default_rng(9)
    arrays = {"a": _ints(rng, (4, 3), np.int8) // 16, "a_scale": np.array(1.0, np.float32),
              "a_zero": np.array(0, np.int8), "b": _ints(rng, (3, 5), np.int8) // 16,
              "b_scale": np.array(1.0, np.float32), "b_zero": np.array(0, np.int8),
              "y_scale": np.array(2.0, np.float32), "y_zero": np.array(3, np.int8)}
    names = ["a", "a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"]
    _compare("QLinearMatMul", names, arrays, ["a"])
