"""The elementwise ops against onnxruntime: every op, broadcasting, dtypes and attributes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np
from onnx import helper
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.opdef import get_op
from hetero.core.ir.types import TensorType
from hetero.errors import OpAttributeError, ShapeError
from oracle import run_node

SETTINGS = settings(max_examples=25, deadline=None)

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
FLOATS = (F32, F16, F64)
SIGNED = tuple(np.dtype(d) for d in ("int8", "int32", "int64"))
UNSIGNED = tuple(np.dtype(d) for d in ("uint8", "uint32", "uint64"))
BOOL = np.dtype(bool)

# Tolerances relative to the dtype's precision. numpy and onnxruntime (MLAS/Eigen
# vector kernels) compute transcendentals with different polynomial approximations,
# a few ulp apart in float32; float16 kernels run in float32 and round once, while
# the reference rounds after each numpy step, so they may differ by about 2 ulp
# (2**-10 relative each). ONNX stores float attributes as float32, so onnxruntime's
# float64 kernels see alpha = 0.2 as 0.2000000030 (and HardSwish uses a float32 1/6):
# float64 results agree to float32's precision of the attribute times |x| <= 10.
TOLERANCE = {F64: (1e-7, 1e-6), F32: (1e-5, 1e-6), F16: (2e-3, 2e-3)}


def run_hetero(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> np.ndarray:
    """The reference executor's result for one ``op`` node whose operands are graph inputs."""
    b = GraphBuilder(op.lower())
    args = [b.input(name, a.shape, a.dtype) for name, a in inputs.items()]
    b.output(b.op(op, *args, **attrs))
    graph = b.build()
    return run_reference(graph, inputs)[graph.outputs[0].name]


