"""NaN through the max/min family, lowered and run on the tensor-IR interpreter,
against each op's reference.

The references (numpy's ``maximum``, ``minimum``, ``max``, ``min``, ``clip``) propagate
NaN, as the ONNX reference implementation does: one NaN among a max's operands, or
in a pooling window or a reduced slice, makes the result NaN. The tensor IR's
``min``/``max`` carry that rule, so every lowering built on them follows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lowercheck import lowered_and_reference

from hetero.core.ir.tir import Buffer, PrimFunc, Store, const, maximum, minimum, run_func, seq

NAN = np.float32("nan")
RNG = np.random.default_rng(11)


def _with_nan(shape: tuple[int, ...], positions: list[tuple[int, ...]], dtype: Any = np.float32) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(dtype)
    for p in positions:
        x[p] = np.nan
    return x


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal dtype, shape and values, NaN matching NaN."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert np.isnan(expected).any(), "the case must produce a NaN to test anything"
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("op", ["max", "min"])
def test_primitive_propagates_a_nan_in_either_operand(op: str) -> None:
    a, b = Buffer("a", (4,), np.dtype("float32")), Buffer("b", (4,), np.dtype("float32"))
    y = Buffer("y", (4,), np.dtype("float32"))
    fn = maximum if op == "max" else minimum
    body = [Store(y, (const(i, "int64"),), fn(a[i], b[i])) for i in range(4)]
    func = PrimFunc("f", (a, b, y), seq(*body))
    xa = np.array([NAN, 1.0, NAN, 2.0], np.float32)
    xb = np.array([1.0, NAN, NAN, -3.0], np.float32)
    got = run_func(func, {"a": xa, "b": xb, "y": np.zeros(4, np.float32)})["y"]
    np.testing.assert_array_equal(got, (np.maximum if op == "max" else np.minimum)(xa, xb))


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_elementwise_max_min_propagate_nan_from_either_side(op: str, dtype: Any) -> None:
    a = np.array([1.0, NAN, 3.0, NAN, -1.0], dtype)
    b = np.array([NAN, 2.0, 1.0, NAN, -2.0], dtype)
    assert_same(*lowered_and_reference(op, {"a": a, "b": b}))


@pytest.mark.parametrize(("op", "attrs"), [
    ("Relu", {}), ("Clip", {"min": 0.0, "max": 6.0}), ("Clip", {"min": -1.0}),
    ("HardSigmoid", {}), ("HardSwish", {}), ("LeakyRelu", {}),
])
def test_activations_built_on_max_min_keep_nan(op: str, attrs: dict[str, Any]) -> None:
    x = _with_nan((2, 5), [(0, 1), (1, 4)])
    assert_same(*lowered_and_reference(op, {"x": x}, **attrs))


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": (2, 2)},
    {"kernel_shape": (3, 3), "pads": (1, 1, 1, 1)},
    {"kernel_shape": (2, 2), "strides": (2, 2), "ceil_mode": 1},
])
def test_max_pool_window_with_a_nan_is_nan(attrs: dict[str, Any]) -> None:
    x = _with_nan((1, 2, 5, 5), [(0, 0, 1, 1), (0, 1, 4, 4)])
    assert_same(*lowered_and_reference("MaxPool", {"x": x}, **attrs))


def test_global_max_pool_is_nan_where_a_channel_holds_one() -> None:
    x = _with_nan((2, 3, 4, 4), [(0, 1, 3, 2), (1, 2, 0, 0)])
    assert_same(*lowered_and_reference("GlobalMaxPool", {"x": x}))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize(("axes", "keepdims"), [((1,), 0), ((0, 2), 1), (None, 0)])
def test_reduce_max_min_are_nan_where_the_slice_holds_one(op: str, axes: tuple[int, ...] | None,
                                                          keepdims: int) -> None:
    # The NaN comes last in its slice too, so an accumulator that only drops a
    # NaN met after a number, or only one met first, is caught either way.
    x = _with_nan((3, 4, 5), [(0, 0, 0), (2, 3, 4)])
    attrs: dict[str, Any] = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    assert_same(*lowered_and_reference(op, {"x": x}, **attrs))
