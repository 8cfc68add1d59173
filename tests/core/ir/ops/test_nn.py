"""LRN, BatchNormalization, Gemm, MatMul, Softmax, LayerNormalization against onnxruntime.

Float tolerances follow the bound on rounded sums (Higham, *Accuracy and Stability
of Numerical Algorithms*, 2.2): ``k`` terms summed in any order are off by at most
``k * eps * sum(|terms|)``. The reference works in float64 and rounds once, so the
gap to onnxruntime is held to ``(k + c) * eps * magnitude`` elementwise, with
``magnitude`` the sum of absolute terms and ``c`` a few roundings for the
elementwise steps around the sum. Conv and the pools are in test_conv_pool.py.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from hetero.core.ir import GraphBuilder, Node
from hetero.errors import ShapeError
from opcheck import assert_within, reference
from oracle import run_node

FLOATS = (np.float32, np.float16)


def flops_of(node: Node) -> int:
    return node.opdef.flops(node.input_types(), [v.type for v in node.outputs], node.attrs)


def lrn_base(x: np.ndarray, size: int, alpha: float, bias: float) -> np.ndarray:
    """bias + alpha/size * (sum of squares over channels c - floor((size-1)/2) .. c + ceil(...))."""
    squares = np.square(x.astype(np.float64))
    base = np.empty_like(squares)
    for c in range(x.shape[1]):
        window = squares[:, max(0, c - (size - 1) // 2):c + size // 2 + 1]
        base[:, c] = bias + alpha / size * window.sum(axis=1)
    return base


@settings(max_examples=30, deadline=None)
@given(size=st.sampled_from([1, 3, 5]), alpha=st.sampled_from([1e-4, 0.1, 10.0]),
       beta=st.sampled_from([0.75, 0.5, 3.0]), bias=st.sampled_from([1.0, 2.0, 0.5]),
       shape=st.tuples(st.integers(1, 2), st.integers(1, 7), st.integers(1, 3), st.integers(1, 3)),
       dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_lrn_matches_onnxruntime(size: int, alpha: float, beta: float, bias: float,
                                 shape: tuple[int, ...], dtype: type, seed: int) -> None:
    # onnxruntime's LRN takes 4-D inputs and odd sizes only; test_lrn_even_size covers the rest.
    x = np.random.default_rng(seed).uniform(-2, 2, shape).astype(dtype)
    attrs = {"size": size, "alpha": alpha, "beta": beta, "bias": bias}
    ours, _ = reference("LRN", {"x": x}, **attrs)
    (theirs,) = run_node("LRN", {"x": x}, **attrs)
    # onnxruntime slides the channel window as a running sum (add the square entering, subtract
    # the one leaving), so d = bias + alpha/size * sum carries an absolute error of up to
    # C * eps * d_max, d_max the value with every channel in the window; d ** beta turns that
    # into beta times the relative error, and the power and division add a few roundings.
    squares = np.square(x.astype(np.float64)).sum(axis=1, keepdims=True)
    d_max = bias + alpha / size * squares
    d = lrn_base(x, size, alpha, bias)
    relative = beta * shape[1] * d_max / d + size + 8
    assert_within(ours, theirs, np.abs(ours.astype(np.float64)) * relative, 1)


def test_lrn_even_size_and_other_ranks_follow_the_onnx_formula() -> None:
    # ONNX sums channels c - floor((size-1)/2) .. c + ceil((size-1)/2): one fewer before than after.
    x = np.random.default_rng(0).uniform(-2, 2, (2, 6, 3)).astype(np.float32)
    size, alpha, beta, bias = 4, 0.3, 0.75, 1.5
    ours, _ = reference("LRN", {"x": x}, size=size, alpha=alpha, beta=beta, bias=bias)
    expected = x / lrn_base(x, size, alpha, bias) ** beta
    np.testing.assert_allclose(ours, expected, rtol=2 * np.finfo(np.float32).eps)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4), dtype=st.sampled_from(FLOATS),
       epsilon=st.sampled_from([1e-5, 1e-3]), seed=st.integers(0, 2**16))
def test_batch_normalization_matches_onnxruntime(shape: list[int], dtype: type, epsilon: float,
                                                 seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-4, 4, shape).astype(dtype)
    c = shape[1]
    scale, b, mean = (rng.uniform(-2, 2, c).astype(dtype) for _ in range(3))
    var = rng.uniform(0.5, 2, c).astype(dtype)
    inputs = {"x": x, "scale": scale, "b": b, "mean": mean, "var": var}
    ours, _ = reference("BatchNormalization", inputs, tuple(inputs)[1:], epsilon=epsilon)
    (theirs,) = run_node("BatchNormalization", inputs, constant_inputs=tuple(inputs)[1:],
                         epsilon=epsilon)
    # onnxruntime folds the parameters into one multiply-add; the terms it may cancel are
    # x * s and mean * s (s = scale / sqrt(var + eps)) and B.
    per_channel = (-1,) + (1,) * (len(shape) - 2)
    s = np.abs(scale.astype(np.float64)) / np.sqrt(var.astype(np.float64) + epsilon)
    magnitude = ((np.abs(x.astype(np.float64)) + np.abs(mean.reshape(per_channel)))
                 * s.reshape(per_channel) + np.abs(b.reshape(per_channel)))
    assert_within(ours, theirs, magnitude, 8)


C_SHAPES = ["none", "scalar", "n", "1n", "m1", "mn", "11"]


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), k=st.integers(1, 8), trans_a=st.integers(0, 1),
       trans_b=st.integers(0, 1), c_shape=st.sampled_from(C_SHAPES),
       alpha=st.sampled_from([1.0, 0.5, -2.0]), beta=st.sampled_from([1.0, 0.0, 3.0]),
       dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_gemm_matches_onnxruntime(m: int, n: int, k: int, trans_a: int, trans_b: int,
                                  c_shape: str, alpha: float, beta: float, dtype: type,
                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (k, m) if trans_a else (m, k)).astype(dtype)
    b = rng.uniform(-1, 1, (n, k) if trans_b else (k, n)).astype(dtype)
    shape = {"scalar": (), "n": (n,), "1n": (1, n), "m1": (m, 1), "mn": (m, n), "11": (1, 1)}
    c = None if c_shape == "none" else rng.uniform(-1, 1, shape[c_shape]).astype(dtype)
    attrs = {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b}
    ours, _ = reference("Gemm", {"a": a, "b": b, "c": c}, **attrs)
    (theirs,) = run_node("Gemm", {"a": a, "b": b, "c": c}, **attrs)
    a64, b64 = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    magnitude = abs(alpha) * ((a64.T if trans_a else a64) @ (b64.T if trans_b else b64))
    if c is not None:
        magnitude = magnitude + abs(beta) * np.abs(c.astype(np.float64))
    assert ours.shape == (m, n)
    assert_within(ours, theirs, magnitude, k + 4)


@st.composite
def matmul_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Operand shapes covering 1-D promotion and broadcast batch axes."""
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    batch = [draw(st.integers(2, 3)) for _ in range(draw(st.integers(0, 2)))]
    a_batch = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))):]
    b_batch = [d if draw(st.booleans()) else 1 for d in batch][draw(st.integers(0, len(batch))):]
    a = (k,) if draw(st.booleans()) and not a_batch else (*a_batch, m, k)
    b = (k,) if draw(st.booleans()) and not b_batch else (*b_batch, k, n)
    return a, b


