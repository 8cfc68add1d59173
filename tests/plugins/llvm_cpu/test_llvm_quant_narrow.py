"""QuantizeLinear and DequantizeLinear to and from int16, int4, int2, float8 and float4,
per tensor, per axis and blocked: the reference against onnx's reference implementation,
the lowering on the interpreter and compiled by llvm_cpu against the reference, bit for bit."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import pytest
from lowercheck import lowered_and_reference

from hetero.core.ir import GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind

RNG = np.random.default_rng(23)
TYPES = ("int16", "uint16", "int4", "uint4", "int2", "uint2",
         "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")


def _dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name, None) or name)


def _onnx(op: str, arrays: dict[str, np.ndarray], **attrs: Any) -> np.ndarray:
    """``op`` run by onnx's ReferenceEvaluator at opset 25."""
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for k, a in arrays.items()]
    node = helper.make_node(op, list(arrays), ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    return ReferenceEvaluator(model).run(None, arrays)[0]


def _compiled(op: str, arrays: dict[str, np.ndarray], **attrs: Any) -> np.ndarray:
    gb = GraphBuilder(op.lower())
    gb.output(gb.op(op, *(gb.input(k, a.shape, a.dtype) for k, a in arrays.items()), **attrs))
    graph = gb.build()
    return bind(get_backend("llvm_cpu"), {"num_threads": 1}).compile(graph).run(arrays)[graph.outputs[0].name]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype.itemsize == 1 else a


def _assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    wide = expected.astype(np.float32)
    nan = np.isnan(wide)
    np.testing.assert_array_equal(np.isnan(actual.astype(np.float32)), nan)
    np.testing.assert_array_equal(_bits(actual)[~nan], _bits(expected)[~nan])


def _params(name: str, shape: tuple[int, ...], big: bool) -> tuple[np.ndarray, np.ndarray]:
    dtype = _dtype(name)
    scale = RNG.uniform(0.05, 0.5, shape).astype(np.float32)
    if name.startswith("float"):
        zero = np.zeros(shape, dtype)
    else:
        info = ml_dtypes.iinfo(dtype)
        zero = RNG.integers(info.min, info.max + 1, shape).astype(dtype)
    if big:
        scale = scale / 1000
    return scale, zero


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("mode", ["tensor", "axis", "blocked"])
def test_quantize_matches_onnx(name: str, mode: str) -> None:
    x = (RNG.standard_normal((3, 8)) * 4).astype(np.float32)
    x[0, :4] = [1e5, -1e5, 2e4, -2e4]
    if name.startswith("float8"):  # (onnx's integer reference casts an infinity to int32: undefined)
        x[0, :2] = np.inf, -np.inf
        x[0, 4] = np.nan
    shape, attrs = {"tensor": ((), {}), "axis": ((8,), {"axis": 1}),
                    "blocked": ((3, 3), {"axis": 1, "block_size": 3})}[mode]
    scale, zero = _params(name, shape, big=False)
    for saturate in ((0, 1) if name.startswith("float8") else (1,)):
        extra = {"saturate": saturate} if name.startswith("float8") else {}
        want = _onnx("QuantizeLinear", {"x": x, "s": scale, "z": zero}, **attrs, **extra)
        arrays = {"x": x, "s": scale, "z": zero}
        interpreted, reference = lowered_and_reference("QuantizeLinear", arrays, **attrs, **extra)
        _assert_same(reference, want)
        _assert_same(interpreted, reference)
        _assert_same(_compiled("QuantizeLinear", arrays, **attrs, **extra), reference)


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("mode", ["tensor", "axis", "blocked"])
def test_dequantize_matches_onnx(name: str, mode: str) -> None:
    dtype = _dtype(name)
    count = 256 if dtype.itemsize == 1 and name.startswith("float8") else 0
    if count:
        x = np.resize(np.arange(256, dtype=np.uint8), (3, 8 * 11)).view(dtype)[:, :8].copy()
    elif name.startswith("float"):
        x = np.resize(np.arange(16, dtype=np.uint8), (3, 8)).view(dtype)
    else:
        info = ml_dtypes.iinfo(dtype)
        x = RNG.integers(info.min, info.max + 1, (3, 8)).astype(dtype)
    shape, attrs = {"tensor": ((), {}), "axis": ((8,), {"axis": 1}),
                    "blocked": ((3, 3), {"axis": 1, "block_size": 3})}[mode]
    scale, zero = _params(name, shape, big=False)
    want = _onnx("DequantizeLinear", {"x": x, "s": scale, "z": zero}, **attrs)
    arrays = {"x": x, "s": scale, "z": zero}
    interpreted, reference = lowered_and_reference("DequantizeLinear", arrays, **attrs)
    np.testing.assert_array_equal(reference, want)
    np.testing.assert_array_equal(interpreted, reference)
    np.testing.assert_array_equal(_compiled("DequantizeLinear", arrays, **attrs), reference)


def test_bfloat16_input_quantises_through_float32() -> None:
    x = (RNG.standard_normal(64) * 30).astype(ml_dtypes.bfloat16)
    scale, zero = np.array(0.25, ml_dtypes.bfloat16), np.array(3, np.int8)
    arrays = {"x": x, "s": scale, "z": zero}
    _, reference = lowered_and_reference("QuantizeLinear", arrays)
    np.testing.assert_array_equal(reference, _onnx("QuantizeLinear", arrays))
    np.testing.assert_array_equal(_compiled("QuantizeLinear", arrays), reference)


def test_onnx_packs_what_the_suite_unpacks() -> None:
    """int4 initialisers arrive one value a byte, as ml_dtypes holds them."""
    values = np.array([-8, -1, 0, 7, 3], ml_dtypes.int4)
    tensor = numpy_helper.from_array(values)
    assert tensor.data_type == onnx.TensorProto.INT4
    np.testing.assert_array_equal(numpy_helper.to_array(tensor), values)
