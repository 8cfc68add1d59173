"""The tensor-manipulation ops against onnxruntime, their canonical forms and their errors.

These ops only move data, so every result must equal onnxruntime's exactly.
ONNX's static operands (Reshape's shape, Slice's starts, ...) go to onnxruntime as
constant inputs and to hetero as attributes.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp
import numpy as np
from onnx import numpy_helper
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Node
from hetero.core.ir.opdef import get_op
from hetero.core.ir.types import TensorType
from hetero.errors import InputError, OpAttributeError, ShapeError
from oracle import run_node

SETTINGS = settings(max_examples=40, deadline=None)
INT64_MAX, INT64_MIN, INT32_MAX = 2**63 - 1, -(2**63), 2**31 - 1
DTYPES = tuple(np.dtype(d) for d in ("float32", "float16", "int32", "int64", "bool"))

dtypes = st.sampled_from(DTYPES)
seeds = st.integers(0, 2**32 - 1)


def sample(seed: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Distinct-looking random values, so that a misplaced element shows."""
    rng = np.random.default_rng(seed)
    if dtype == np.dtype(bool):
        return np.asarray(rng.random(shape) < 0.5)
    return np.asarray(rng.integers(-1000, 1000, shape), dtype)


def run_hetero(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> tuple[list[np.ndarray], Node]:
    """The reference executor's outputs for one ``op`` node, and the (completed) node."""
    b = GraphBuilder(op.lower())
    args = [b.input(name, a.shape, a.dtype) for name, a in inputs.items()]
    result = b.op(op, *args, **attrs)
    outputs = result if isinstance(result, tuple) else (result,)
    b.output(*outputs)
    graph = b.build()
    values = run_reference(graph, inputs)
    return [values[v.name] for v in outputs], graph.nodes[-1]


def assert_same(actual: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, (a.dtype, a.shape, e.dtype, e.shape)
        np.testing.assert_array_equal(a, e)


def assert_complete_is_idempotent(node: Node) -> None:
    opdef = get_op(node.op)
    again = opdef.complete(node.input_types(), dict(node.attrs))
    assert again == node.attrs


def signed(draw: st.DrawFn, axis: int, rank: int) -> int:
    """``axis`` or its negative spelling, as hypothesis chooses."""
    return axis - rank if draw(st.booleans()) else axis


def as_i64(values: Any) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# -- Reshape, Flatten, Transpose ------------------------------------------------------
@st.composite
def reshape_cases(draw: st.DrawFn) -> tuple[tuple[int, ...], list[int], tuple[int, ...]]:
    """An input shape, an ONNX shape operand (with 0 and -1) and its resolved target."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4))
    remaining, target = math.prod(shape), []
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.sampled_from([k for k in range(1, remaining + 1) if remaining % k == 0]))
        target.append(k)
        remaining //= k
    target = draw(st.permutations(target + [remaining]))
    spec = list(target)
    if draw(st.booleans()):
        spec[draw(st.integers(0, len(spec) - 1))] = -1
    for i in range(min(len(spec), len(shape))):
        if spec[i] == shape[i] and draw(st.booleans()):
            spec[i] = 0
    return shape, spec, tuple(target)


def resolve_onnx_shape(spec: list[int], shape: tuple[int, ...]) -> tuple[int, ...]:
    """ONNX Reshape's rules: 0 copies the input dim, -1 takes what is left."""
    dims = [shape[i] if d == 0 else d for i, d in enumerate(spec)]
    if -1 in dims:
        dims[dims.index(-1)] = math.prod(shape) // math.prod(d for d in dims if d != -1)
    return tuple(dims)


@SETTINGS
@given(case=reshape_cases(), dtype=dtypes, seed=seeds)
def test_reshape_matches_onnxruntime(case: Any, dtype: np.dtype, seed: int) -> None:
    shape, spec, target = case
    assert resolve_onnx_shape(spec, shape) == target
    x = sample(seed, shape, dtype)
    expected = run_node("Reshape", {"x": x, "s": as_i64(spec)}, constant_inputs=("s",))
    outs, node = run_hetero("Reshape", {"x": x}, shape=target)
    assert_same(outs, expected)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, max_side=4), dtype=dtypes, seed=seeds,
       data=st.data())