@settings(max_examples=40, deadline=None)
@given(shapes=matmul_shapes(), dtype=st.sampled_from(FLOATS + (np.int32, np.int64)),
       seed=st.integers(0, 2**16))
def test_matmul_matches_onnxruntime(shapes: tuple[tuple[int, ...], tuple[int, ...]], dtype: type,
                                    seed: int) -> None:
    rng = np.random.default_rng(seed)
    a_shape, b_shape = shapes
    if np.dtype(dtype).kind == "i":
        a, b = (rng.integers(-50, 50, s).astype(dtype) for s in shapes)
    else:
        a, b = (rng.uniform(-1, 1, s).astype(dtype) for s in shapes)
    ours, _ = reference("MatMul", {"a": a, "b": b})
    (theirs,) = run_node("MatMul", {"a": a, "b": b})
    assert ours.shape == np.matmul(a, b).shape
    if np.dtype(dtype).kind == "i":
        np.testing.assert_array_equal(ours, theirs)  # small integers: exact on both sides
        assert ours.dtype == theirs.dtype
    else:
        magnitude = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        assert_within(ours, theirs, magnitude, a_shape[-1] + 2)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_softmax_matches_onnxruntime_on_every_axis(shape: list[int], data: st.DataObject,
                                                   dtype: type, seed: int) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    x = np.random.default_rng(seed).uniform(-3, 3, shape).astype(dtype)
    ours, node = reference("Softmax", {"x": x}, axis=axis)
    (theirs,) = run_node("Softmax", {"x": x}, axis=axis)
    assert node.attrs["axis"] == axis % len(shape)
    np.testing.assert_allclose(ours.sum(axis=axis), 1.0, rtol=shape[axis] * np.finfo(dtype).eps)
    # exp(x - max) with |x - max| <= 6 carries a relative error of about 6 eps; the sum of
    # the row adds shape[axis] eps and the division one more.
    assert_within(ours, theirs, np.abs(ours.astype(np.float64)), shape[axis] + 10)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(),
       bias=st.booleans(), dtype=st.sampled_from(FLOATS), seed=st.integers(0, 2**16))
