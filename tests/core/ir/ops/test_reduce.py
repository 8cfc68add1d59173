"""The reductions against onnxruntime, their canonical axes and their errors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Node
from hetero.core.ir.opdef import get_op
from hetero.core.ir.types import TensorType
from hetero.errors import OpAttributeError, ShapeError
from oracle import run_node

SETTINGS = settings(max_examples=40, deadline=None)
REDUCTIONS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin")
COMMON = tuple(np.dtype(d) for d in ("float32", "float16", "float64", "int32", "int64"))
# dtypes onnxruntime's CPU kernels take, per op
DTYPES = {
    "ReduceSum": COMMON,
    "ReduceMean": COMMON,
    "ReduceMax": COMMON + (np.dtype(np.int8), np.dtype(np.uint8)),
    "ReduceMin": COMMON + (np.dtype(np.int8), np.dtype(np.uint8)),
}


def run_hetero(op: str, x: np.ndarray, **attrs: Any) -> tuple[np.ndarray, Node]:
    """The reference executor's result for one reduction of the graph input ``x``."""
    b = GraphBuilder(op.lower())
    b.output(b.op(op, b.input("x", x.shape, x.dtype), **attrs))
    graph = b.build()
    return run_reference(graph, {"x": x})[graph.outputs[0].name], graph.nodes[0]


def run_onnxruntime(op: str, x: np.ndarray, axes: list[int] | None, keepdims: int) -> np.ndarray:
    inputs = {"x": x} if axes is None else {"x": x, "axes": np.array(axes, np.int64)}
    return run_node(op, inputs, constant_inputs=("axes",), keepdims=keepdims)[0]


@st.composite
def reductions(draw: st.DrawFn) -> tuple[tuple[int, ...], list[int] | None, int]:
    """A shape, axes (None for all; each possibly negative) and keepdims."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    rank = len(shape)
    picked = draw(st.none() | st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    axes = None if picked is None else [a - rank if draw(st.booleans()) else a for a in picked]
    return shape, axes, draw(st.sampled_from([0, 1]))


def exact_sample(seed: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Small integers: every partial sum of up to 625 of them is exact, even in float16
    (integers up to 2048 are), so any summation order gives the same result."""
    low = 0 if dtype.kind == "u" else -2
    return np.asarray(np.random.default_rng(seed).integers(low, 3, shape), dtype)


@pytest.mark.parametrize("op", REDUCTIONS)
@SETTINGS
@given(case=reductions(), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_reduction_matches_onnxruntime(op: str, case: Any, seed: int, data: st.DataObject) -> None:
    shape, axes, keepdims = case
    dtype = data.draw(st.sampled_from(DTYPES[op]), label="dtype")
    x = exact_sample(seed, shape, dtype)
    attrs = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    result, node = run_hetero(op, x, **attrs)
    expected = run_onnxruntime(op, x, axes, keepdims)
    assert result.dtype == expected.dtype and result.shape == expected.shape
    if op == "ReduceMean" and dtype.kind == "f":
        # The sums are exact; the division rounds once in hetero, and onnxruntime may
        # multiply by 1/n instead: a couple of ulp apart.
        np.testing.assert_allclose(result, expected, rtol=4 * np.finfo(dtype).eps, atol=0)
    else:
        np.testing.assert_array_equal(result, expected)
    rank = len(shape)
    expected_axes = tuple(range(rank)) if axes is None else tuple(sorted(a % rank for a in axes))
    assert node.attrs["axes"] == expected_axes


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@SETTINGS
@given(case=reductions(), seed=st.integers(0, 2**32 - 1))
def test_float32_sum_and_mean_of_real_values_match_onnxruntime(op: str, case: Any, seed: int) -> None:
    shape, axes, keepdims = case
    x = np.random.default_rng(seed).normal(0, 1, shape).astype(np.float32)
    attrs = {"keepdims": keepdims} if axes is None else {"axes": axes, "keepdims": keepdims}
    result, node = run_hetero(op, x, **attrs)
    count = x.size // max(1, int(np.prod(result.shape)))
    # hetero accumulates in float64 and rounds once; onnxruntime accumulates in float32,
    # whose error grows like sqrt(count) * 6e-8 * |x| (count <= 625, |x| <~ 4 here).
    # count * 1e-6 leaves a wide margin, while a wrong axis or a lost element errs by O(1).
    np.testing.assert_allclose(result, run_onnxruntime(op, x, axes, keepdims),
                               rtol=1e-5, atol=count * 1e-6)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_mean_truncates_toward_zero_like_onnxruntime(dtype: type) -> None:
    x = np.array([[-7, 0], [7, 0], [-3, -3], [5, 0]], dtype)
    result, _ = run_hetero("ReduceMean", x, axes=[1], keepdims=0)
    np.testing.assert_array_equal(result, np.array([-3, 3, -3, 2], dtype))
    np.testing.assert_array_equal(result, run_onnxruntime("ReduceMean", x, [1], 0))


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_max_and_min_of_an_empty_set_are_the_identity_onnx_20_defines(op: str) -> None:
    x = np.zeros((2, 0), np.float32)
    result, _ = run_hetero(op, x, axes=[1], keepdims=0)
    np.testing.assert_array_equal(result, np.full(2, -np.inf if op == "ReduceMax" else np.inf, np.float32))
    expected = run_node(op, {"x": x, "axes": np.array([1])}, constant_inputs=("axes",), opset=20, keepdims=0)
    np.testing.assert_array_equal(result, expected[0])


@pytest.mark.parametrize("op", REDUCTIONS)
def test_empty_axes_mean_all_axes_and_complete_is_idempotent(op: str) -> None:
    x = exact_sample(0, (2, 3, 4), np.dtype(np.float32))
    result, node = run_hetero(op, x, axes=[], keepdims=0)
    assert node.attrs == {"axes": (0, 1, 2), "keepdims": 0}
    assert result.shape == ()
    assert get_op(op).complete(node.input_types(), dict(node.attrs)) == node.attrs


@pytest.mark.parametrize(
    ("attrs", "error", "message"),
    [
        (dict(axes=[3]), ShapeError, r"ReduceSum axes entry 3 is out of range for rank 3"),
        (dict(keepdims=2), OpAttributeError, r"node n \(ReduceSum\): ReduceSum keepdims must be 0 or 1, got 2"),
        (dict(axes=[0.5]), OpAttributeError, r"attribute 'axes' of ReduceSum must be ints"),
    ],
)
def test_bad_attributes_raise_errors_naming_node_and_problem(
    attrs: dict[str, Any], error: type, message: str
) -> None:
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    with pytest.raises(error, match=message):
        b.graph.add_node("ReduceSum", [x], attrs, name="n")


def test_reductions_reject_bool_inputs() -> None:
    b = GraphBuilder()
    with pytest.raises(ShapeError, match=r"ReduceMax input must be one of .* got bool"):
        b.ReduceMax(b.input("x", (2,), "bool"))


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions_count_one_flop_per_input_element(op: str) -> None:
    x, out = TensorType((2, 3, 4), "float32"), TensorType((2, 1, 4), "float32")
    assert get_op(op).flops([x], [out], {"axes": (1,), "keepdims": 1}) == 24


def test_axes_that_name_one_axis_twice_reduce_it_once() -> None:
    # The axes are the set of axes to reduce, as onnxruntime takes them: [1, -2] on rank 3 is {1}.
    from opcheck import reference

    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    got, node = reference("ReduceSum", {"x": data}, axes=[1, -2], keepdims=0)
    assert node.attrs["axes"] == (1,)
    np.testing.assert_array_equal(got, data.sum(axis=1))
