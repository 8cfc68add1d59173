"""The trigonometric, rounding, Mod, activation and bitwise ops against onnx's reference
evaluator (the spec's own numpy semantics) and onnxruntime, at the opsets where they differ."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx.reference import ReferenceEvaluator
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.frontend import load_onnx
from hetero.core.ir.builder import GraphBuilder
from hetero.errors import OpAttributeError, ShapeError
from oracle import node_model, run_model, run_node

RNG = np.random.default_rng(11)
X = np.concatenate([RNG.uniform(-4, 4, 20),
                    [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, np.nan]]).astype(np.float32)
UNIT = np.linspace(-0.95, 0.95, 17).astype(np.float32)
ABOVE_ONE = np.linspace(1.0, 9.0, 9).astype(np.float32)


def run_hetero(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> np.ndarray:
    b = GraphBuilder(op.lower())
    args = [b.input(name, a.shape, a.dtype) for name, a in inputs.items()]
    b.output(b.op(op, *args, **attrs))
    graph = b.build()
    return run_reference(graph, inputs)[graph.outputs[0].name]


def run_onnx_reference(op: str, inputs: dict[str, np.ndarray], opset: int, **attrs: Any) -> np.ndarray:
    model = node_model(op, inputs, opset=opset, **attrs)
    return ReferenceEvaluator(model).run(None, inputs)[0]


def assert_matches(got: np.ndarray, want: np.ndarray, rtol: float = 0.0) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if rtol:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(got, want)


# op, its input, attributes, opset, relative tolerance (0: exact)
UNARY: list[tuple[str, np.ndarray, dict[str, Any], int, float]] = [
    ("Sin", X, {}, 22, 1e-6), ("Cos", X, {}, 22, 1e-6), ("Tan", UNIT, {}, 22, 1e-6),
    ("Asin", UNIT, {}, 22, 1e-6), ("Acos", UNIT, {}, 22, 1e-6), ("Atan", X, {}, 22, 1e-6),
    ("Sinh", X, {}, 22, 1e-6), ("Cosh", X, {}, 22, 1e-6), ("Asinh", X, {}, 22, 1e-6),
    ("Acosh", ABOVE_ONE, {}, 22, 1e-6), ("Atanh", UNIT, {}, 22, 1e-6),
    ("Round", X, {}, 22, 0.0), ("Sign", X, {}, 13, 0.0),
    ("Sign", np.array([-7, 0, 3], np.int32), {}, 13, 0.0),
    ("Sign", np.array([0, 3, 255], np.uint8), {}, 13, 0.0),
    ("Elu", X, {"alpha": 0.7}, 22, 1e-6), ("Selu", X, {}, 22, 1e-6),
    ("Selu", X, {"alpha": 1.5, "gamma": 2.0}, 22, 1e-6), ("Celu", X, {"alpha": 2.0}, 12, 1e-6),
    ("Softplus", X, {}, 22, 1e-6), ("Softsign", X, {}, 22, 1e-6), ("Mish", X, {}, 22, 1e-6),
    ("ThresholdedRelu", X, {"alpha": 0.5}, 22, 0.0), ("Swish", X, {"alpha": 1.702}, 24, 1e-6),
    ("Shrink", X, {"lambd": 1.5, "bias": 0.5}, 9, 0.0),
    ("Shrink", np.array([-9, -2, -1, 0, 1, 2, 9], np.int32), {"lambd": 1.5, "bias": 1.5}, 9, 0.0),
    ("IsNaN", X, {}, 20, 0.0),
    ("BitwiseNot", np.array([-128, -1, 0, 5, 127], np.int8), {}, 18, 0.0),
    ("BitwiseNot", np.array([0, 5, 2**64 - 1], np.uint64), {}, 18, 0.0),
]


@pytest.mark.parametrize(("op", "x", "attrs", "opset", "rtol"), UNARY,
                         ids=[f"{op}-{x.dtype}-{i}" for i, (op, x, *_) in enumerate(UNARY)])
def test_unary_matches_onnx_reference(op: str, x: np.ndarray, attrs: dict[str, Any], opset: int,
                                      rtol: float) -> None:
    with np.errstate(all="ignore"):
        want = run_onnx_reference(op, {"x": x}, opset, **attrs)
    assert_matches(run_hetero(op, {"x": x}, **attrs), want, rtol)


SPECIALS = np.array([np.inf, -np.inf, np.nan, 0.0, -1.0, 3.0], np.float32)


@pytest.mark.parametrize(("positive", "negative"), [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_isinf_detects_the_signs_it_is_told_to(positive: int, negative: int) -> None:
    want = run_node("IsInf", {"x": SPECIALS}, opset=20, detect_positive=positive,
                    detect_negative=negative)[0]
    got = run_hetero("IsInf", {"x": SPECIALS}, detect_positive=positive, detect_negative=negative)
    assert_matches(got, want)


MOD_A = np.array([-7, -6, -1, 0, 1, 5, 7, 100], np.int64)
MOD_B = np.array([3, -3, 4, -5, 2, -2, 7, -9], np.int64)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_matches_onnxruntime(dtype: str, fmod: int) -> None:
    inputs = {"a": MOD_A.astype(dtype), "b": MOD_B.astype(dtype)}
    assert_matches(run_hetero("Mod", inputs, fmod=fmod), run_node("Mod", inputs, opset=13, fmod=fmod)[0])


def test_float_mod_follows_mod_28_in_both_modes() -> None:
    """Mod-28 defines fmod=0 on floats (floored, the sign of B) and its special values."""
    a = np.array([5.5, -5.5, 5.5, -0.0, 0.0, np.inf, 3.0, 5.0, -5.0, 5.0, np.nan], np.float32)
    b = np.array([2.0, 2.0, -2.0, 3.0, -3.0, 2.0, 0.0, np.inf, np.inf, -np.inf, 1.0], np.float32)
    for fmod in (0, 1):
        with np.errstate(all="ignore"):
            want = run_onnx_reference("Mod", {"a": a, "b": b}, 28, fmod=fmod)
        got = run_hetero("Mod", {"a": a, "b": b}, fmod=fmod)
        assert_matches(got, want)
        assert np.array_equal(np.signbit(got[:5]), np.signbit(want[:5]))


def test_mod_rejects_an_fmod_other_than_0_or_1() -> None:
    with pytest.raises(OpAttributeError, match="fmod"):
        run_hetero("Mod", {"a": MOD_A, "b": MOD_B}, fmod=2)


@pytest.mark.parametrize("slope_shape", [(), (1,), (5,), (4, 1), (3, 1, 5)])
def test_prelu_broadcasts_its_slope_to_x(slope_shape: tuple[int, ...]) -> None:
    x = RNG.uniform(-3, 3, (3, 4, 5)).astype(np.float32)
    slope = RNG.uniform(-1, 1, slope_shape).astype(np.float32)
    inputs = {"x": x, "slope": slope}
    assert_matches(run_hetero("PRelu", inputs), run_node("PRelu", inputs, opset=16)[0])


def test_prelu_refuses_a_slope_that_would_widen_x() -> None:
    with pytest.raises(ShapeError, match="unidirectional"):
        run_hetero("PRelu", {"x": np.zeros((4,), np.float32), "slope": np.zeros((3, 4), np.float32)})


BITS = np.array([-128, -77, -1, 0, 1, 5, 64, 127], np.int8)


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64"])
def test_bitwise_binary_matches_onnxruntime(op: str, dtype: str) -> None:
    a = BITS.astype(dtype).reshape(2, 4)
    inputs = {"a": a, "b": a[::-1, ::-1][:1]}  # broadcast (2, 4) with (1, 4)
    assert_matches(run_hetero(op, inputs), run_node(op, inputs, opset=18)[0])


def test_xor_broadcasts_booleans() -> None:
    inputs = {"a": np.array([[True, False], [False, True]]), "b": np.array([True, False])}
    assert_matches(run_hetero("Xor", inputs), run_node("Xor", inputs)[0])


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_unsigned_bitshift_matches_onnxruntime(dtype: str, direction: str) -> None:
    x = np.array([1, 3, 200, 255, 16], dtype)
    y = np.array([0, 1, 2, 7, 3], dtype)
    inputs = {"x": x, "y": y}
    got = run_hetero("BitShift", inputs, direction=direction)
    assert_matches(got, run_node("BitShift", inputs, opset=11, direction=direction)[0])


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint64"])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_28_defines_signed_types_and_every_amount(dtype: str, direction: str) -> None:
    """BitShift-28: arithmetic right shifts, and amounts < 0 or >= the width give the fill."""
    bits = 8 * np.dtype(dtype).itemsize
    signed = np.dtype(dtype).kind == "i"
    x = np.array([-5, -1, 7, 1, -128, 100, 3, -3] if signed else [5, 1, 7, 1, 128, 100, 3, 250], np.int64)
    y = np.array([1, -1, bits, bits - 1, 3, bits + 5, 0, -bits] if signed
                 else [1, 0, bits, bits - 1, 3, bits + 5, 0, 2], np.int64)
    inputs = {"x": x.astype(dtype), "y": y.astype(dtype)}
    want = run_onnx_reference("BitShift", inputs, 28, direction=direction)
    assert_matches(run_hetero("BitShift", inputs, direction=direction), want)


def test_bitshift_needs_a_direction_it_knows() -> None:
    inputs = {"x": np.array([1], np.uint8), "y": np.array([1], np.uint8)}
    with pytest.raises(OpAttributeError, match="direction"):
        run_hetero("BitShift", inputs, direction="UP")


XS = RNG.uniform(-3, 3, (2, 3)).astype(np.float32)
U8 = np.array([[1, 2, 3], [4, 5, 6]], np.uint8)
# Each op at its oldest opset hetero imports (older ones are upgraded to 13 first).
OLD_OPSETS: list[tuple[str, int, dict[str, np.ndarray], dict[str, Any]]] = [
    ("Sin", 7, {"x": XS}, {}), ("Sinh", 9, {"x": XS}, {}), ("Sign", 9, {"x": XS}, {}),
    ("IsNaN", 9, {"x": XS}, {}), ("IsInf", 10, {"x": XS}, {"detect_negative": 0}),
    ("Round", 11, {"x": XS}, {}),
    ("Mod", 10, {"a": np.array([-7, 5], np.int32), "b": np.array([3, -2], np.int32)}, {}),
    ("Mod", 10, {"a": XS, "b": XS[::-1] + 5}, {"fmod": 1}),
    ("PRelu", 7, {"x": XS, "slope": np.array([0.1, 0.2, 0.3], np.float32)}, {}),
    ("Elu", 7, {"x": XS}, {"alpha": 0.5}), ("Selu", 7, {"x": XS}, {}), ("Celu", 12, {"x": XS}, {}),
    ("Softplus", 7, {"x": XS}, {}), ("Softsign", 7, {"x": XS}, {}),
    ("ThresholdedRelu", 10, {"x": XS}, {}), ("Shrink", 9, {"x": XS}, {"lambd": 1.0, "bias": 0.5}),
    ("Mish", 18, {"x": XS}, {}), ("Swish", 24, {"x": XS}, {"alpha": 0.5}),
    ("Xor", 7, {"a": XS > 0, "b": np.array([True, False, True])}, {}),
    ("BitShift", 11, {"x": U8, "y": np.array([1, 2, 3], np.uint8)}, {"direction": "LEFT"}),
    ("BitwiseAnd", 18, {"a": U8, "b": U8[:, ::-1].copy()}, {}),
    ("Mean", 7, {"a": XS, "b": XS * 2}, {}),
    ("Mean", 8, {"a": XS, "b": XS[:1] * 2, "c": XS[:, :1]}, {}),
    ("Mean", 13, {"a": XS}, {}),
]


@pytest.mark.parametrize(("op", "opset", "inputs", "attrs"), OLD_OPSETS,
                         ids=[f"{op}-{opset}" for op, opset, *_ in OLD_OPSETS])
def test_onnx_import_at_each_opset_matches_onnxruntime(op: str, opset: int, inputs: dict[str, np.ndarray],
                                                       attrs: dict[str, Any]) -> None:
    model = node_model(op, inputs, opset=opset, **attrs)
    graph = load_onnx(model)
    got = run_reference(graph, inputs)[graph.outputs[0].name]
    np.testing.assert_allclose(got, run_model(model, inputs)[0], rtol=1e-6, atol=1e-6)