def test_layer_normalization_matches_onnxruntime(shape: list[int], data: st.DataObject, bias: bool,
                                                 dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
    normalized = tuple(shape[axis:])
    x = rng.uniform(-1, 1, shape).astype(dtype)
    scale = rng.uniform(-2, 2, normalized).astype(dtype)
    b = rng.uniform(-2, 2, normalized).astype(dtype) if bias else None
    inputs = {"x": x, "scale": scale, "b": b}
    ours, node = reference("LayerNormalization", inputs, ("scale", "b"), axis=axis)
    (theirs,) = run_node("LayerNormalization", inputs, constant_inputs=("scale", "b"), axis=axis)
    assert node.attrs["axis"] == axis % len(shape)
    # The mean and the mean of squares sum `count` terms each. onnxruntime takes the variance
    # as E[x^2] - mean^2, which loses accuracy in proportion to E[x^2] / var (a short row of
    # close values cancels badly); that relative error reaches y through |z|, z = y before
    # the scale. Centring x costs (|x| + |mean|) / std.
    count = int(np.prod(normalized))
    x64 = x.astype(np.float64)
    axes = tuple(range(node.attrs["axis"], len(shape)))
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True).clip(1e-12)
    z = (x64 - mean) / np.sqrt(var)
    amplified = np.square(x64).mean(axis=axes, keepdims=True) / var
    centring = (np.abs(x64) + np.abs(mean)) / np.sqrt(var + 1e-5)
    magnitude = (np.abs(z) * amplified + centring + 1) * np.abs(scale.astype(np.float64))
    if b is not None:
        magnitude = magnitude + np.abs(b.astype(np.float64))
    assert_within(ours, theirs, magnitude, 2 * count + 8)


def test_axes_are_completed_to_non_negative() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    _, node = reference("Softmax", {"x": x})
    assert node.attrs == {"axis": 2}
    _, node = reference("LayerNormalization", {"x": x, "s": np.ones((3, 4), np.float32)}, ("s",),
                        axis=-2)
    assert node.attrs == {"axis": 1, "epsilon": 1e-5, "statistics": 0,
                          "stash_type": np.dtype("float32")}