def test_flatten_matches_onnxruntime_and_makes_axis_non_negative(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, data: st.DataObject
) -> None:
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank), label="axis")
    x = sample(seed, shape, dtype)
    outs, node = run_hetero("Flatten", {"x": x}, axis=axis)
    assert_same(outs, run_node("Flatten", {"x": x}, axis=axis))
    assert node.attrs["axis"] == (axis + rank if axis < 0 else axis)
    assert_complete_is_idempotent(node)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=5, max_side=4), dtype=dtypes, seed=seeds,
       data=st.data())
def test_transpose_matches_onnxruntime_with_and_without_perm(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, data: st.DataObject
) -> None:
    perm = data.draw(st.none() | st.permutations(range(len(shape))), label="perm")
    x = sample(seed, shape, dtype)
    attrs = {} if not perm else {"perm": perm}  # onnx cannot write an empty perm for rank 0
    outs, node = run_hetero("Transpose", {"x": x}, **attrs)
    assert_same(outs, run_node("Transpose", {"x": x}, **attrs))
    assert node.attrs["perm"] == (tuple(reversed(range(len(shape)))) if perm is None else tuple(perm))


# -- Concat, Split ------------------------------------------------------------------
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4), dtype=dtypes, seed=seeds,
       data=st.data())
def test_concat_matches_onnxruntime(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, data: st.DataObject
) -> None:
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    sizes = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label="sizes")
    inputs = {}
    for i, n in enumerate(sizes):
        piece = list(shape)
        piece[axis] = n
        inputs[f"x{i}"] = sample(seed + i, tuple(piece), dtype)
    outs, node = run_hetero("Concat", inputs, axis=axis)
    assert_same(outs, run_node("Concat", inputs, axis=axis))
    assert node.attrs["axis"] == axis % rank


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=6), dtype=dtypes, seed=seeds,
       data=st.data())
def test_split_matches_onnxruntime(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, data: st.DataObject
) -> None:
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    dim, split = shape[axis], []
    while sum(split) < dim:
        split.append(data.draw(st.integers(1, dim - sum(split)), label="size"))
    x = sample(seed, shape, dtype)
    expected = run_node("Split", {"x": x, "split": as_i64(split)}, n_outputs=len(split),
                        constant_inputs=("split",), axis=axis)
    outs, node = run_hetero("Split", {"x": x}, axis=axis, split=split)
    assert_same(outs, expected)
    assert node.attrs["axis"] == axis % rank


