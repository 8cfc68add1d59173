"""Tensor-manipulation lowerings against each op's reference: data movement is exact.

Attributes are given in ONNX's raw form (negative axes and indices, INT64 end
markers) so that the lowering is exercised on what the op's ``complete`` makes of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lowercheck import lowered_and_reference, run_lowered

from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder, as_dtype
from hetero.core.ir.tir import verify_func
from hetero.core.lower import lower_node

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.5
INT64_MAX = np.iinfo(np.int64).max


def assert_equal(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected)


ONE_INPUT: list[tuple[str, np.ndarray, dict[str, Any]]] = [
    ("Reshape", X, {"shape": (4, 6)}),
    ("Reshape", X, {"shape": (24,)}),
    ("Reshape", X.reshape(6, 4), {"shape": (2, 2, 3, 2)}),
    ("Flatten", X, {"axis": 2}),
    ("Flatten", X, {"axis": 0}),
    ("Flatten", X, {"axis": -1}),
    ("Transpose", X, {"perm": (2, 0, 1)}),
    ("Transpose", X, {}),
    ("Squeeze", X.reshape(2, 1, 12), {"axes": (1,)}),
    ("Squeeze", X.reshape(1, 24, 1), {}),
    ("Unsqueeze", X[0], {"axes": (0, -1)}),
    ("Expand", X[0, :, :1], {"shape": (2, 3, 4)}),
    ("Expand", X[0, :1, :], {"shape": (3, 1)}),
    ("Slice", X, {"starts": (1, -1), "ends": (INT64_MAX, -INT64_MAX), "axes": (1, 2),
                  "steps": (1, -2)}),
    ("Slice", X, {"starts": (0,), "ends": (4,), "axes": (-1,), "steps": (3,)}),
    ("Slice", X, {"starts": (-2, 5), "ends": (-5, -10), "axes": (1, 2), "steps": (-1, -1)}),
    ("Shape", X, {}),
    ("Shape", X, {"start": 1, "end": -1}),
    ("Identity", np.arange(6, dtype=np.int64).reshape(2, 3), {}),
]


@pytest.mark.parametrize(("op", "x", "attrs"), ONE_INPUT,
                         ids=[f"{op}-{i}" for i, (op, _, _) in enumerate(ONE_INPUT)])
def test_data_movement_equals_its_reference(op: str, x: np.ndarray, attrs: dict[str, Any]) -> None:
    assert_equal(*lowered_and_reference(op, {"x": x}, **attrs))


def test_integer_and_boolean_data_move_exactly() -> None:
    data = np.arange(12, dtype=np.int8).reshape(3, 4) * 21
    assert_equal(*lowered_and_reference("Transpose", {"x": data}))
    assert_equal(*lowered_and_reference("Reshape", {"x": data > 60}, shape=(2, 6)))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat_joins_inputs_of_different_extents(axis: int) -> None:
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    sizes = (1, 3, 2)
    parts = {}
    for k, size in enumerate(sizes):
        shape = list(shapes[k])
        shape[axis] = size
        parts[f"x{k}"] = np.arange(np.prod(shape), dtype=np.int32).reshape(shape) + 100 * k
    assert_equal(*lowered_and_reference("Concat", parts, axis=axis))


def test_concat_skips_an_empty_input() -> None:
    parts = {"a": X[:, :1], "e": np.zeros((2, 0, 4), np.float32), "b": X[:, 1:]}
    assert_equal(*lowered_and_reference("Concat", parts, axis=1))


def test_concat_reads_a_constant_input_as_a_parameter() -> None:
    parts = {"a": X, "b": -X}
    assert_equal(*lowered_and_reference("Concat", parts, constants=("b",), axis=2))


def test_split_writes_every_output() -> None:
    b = GraphBuilder("split")
    outs = b.Split(b.input("x", X.shape), axis=-1, split=(1, 3))
    b.output(*outs)
    graph = b.build()
    expected = run_reference(graph, {"x": X})
    node = graph.nodes[0]
    outputs = run_lowered(verify_func(lower_node(node)), node, {"x": X})
    assert len(outputs) == 2
    for actual, value in zip(outputs, outs):
        assert_equal(actual, expected[value.name])


@pytest.mark.parametrize(("axis", "indices"), [
    (1, np.array([[2, -1], [0, -3]], np.int64)),
    (0, np.array(-1, np.int32)),
    (-1, np.array([3, 0, -4, 1], np.int32)),
])
def test_gather_wraps_negative_indices(axis: int, indices: np.ndarray) -> None:
    assert_equal(*lowered_and_reference("Gather", {"x": X, "i": indices}, constants=("i",), axis=axis))


def test_gather_with_indices_as_a_runtime_input() -> None:
    indices = np.array([-2, 1, 0], np.int64)
    assert_equal(*lowered_and_reference("Gather", {"x": X, "i": indices}, axis=1))


@pytest.mark.parametrize("value", [None, np.array([7], np.int64), np.array([True]),
                                   np.array([-2.5], np.float16)])
def test_constant_of_shape_fills_with_its_value(value: np.ndarray | None) -> None:
    attrs = {} if value is None else {"value": value}
    assert_equal(*lowered_and_reference("ConstantOfShape", {}, shape=(2, 3), **attrs))


#: Signalling and quiet NaNs with payloads, infinities, subnormals and both zeros, as bits.
_SPECIAL_BITS = {
    "float16": np.array([0x7C01, 0xFE01, 0x7C00, 0x0001, 0x8000, 0x3C00], np.uint16),
    "float32": np.array([0x7F800001, 0xFFC00123, 0x7F800000, 0x00000001, 0x80000000], np.uint32),
    "float64": np.array([0x7FF0000000000001, 0xFFF8000000000123, 0x1, 0x8000000000000000],
                        np.uint64),
    # bfloat16 is a float in registers: its bits travel in the upper half and must come back.
    "bfloat16": np.array([0x7F81, 0xFFC1, 0x7F80, 0x0001, 0x8000, 0x3F80], np.uint16),
    "float8_e4m3fn": np.array([0x7F, 0xFF, 0x01, 0x80, 0x38], np.uint8),
}


@pytest.mark.parametrize("dtype", sorted(_SPECIAL_BITS))
def test_bitcast_keeps_every_bit_of_nans_and_subnormals(dtype: str) -> None:
    """float -> int on the interpreter and compiled, and int -> float -> int compiled as one
    fused group: a signalling NaN must not be quieted on the way (no float arithmetic)."""
    import hetero

    bits = _SPECIAL_BITS[dtype]
    floats = bits.view(as_dtype(dtype))
    got, want = lowered_and_reference("BitCast", {"x": floats}, to=bits.dtype)
    assert_equal(got, bits)
    assert_equal(want, bits)
    b = GraphBuilder("roundtrip")
    x = b.input("x", bits.shape, bits.dtype)
    f = b.op("BitCast", x, to=dtype)
    b.output(b.op("BitCast", f, to=bits.dtype), f)
    graph = b.build()
    outs = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run({"x": bits})
    assert_equal(outs[graph.outputs[0].name], bits)
    assert_equal(outs[graph.outputs[1].name].view(bits.dtype), bits)


def test_bitcast_refuses_other_widths_and_bytes_as_bools() -> None:
    from hetero.errors import ShapeError

    b = GraphBuilder("bad")
    x = b.input("x", (2,), "float32")
    with pytest.raises(ShapeError, match="same bit width"):
        b.op("BitCast", x, to="int64")
    with pytest.raises(ShapeError, match="no bool"):
        b.op("BitCast", b.input("y", (2,), "uint8"), to="bool")