@pytest.mark.parametrize("op, shapes, attrs, message", [
    ("Gemm", [(2, 3), (4, 5)], {}, r"inner dimensions differ: A f32\[2,3\] \(transA=0\) gives K=3, "
                                   r"B f32\[4,5\] \(transB=0\) gives K=4"),
    ("Gemm", [(2, 3), (5, 3)], {"transB": 1, "transA": 1}, r"gives K=2, .* gives K=3"),
    ("Gemm", [(2, 3), (3, 5), (2, 4)], {},
     r"C f32\[2,4\] does not broadcast to the result shape \[2, 5\]"),
    ("Gemm", [(2, 3, 1), (3, 5)], {}, r"A must have rank 2"),
    ("MatMul", [(2, 3), (4, 5)], {},
     r"inner dimensions differ: A f32\[2,3\] has K=3, B f32\[4,5\] has K=4"),
    ("MatMul", [(2, 2, 3), (3, 3, 4)], {},
     r"batch dimensions of A f32\[2,2,3\] and B f32\[3,3,4\]"),
    ("MatMul", [(3,), (4,)], {}, r"inner dimensions differ"),
    ("BatchNormalization", [(2, 3, 4), (3,), (3,), (4,), (3,)], {},
     r"input_mean must have shape \[3\] \(C\), got f32\[4\]"),
    ("LayerNormalization", [(2, 3, 4), (3,)], {},
     r"Scale f32\[3\] does not broadcast to the normalised shape \[4\]"),
    ("LayerNormalization", [(2, 3, 4), (4,), (2, 4)], {"axis": 1},
     r"B f32\[2,4\] does not broadcast to the normalised shape \[3, 4\]"),
    ("LRN", [(2, 3)], {"size": 3}, r"at least one spatial axis"),
    ("Softmax", [(2, 3)], {"axis": 2}, r"axis 2 is out of range for rank 2"),
])
def test_bad_shapes_are_rejected_by_name(op: str, shapes: list[tuple[int, ...]],
                                         attrs: dict[str, Any], message: str) -> None:
    b = GraphBuilder()
    operands = [b.input(f"in{i}", s) for i, s in enumerate(shapes)]
    with pytest.raises(ShapeError, match=rf"\({op}\): .*{message}"):
        b.op(op, *operands, **attrs)


def test_mixed_dtypes_are_rejected() -> None:
    b = GraphBuilder()
    with pytest.raises(ShapeError, match=r"MatMul inputs must share one dtype.*float16.*float32"):
        b.MatMul(b.input("a", (2, 3)), b.input("b", (3, 2), "float16"))
    with pytest.raises(ShapeError, match=r"Gemm input A must be one of"):
        b.Gemm(b.input("ai", (2, 3), "int32"), b.input("bi", (3, 2), "int32"))


@pytest.mark.parametrize("op, shapes, attrs, expected", [
    # 2*M*N*K = 2*2*4*3, then one add per output for C, one scaling each for alpha and beta
    ("Gemm", [(2, 3), (3, 4)], {}, 48),
    ("Gemm", [(2, 3), (3, 4), (4,)], {}, 48 + 8),
    ("Gemm", [(3, 2), (4, 3), (4,)], {"transA": 1, "transB": 1, "alpha": 2.0, "beta": 0.5},
     48 + 24),
    # batched: 5 x (2x3 @ 3x4) = 40 outputs of 3 MACs; vector dot: 3 MACs
    ("MatMul", [(5, 2, 3), (3, 4)], {}, 240),
    ("MatMul", [(3,), (3,)], {}, 6),
    ("BatchNormalization", [(2, 3, 4), (3,), (3,), (3,), (3,)], {}, 4 * 24 + 2 * 3),
    ("Softmax", [(2, 3)], {}, 30),
    ("LayerNormalization", [(2, 3), (3,)], {}, 36),
    ("LayerNormalization", [(2, 3), (3,), (3,)], {}, 42),
    ("LRN", [(1, 4, 2, 2)], {"size": 3}, 16 * 8),
])
def test_flops_counted_by_hand(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any],
                               expected: int) -> None:
    b = GraphBuilder()
    y = b.op(op, *[b.input(f"in{i}", s) for i, s in enumerate(shapes)], **attrs)
    assert flops_of(y.producer) == expected