# -- Slice, Gather ------------------------------------------------------------------
@st.composite
def slice_cases(draw: st.DrawFn) -> tuple[tuple[int, ...], dict[str, list[int]]]:
    """A shape and raw ONNX Slice operands: negative and out-of-range indices, INT64 ends."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6))
    rank = len(shape)
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    operands: dict[str, list[int]] = {"starts": [], "ends": [], "axes": [], "steps": []}
    for a in axes:
        index = st.integers(-shape[a] - 3, shape[a] + 3) | st.sampled_from([INT64_MAX, INT64_MIN,
                                                                           INT32_MAX])
        operands["starts"].append(draw(index))
        operands["ends"].append(draw(index))
        operands["axes"].append(signed(draw, a, rank))
        operands["steps"].append(draw(st.integers(-3, 3).filter(bool)))
    return shape, operands


def slice_oracle(x: np.ndarray, operands: dict[str, list[int]]) -> list[np.ndarray]:
    """onnxruntime's Slice, with the one spelling where it departs from the ONNX spec rewritten.

    onnxruntime reads an end of INT32_MAX or INT64_MAX as "to the end" even when
    stepping backwards; the spec clamps it to dim - 1 (an empty slice), and so does
    onnx's shape inference. hetero follows the spec, so the oracle is asked for the
    spec's clamped end instead.
    """
    ends = [x.shape[a] - 1 if e in (INT32_MAX, INT64_MAX) and step < 0 and x.shape[a] else e
            for a, e, step in zip(operands["axes"], operands["ends"], operands["steps"])]
    consts = {k: as_i64(v) for k, v in {**operands, "ends": ends}.items()}
    return run_node("Slice", {"x": x, **consts}, constant_inputs=tuple(consts))


def test_slice_follows_the_spec_where_onnxruntime_reads_int_max_as_none() -> None:
    x = np.arange(5, dtype=np.float32)
    operands = dict(starts=[3], ends=[INT64_MAX], axes=[0], steps=[-1])
    outs, _ = run_hetero("Slice", {"x": x}, **operands)
    assert outs[0].shape == (0,)
    assert_same(outs, slice_oracle(x, operands))


@SETTINGS
@given(case=slice_cases(), dtype=dtypes, seed=seeds)
def test_slice_of_raw_onnx_operands_matches_onnxruntime(case: Any, dtype: np.dtype, seed: int) -> None:
    shape, operands = case
    x = sample(seed, shape, dtype)
    expected = slice_oracle(x, operands)
    outs, node = run_hetero("Slice", {"x": x}, **operands)
    assert_same(outs, expected)
    axes = node.attrs["axes"]
    assert list(axes) == sorted(set(axes)) and all(0 <= a < len(shape) for a in axes)
    assert_complete_is_idempotent(node)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        # reverse everything: ONNX's INT64_MIN end becomes "past the beginning", -(dim + 1)
        (dict(starts=[-1], ends=[INT64_MIN], axes=[0], steps=[-1]),
         dict(starts=(4,), ends=(-6,), axes=(0,), steps=(-1,))),
        # a raw -1 end with a negative step is index dim - 1: an empty slice
        (dict(starts=[4], ends=[-1], axes=[0], steps=[-1]),
         dict(starts=(4,), ends=(4,), axes=(0,), steps=(-1,))),
        (dict(starts=[-3, 1], ends=[INT64_MAX, 9], axes=[-1, 0], steps=[2, 1]),
         dict(starts=(1, 2), ends=(5, 5), axes=(0, 1), steps=(1, 2))),
    ],
)
def test_slice_complete_writes_the_documented_canonical_form(
    raw: dict[str, list[int]], canonical: dict[str, tuple[int, ...]]
) -> None:
    shape = (5,) * len(raw["axes"])
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    outs, node = run_hetero("Slice", {"x": x}, **raw)
    assert node.attrs == canonical
    consts = {k: as_i64(v) for k, v in raw.items()}
    assert_same(outs, run_node("Slice", {"x": x, **consts}, constant_inputs=tuple(consts)))
    index = [slice(None)] * len(shape)
    for a, s, e, st_ in zip(*(canonical[k] for k in ("axes", "starts", "ends", "steps"))):
        index[a] = slice(s, e, st_)
    np.testing.assert_array_equal(outs[0], x[tuple(index)])  # canonical values are Python slices


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), dtype=dtypes, seed=seeds,
       index_dtype=st.sampled_from([np.int32, np.int64]), data=st.data())
def test_gather_with_negative_indices_matches_onnxruntime(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, index_dtype: type, data: st.DataObject
) -> None:
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1), label="axis")
    dim = shape[axis]
    index_shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, max_side=3), label="indices")
    indices = np.asarray(np.random.default_rng(seed).integers(-dim, dim, index_shape), index_dtype)
    inputs = {"x": sample(seed, shape, dtype), "i": indices}
    outs, node = run_hetero("Gather", inputs, axis=axis)
    assert_same(outs, run_node("Gather", inputs, axis=axis))
    assert node.attrs["axis"] == axis % rank


def test_gather_index_out_of_range_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"Gather index 3 is out of range for axis 0 of size 3"):
        run_hetero("Gather", {"x": np.zeros(3, np.float32), "i": np.array([0, 3], np.int64)})
    with pytest.raises(InputError, match=r"index -4 .* must lie in \[-3, 3\)"):
        run_hetero("Gather", {"x": np.zeros(3, np.float32), "i": np.array([-4], np.int64)})


# -- Unsqueeze, Squeeze, Expand -------------------------------------------------------
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), dtype=dtypes, seed=seeds,
       data=st.data())
def test_unsqueeze_matches_onnxruntime_and_sorts_axes(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, data: st.DataObject
) -> None:
    n = data.draw(st.integers(1, 3), label="new dims")
    out_rank = len(shape) + n
    picked = data.draw(st.lists(st.integers(0, out_rank - 1), min_size=n, max_size=n, unique=True))
    axes = [data.draw(st.sampled_from([a, a - out_rank])) for a in picked]
    x = sample(seed, shape, dtype)
    outs, node = run_hetero("Unsqueeze", {"x": x}, axes=axes)
    assert_same(outs, run_node("Unsqueeze", {"x": x, "a": as_i64(axes)}, constant_inputs=("a",)))
    assert node.attrs["axes"] == tuple(sorted(picked))


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, max_side=2), dtype=dtypes, seed=seeds,
       data=st.data())
def test_squeeze_matches_onnxruntime_with_and_without_axes(
    shape: tuple[int, ...], dtype: np.dtype, seed: int, data: st.DataObject
) -> None:
    ones = [i for i, d in enumerate(shape) if d == 1]
    picked = data.draw(st.none() | st.lists(st.sampled_from(ones), min_size=1, unique=True)
                       if ones else st.none(), label="axes")
    x = sample(seed, shape, dtype)
    if picked is None:
        outs, node = run_hetero("Squeeze", {"x": x})
        expected = run_node("Squeeze", {"x": x})
        assert node.attrs["axes"] == tuple(ones)
    else:
        axes = [data.draw(st.sampled_from([a, a - len(shape)])) for a in picked]
        outs, node = run_hetero("Squeeze", {"x": x}, axes=axes)
        expected = run_node("Squeeze", {"x": x, "a": as_i64(axes)}, constant_inputs=("a",))
        assert node.attrs["axes"] == tuple(sorted(picked))
    assert_same(outs, expected)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       dtype=dtypes, seed=seeds)
def test_expand_matches_onnxruntime(shapes: Any, dtype: np.dtype, seed: int) -> None:
    in_shape, target = shapes.input_shapes
    x = sample(seed, in_shape, dtype)
    outs, _ = run_hetero("Expand", {"x": x}, shape=target)
    assert_same(outs, run_node("Expand", {"x": x, "s": as_i64(target)}, constant_inputs=("s",)))
    assert outs[0].shape == shapes.result_shape


# -- Shape, ConstantOfShape -----------------------------------------------------------
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, max_side=5), dtype=dtypes, data=st.data())
def test_shape_matches_onnxruntime_and_folds_from_the_type(
    shape: tuple[int, ...], dtype: np.dtype, data: st.DataObject
) -> None:
    rank = len(shape)
    bounds = st.none() | st.integers(-rank - 2, rank + 2)
    attrs = {k: v for k in ("start", "end") if (v := data.draw(bounds, label=k)) is not None}
    x = np.zeros(shape, dtype)
    outs, node = run_hetero("Shape", {"x": x}, **attrs)
    assert_same(outs, run_node("Shape", {"x": x}, **attrs))
    assert 0 <= node.attrs["start"] <= rank and 0 <= node.attrs["end"] <= rank
    assert_complete_is_idempotent(node)
    assert_same(get_op("Shape").fold([TensorType(shape, dtype)], node.attrs), outs)


@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
       dtype=st.sampled_from(DTYPES + (np.dtype(np.float64),)), seed=seeds)
def test_constant_of_shape_matches_onnxruntime(shape: tuple[int, ...], dtype: np.dtype, seed: int) -> None:
    value = sample(seed, (1,), dtype)
    b = GraphBuilder()
    b.output(b.ConstantOfShape(shape=shape, value=value))
    graph = b.build()
    result = run_reference(graph, {})[graph.outputs[0].name]
    expected = run_node("ConstantOfShape", {"s": as_i64(shape)}, constant_inputs=("s",),
                        value=numpy_helper.from_array(value))
    assert_same([result], expected)


def test_constant_of_shape_defaults_to_float32_zeros() -> None:
    b = GraphBuilder()
    b.output(b.ConstantOfShape(shape=(2, 3)))
    graph = b.build()
    assert_same([run_reference(graph, {})[graph.outputs[0].name]], [np.zeros((2, 3), np.float32)])


# -- errors ---------------------------------------------------------------------------
def build(op: str, shapes: list[tuple[int, ...]], dtype: str = "float32", **attrs: Any) -> Node:
    b = GraphBuilder()
    values = [b.input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    return b.graph.add_node(op, values, attrs, name="n")


@pytest.mark.parametrize(
    ("op", "shapes", "attrs", "error", "message"),
    [
        ("Reshape", [(2, 3)], dict(shape=[4, 2]), ShapeError,
         r"node n \(Reshape\): cannot reshape f32\[2,3\] \(6 elements\) to \[4, 2\] \(8 elements\)"),
        ("Reshape", [(2, 3)], dict(shape=[2, 0]), ShapeError, r"resolve ONNX's copy-this-dim 0"),
        ("Reshape", [(2, 3)], dict(shape=[-1, 3]), OpAttributeError,
         r"Reshape shape \[-1, 3\] has a negative entry"),
        ("Flatten", [(2, 3)], dict(axis=3), ShapeError, r"Flatten axis 3 is out of range for rank 2"),
        ("Transpose", [(2, 3)], dict(perm=[0, 0]), ShapeError, r"perm \[0, 0\] is not a permutation"),
        ("Concat", [(2, 3), (2, 4)], dict(axis=0), ShapeError,
         r"input 1 has shape \[2, 4\] but input 0 has \[2, 3\]: every dimension except axis 0"),
        ("Concat", [(2, 3), (2, 3, 1)], dict(axis=1), ShapeError, r"input 1 has shape \[2, 3, 1\]"),
        ("Concat", [(2, 3)], dict(axis=2), ShapeError, r"Concat axis 2 is out of range for rank 2"),
        ("Split", [(2, 6)], dict(axis=-1, split=[2, 3]), ShapeError,
         r"split sizes \[2, 3\] sum to 5 but axis 1 of f32\[2,6\] has 6"),
        ("Split", [(2, 6)], dict(axis=1, split=[7, -1]), OpAttributeError, r"negative entry"),
        ("Slice", [(4,)], dict(starts=[0], ends=[1, 2], axes=[0], steps=[1]), OpAttributeError,
         r"node n \(Slice\): Slice's starts, ends, axes and steps must have one length"),
        ("Slice", [(4,)], dict(starts=[0], ends=[1], axes=[0], steps=[0]), OpAttributeError,
         r"steps \[0\] contain 0"),
        ("Slice", [(4, 4)], dict(starts=[0, 0], ends=[1, 1], axes=[1, -1], steps=[1, 1]), ShapeError,
         r"Slice axes \[1, -1\] name an axis twice"),
        ("Slice", [(4,)], dict(starts=[0], ends=[1], axes=[1], steps=[1]), ShapeError,
         r"Slice axis 1 is out of range for rank 1"),
        ("Unsqueeze", [(2,)], dict(axes=[1, -2]), ShapeError, r"Unsqueeze axes \[1, -2\] name an axis twice"),
        ("Unsqueeze", [(2,)], dict(axes=[2]), ShapeError, r"out of range for rank 2"),
        ("Squeeze", [(1, 3)], dict(axes=[1]), ShapeError,
         r"cannot squeeze axis 1 of f32\[1,3\]: its size is 3, not 1"),
        ("Expand", [(2, 3)], dict(shape=[4, 1]), ShapeError, r"cannot expand f32\[2,3\] to shape \[4, 1\]"),
        ("Expand", [(2, 3)], dict(shape=[-1, 3]), OpAttributeError, r"Expand shape \[-1, 3\]"),
        ("Gather", [(2, 3), (2,)], dict(axis=-3), ShapeError, r"Gather axis -3 is out of range for rank 2"),
        ("Gather", [(2, 3), (2,)], dict(axis=0), ShapeError,
         r"Gather indices must be one of \['int32', 'int64'\], got float32"),
    ],
)
def test_bad_operands_raise_errors_naming_node_and_problem(
    op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        build(op, shapes, **attrs)


def test_concat_rejects_mixed_dtypes_and_no_inputs() -> None:
    b = GraphBuilder()
    a, c = b.input("a", (2,), "float32"), b.input("c", (2,), "int64")
    with pytest.raises(ShapeError, match=r"Concat inputs must share one dtype"):
        b.Concat(a, c, axis=0)
    with pytest.raises(ShapeError, match=r"Concat needs at least one input"):
        b.Concat(axis=0)


def test_constant_of_shape_value_must_have_one_element() -> None:
    b = GraphBuilder()
    with pytest.raises(OpAttributeError, match=r"ConstantOfShape value must hold one element, got shape \[2\]"):
        b.ConstantOfShape(shape=[2], value=np.zeros(2, np.float32))


def test_required_attribute_is_named() -> None:
    with pytest.raises(OpAttributeError, match=r"Slice needs attribute 'axes'"):
        build("Slice", [(4,)], starts=[0], ends=[1], steps=[1])


@pytest.mark.parametrize("op", ["Reshape", "Flatten", "Transpose", "Concat", "Split", "Slice", "Gather",
                                "Unsqueeze", "Squeeze", "Expand", "Shape", "ConstantOfShape"])
def test_tensor_ops_count_no_flops(op: str) -> None:
    t = TensorType((2, 3), "float32")
    assert get_op(op).flops([t], [t], {}) == 0


@pytest.mark.parametrize("shape", [(), (0,), (2, 3, 4)])
def test_size_matches_onnxruntime_and_folds_from_the_type(shape: tuple[int, ...]) -> None:
    x = np.zeros(shape, np.float32)
    (ours,), node = run_hetero("Size", {"x": x})
    (theirs,) = run_node("Size", {"x": x})
    assert ours.dtype == np.int64 and ours.shape == () and ours == theirs
    assert node.opdef.fold([node.inputs[0].type], node.attrs)[0] == theirs
