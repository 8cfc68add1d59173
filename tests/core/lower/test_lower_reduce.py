"""Reduction lowerings against each op's reference.

The reference sums floats in float64 and rounds once; the lowering accumulates in
float32, so a sum of k terms may differ by up to k roundings of eps times the sum
of the terms' magnitudes (the bound :func:`opcheck.assert_within` checks). Max and
min, and every integer reduction, are exact.
"""

from __future__ import annotations

import numpy as np
import pytest
from lowercheck import lowered_and_reference, run_lowered
from opcheck import assert_within, reference

from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import Allocate, Store, verify_func, walk
from hetero.core.lower import lower_group, lower_node

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4, 5)).astype(np.float32)
INTS = RNG.integers(-100, 100, (3, 4, 5)).astype(np.int32)


def assert_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


def _count(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> int:
    return int(np.prod([shape[a] for a in (range(len(shape)) if axes is None else axes)]))


@pytest.mark.parametrize(("axes", "keepdims"), [((1,), 1), ((0, 2), 0), (None, 0), ((-1,), 1)])
def test_float_sum_is_within_its_roundings(axes: tuple[int, ...] | None, keepdims: int) -> None:
    attrs = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    actual, expected = lowered_and_reference("ReduceSum", {"x": X}, **attrs)
    magnitude = np.sum(np.abs(X), axis=None if axes is None else axes, keepdims=bool(keepdims))
    assert_within(actual, expected, magnitude, roundings=_count(X.shape, axes))


@pytest.mark.parametrize(("axes", "keepdims"), [((1,), 0), ((0, 1, 2), 1)])
def test_float_mean_is_within_its_roundings(axes: tuple[int, ...], keepdims: int) -> None:
    actual, expected = lowered_and_reference("ReduceMean", {"x": X}, axes=axes, keepdims=keepdims)
    magnitude = np.mean(np.abs(X), axis=axes, keepdims=bool(keepdims))
    # k roundings in the sum, one in the division.
    assert_within(actual, expected, magnitude, roundings=_count(X.shape, axes) + 1)


def test_half_precision_sum_accumulates_in_float32() -> None:
    # 2048 + 1 is not a float16 (its spacing there is 2): a float16 accumulator
    # would stay at 2048, while the exact sum 2064 is a float16.
    x = np.concatenate([[2048.0], np.ones(16)]).astype(np.float16).reshape(1, 17)
    actual, expected = lowered_and_reference("ReduceSum", {"x": x}, axes=(1,), keepdims=0)
    assert expected[0] == 2064
    assert_equal(actual, expected)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("data", [X, INTS], ids=["float32", "int32"])
def test_extremes_are_exact(op: str, data: np.ndarray) -> None:
    assert_equal(*lowered_and_reference(op, {"x": data}, axes=(0, 2), keepdims=1))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_integer_sum_and_mean_are_exact(op: str) -> None:
    # Means of mixed-sign data: the reference truncates toward zero.
    assert_equal(*lowered_and_reference(op, {"x": INTS}, axes=(1,), keepdims=0))


def test_integer_sum_wraps_in_its_dtype() -> None:
    x = np.full((2, 6), 100, np.int8)
    assert_equal(*lowered_and_reference("ReduceSum", {"x": x}, axes=(1,), keepdims=1))


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_empty_reduction_gives_the_identity(op: str, dtype: str) -> None:
    x = np.zeros((2, 0, 3), dtype)
    assert_equal(*lowered_and_reference(op, {"x": x}, axes=(1,), keepdims=0))


def test_sum_keeps_its_total_in_a_local_accumulator() -> None:
    _, node = reference("ReduceSum", {"x": X}, axes=(1,), keepdims=1)
    scopes = [s.buffer.scope for s in walk(lower_node(node).body) if isinstance(s, Allocate)]
    assert scopes == ["local"]


def test_reduction_with_an_elementwise_epilogue_is_one_loop_nest() -> None:
    b = GraphBuilder("pooled")
    x = b.input("x", X.shape)
    scale = RNG.standard_normal((4, 1)).astype(np.float32)
    y = b.Relu(b.Mul(b.ReduceSum(x, axes=(2,), keepdims=1), scale))
    b.output(y)
    graph = b.build()
    func = verify_func(lower_group(graph.nodes, "pooled"))
    stores = [s for s in walk(func.body) if isinstance(s, Store)]
    globals_ = [s.buffer for s in walk(func.body) if isinstance(s, Allocate) and s.buffer.scope == "global"]
    assert [s.buffer.name for s in stores if s.buffer.scope == "global"] == [y.name]
    assert globals_ == []
    actual = run_lowered(func, graph.nodes, {"x": X})
    expected = run_reference(graph, {"x": X})[y.name]
    # The epilogue multiplies and clamps the float32 sum: one more rounding than the sum's.
    magnitude = np.abs(scale) * np.sum(np.abs(X), axis=2, keepdims=True)
    assert_within(actual[0], expected, magnitude, roundings=X.shape[2] + 1)