def assert_matches(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype and shape; exact for integers and bools, within TOLERANCE for floats."""
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype in TOLERANCE:
        rtol, atol = TOLERANCE[actual.dtype]
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual, expected)


def sample(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype,
           domain: str = "any") -> np.ndarray:
    """Random values of ``dtype`` in ``domain``: "any", "positive" or "nonzero"."""
    if dtype == BOOL:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.kind in "iu":
        low = 1 if domain == "positive" or dtype.kind == "u" else -20
        values = rng.integers(low, 21, shape)
        if domain == "nonzero":
            values[values == 0] = 1
        return np.asarray(values, dtype)
    if domain == "positive":
        return np.asarray(rng.uniform(0.1, 10, shape), dtype)
    values = rng.normal(0, 2, shape)
    if domain == "nonzero":
        values = np.where(np.abs(values) < 0.1, 0.5, values)
    return np.asarray(values, dtype)


shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=5)
seeds = st.integers(0, 2**32 - 1)

# op -> (dtypes both hetero and onnxruntime accept, input domain, opset)
UNARY = {
    "Relu": (FLOATS + SIGNED, "any", 18),
    "LeakyRelu": (FLOATS, "any", 18),
    "Sigmoid": (FLOATS, "any", 18),
    "HardSigmoid": (FLOATS, "any", 18),
    "HardSwish": (FLOATS, "any", 18),
    "Tanh": (FLOATS, "any", 18),
    "Erf": ((F32, F16), "any", 18),
    "Gelu": ((F32, F16), "any", 20),
    "Sqrt": (FLOATS, "positive", 18),
    "Exp": (FLOATS, "any", 18),
    "Log": (FLOATS, "positive", 18),
    "Reciprocal": (FLOATS, "nonzero", 18),
    "Floor": (FLOATS, "any", 18),
    "Ceil": (FLOATS, "any", 18),
    "Neg": (FLOATS + SIGNED, "any", 18),
    "Abs": (FLOATS + SIGNED + UNSIGNED, "any", 18),
    "Not": ((BOOL,), "any", 18),
    "Identity": (FLOATS + SIGNED + UNSIGNED + (BOOL,), "any", 18),
    "Dropout": (FLOATS, "any", 18),
    "Clip": (FLOATS + SIGNED + UNSIGNED, "any", 18),
}


@pytest.mark.parametrize("op", sorted(UNARY))
@SETTINGS
@given(shape=shapes, seed=seeds, data=st.data())
def test_unary_op_matches_onnxruntime_with_default_attributes(
    op: str, shape: tuple[int, ...], seed: int, data: st.DataObject
) -> None:
    dtypes, domain, opset = UNARY[op]
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    x = sample(np.random.default_rng(seed), shape, dtype, domain)
    assert_matches(run_hetero(op, {"x": x}), run_node(op, {"x": x}, opset=opset)[0])


# op -> (dtypes both hetero and onnxruntime accept, domain of the second operand)
BINARY = {
    "Add": (FLOATS + SIGNED + UNSIGNED, "any"),
    "Sub": (FLOATS + SIGNED + UNSIGNED, "any"),
    "Mul": (FLOATS + SIGNED + UNSIGNED, "any"),
    "Div": (FLOATS + SIGNED + UNSIGNED, "nonzero"),
    "Max": (FLOATS + SIGNED + UNSIGNED, "any"),
    "Min": (FLOATS + SIGNED + UNSIGNED, "any"),
    "Equal": (FLOATS + SIGNED + UNSIGNED + (BOOL,), "any"),
    "Less": (FLOATS + SIGNED + UNSIGNED, "any"),
    "LessOrEqual": (FLOATS + SIGNED + UNSIGNED, "any"),
    "Greater": (FLOATS + SIGNED + UNSIGNED, "any"),
    "GreaterOrEqual": (FLOATS + SIGNED + UNSIGNED, "any"),
    "And": ((BOOL,), "any"),
    "Or": ((BOOL,), "any"),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       seed=seeds, data=st.data())
def test_binary_op_broadcasts_like_onnxruntime(
    op: str, shapes: Any, seed: int, data: st.DataObject
) -> None:
    dtypes, domain = BINARY[op]
    dtype = data.draw(st.sampled_from(dtypes), label="dtype")
    rng = np.random.default_rng(seed)
    a = sample(rng, shapes.input_shapes[0], dtype)
    b = sample(rng, shapes.input_shapes[1], dtype, domain)
    if dtype.kind == "f" and op not in ("Add", "Sub", "Mul", "Div"):
        # Round to a coarse grid so that comparisons and max/min meet equal operands.
        a, b = np.asarray(np.round(a), dtype), np.asarray(np.round(b), dtype)
    inputs = {"a": a, "b": b}
    assert_matches(run_hetero(op, inputs), run_node(op, inputs)[0])


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4),
       seed=seeds, dtype=st.sampled_from(FLOATS))
def test_pow_matches_onnxruntime_for_positive_bases(shapes: Any, seed: int, dtype: np.dtype) -> None:
    rng = np.random.default_rng(seed)
    inputs = {"a": np.asarray(rng.uniform(0.1, 4, shapes.input_shapes[0]), dtype),
              "b": np.asarray(rng.uniform(-2, 2, shapes.input_shapes[1]), dtype)}
    assert_matches(run_hetero("Pow", inputs), run_node("Pow", inputs)[0])


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED)
def test_integer_div_truncates_toward_zero_like_onnxruntime(dtype: np.dtype) -> None:
    a = np.array([7, -7, 7, -7, 6, 0, -1, 1], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3, 5, 3, -3], dtype=np.int64)
    if dtype.kind == "u":
        a, b = np.abs(a), np.abs(b)
    inputs = {"a": a.astype(dtype), "b": b.astype(dtype)}
    result = run_hetero("Div", inputs)
    assert_matches(result, run_node("Div", inputs)[0])
    if dtype.kind == "i":
        np.testing.assert_array_equal(result, [3, -3, -3, 3, 2, 0, 0, 0])


def test_int64_div_is_exact_beyond_float64_precision() -> None:
    # 2**62 + 1 has no float64 representation: a division through floats is off by one.
    inputs = {"a": np.array([2**62 + 1, -(2**62 + 3)], np.int64), "b": np.array([1, 1], np.int64)}
    assert_matches(run_hetero("Div", inputs), run_node("Div", inputs)[0])
    np.testing.assert_array_equal(run_hetero("Div", inputs), inputs["a"])


@SETTINGS
@given(shape=shapes, seed=seeds, alpha=st.floats(-2, 2, width=32))
def test_leaky_relu_alpha_matches_onnxruntime(shape: tuple[int, ...], seed: int, alpha: float) -> None:
    x = sample(np.random.default_rng(seed), shape, F32)
    assert_matches(run_hetero("LeakyRelu", {"x": x}, alpha=alpha),
                   run_node("LeakyRelu", {"x": x}, alpha=alpha)[0])


@SETTINGS
@given(shape=shapes, seed=seeds, alpha=st.floats(0.0625, 1, width=32), beta=st.floats(-1, 1, width=32))
def test_hard_sigmoid_alpha_beta_match_onnxruntime(
    shape: tuple[int, ...], seed: int, alpha: float, beta: float
) -> None:
    x = sample(np.random.default_rng(seed), shape, F32)
    assert_matches(run_hetero("HardSigmoid", {"x": x}, alpha=alpha, beta=beta),
                   run_node("HardSigmoid", {"x": x}, alpha=alpha, beta=beta)[0])


@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_gelu_approximations_match_onnxruntime(approximate: str, dtype: np.dtype) -> None:
    x = np.linspace(-6, 6, 241).astype(dtype)
    expected = run_node("Gelu", {"x": x}, opset=20, approximate=approximate)[0]
    assert_matches(run_hetero("Gelu", {"x": x}, approximate=approximate), expected)


def test_gelu_approximations_differ() -> None:
    # Guards the test above against comparing one formula with itself.
    x = np.array([1.5], F32)
    exact, tanh = (run_hetero("Gelu", {"x": x}, approximate=a) for a in ("none", "tanh"))
    assert abs(float(exact[0]) - float(tanh[0])) > 1e-5


@SETTINGS
@given(shape=shapes, seed=seeds, dtype=st.sampled_from(FLOATS + SIGNED + UNSIGNED),
       low=st.none() | st.integers(-10, 5), high=st.none() | st.integers(0, 10))
def test_clip_min_max_match_onnxruntime(
    shape: tuple[int, ...], seed: int, dtype: np.dtype, low: int | None, high: int | None
) -> None:
    if dtype.kind == "u" and low is not None:
        low = abs(low)
    x = sample(np.random.default_rng(seed), shape, dtype)
    attrs = {k: float(v) for k, v in (("min", low), ("max", high)) if v is not None}
    bounds = {"min": None if low is None else np.array(low, dtype),
              "max": None if high is None else np.array(high, dtype)}
    expected = run_node("Clip", {"x": x, **bounds}, constant_inputs=("min", "max"))[0]
    assert_matches(run_hetero("Clip", {"x": x}, **attrs), expected)


def test_clip_keeps_int64_values_beyond_float64_precision() -> None:
    x = np.array([2**62 + 1, -(2**62 + 1), 5], np.int64)
    result = run_hetero("Clip", {"x": x}, min=-(2.0**63), max=2.0**62 + 4096)
    np.testing.assert_array_equal(result, x)


CAST_DTYPES = (F32, F16, F64, np.dtype(np.int8), np.dtype(np.int32), np.dtype(np.int64),
               np.dtype(np.uint8), BOOL)


@SETTINGS
@given(shape=shapes, seed=seeds, source=st.sampled_from(CAST_DTYPES),
       target=st.sampled_from(CAST_DTYPES))
def test_cast_between_dtypes_matches_onnxruntime(
    shape: tuple[int, ...], seed: int, source: np.dtype, target: np.dtype
) -> None:
    rng = np.random.default_rng(seed)
    if source == BOOL:
        x = np.asarray(rng.random(shape) < 0.5)
    else:
        # Values every target holds: casting out of range is undefined behaviour in C,
        # so onnxruntime's result would not be a fair oracle there.
        values = rng.uniform(0 if target.kind == "u" or source.kind == "u" else -100, 100, shape)
        x = np.asarray(values if source.kind == "f" else np.trunc(values), source)
    expected = run_node("Cast", {"x": x}, to=helper.np_dtype_to_tensor_dtype(target))[0]
    assert_matches(run_hetero("Cast", {"x": x}, to=target), expected)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, max_dims=4, max_side=4),
       seed=seeds, dtype=st.sampled_from(FLOATS + SIGNED + (np.dtype(np.uint8),)))
def test_where_broadcasts_all_three_operands_like_onnxruntime(
    shapes: Any, seed: int, dtype: np.dtype
) -> None:
    rng = np.random.default_rng(seed)
    cond_shape, x_shape, y_shape = shapes.input_shapes
    inputs = {"c": np.asarray(rng.random(cond_shape) < 0.5), "x": sample(rng, x_shape, dtype),
              "y": sample(rng, y_shape, dtype)}
    assert_matches(run_hetero("Where", inputs), run_node("Where", inputs)[0])


def test_dropout_is_the_identity() -> None:
    x = np.random.default_rng(0).normal(size=(2, 3)).astype(F32)
    np.testing.assert_array_equal(run_hetero("Dropout", {"x": x}), x)
    assert get_op("Dropout").outputs == ("Y",)


# -- inference errors ------------------------------------------------------------------
def test_float_only_op_rejects_integers_naming_node_and_dtype() -> None:
    b = GraphBuilder()
    x = b.input("x", (2,), "int32")
    with pytest.raises(ShapeError, match=r"node sqrt \(Sqrt\): Sqrt input must be one of .* got int32"):
        b.Sqrt(x)


def test_binary_op_rejects_mixed_dtypes() -> None:
    b = GraphBuilder()
    with pytest.raises(ShapeError, match=r"\(Add\): Add inputs must share one dtype.*float32.*int64"):
        b.Add(b.input("a", (2,), "float32"), b.input("b", (2,), "int64"))


def test_binary_op_rejects_shapes_that_do_not_broadcast() -> None:
    b = GraphBuilder()
    with pytest.raises(ShapeError, match=r"\(Mul\): shapes \[2, 3\] and \[4\] do not broadcast"):
        b.Mul(b.input("a", (2, 3)), b.input("b", (4,)))


def test_where_needs_a_bool_condition() -> None:
    b = GraphBuilder()
    with pytest.raises(ShapeError, match=r"Where condition must be one of \['bool'\], got float32"):
        b.Where(b.input("c", (2,)), b.input("x", (2,)), b.input("y", (2,)))


def test_misspelt_attribute_is_named_with_a_suggestion() -> None:
    b = GraphBuilder()
    with pytest.raises(OpAttributeError, match=r"LeakyRelu has no attribute 'alhpa' \(did you mean 'alpha'\?\)"):
        b.LeakyRelu(b.input("x", (2,)), alhpa=0.2)


def test_cast_needs_its_target_dtype() -> None:
    b = GraphBuilder()
    with pytest.raises(OpAttributeError, match=r"Cast needs attribute 'to'"):
        b.Cast(b.input("x", (2,)))


def test_gelu_rejects_an_unknown_approximation() -> None:
    b = GraphBuilder()
    with pytest.raises(OpAttributeError, match=r"\(Gelu\): Gelu approximate must be 'none' or 'tanh', got 'erf'"):
        b.Gelu(b.input("x", (2,)), approximate="erf")


def test_flops_count_one_per_output_element_and_none_for_cast() -> None:
    a, b = TensorType((4, 1), "float32"), TensorType((3,), "float32")
    out = TensorType((4, 3), "float32")
    assert get_op("Add").flops([a, b], [out], {}) == 12
    assert get_op("Cast").flops([a], [TensorType((4, 1), "int32")], {"to": np.dtype(np.int32)}) == 0
