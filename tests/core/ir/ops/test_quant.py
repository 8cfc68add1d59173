"""QuantizeLinear and DequantizeLinear against onnxruntime: exact results, per tensor and per axis.

Quantised outputs are integers and must match exactly. Dequantised float32 outputs
must match exactly too: both sides form ``x - zero_point`` exactly (or round it once
to float32 for int32 input) and round one product. float16 runs need opset 19,
where the scale may be float16.
"""

from __future__ import annotations

import functools

from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from hetero.errors import ShapeError
from opcheck import reference
from oracle import run_node

#: Scales and zero points are constants, as the frontend makes them.
run_op = functools.partial(reference, constants=("scale", "zero", "s", "z"))


def oracle(op: str, inputs: dict[str, np.ndarray | None], dtype: type, **attrs: Any) -> np.ndarray:
    constants = tuple(inputs)[1:]
    opset = 19 if dtype == np.float16 else 18
    return run_node(op, inputs, opset=opset, constant_inputs=constants, **attrs)[0]


@st.composite
def quantisation(draw: st.DrawFn) -> dict[str, Any]:
    """An input shape, an axis (or None for per tensor) and the scale's shape."""
    shape = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    per_axis = bool(shape) and draw(st.booleans())
    axis = draw(st.integers(-len(shape), len(shape) - 1)) if per_axis else None
    if per_axis and shape[axis] == 1:
        axis = None  # a one-element scale is per tensor whatever its axis says
    scale_shape = (shape[axis],) if axis is not None else draw(st.sampled_from([(), (1,)]))
    return {"shape": tuple(shape), "axis": axis, "scale_shape": scale_shape}


def per_axis_view(param: np.ndarray, rank: int, axis: int | None) -> np.ndarray:
    if axis is None:
        return param.reshape(())
    shape = [1] * rank
    shape[axis] = -1
    return param.reshape(shape)


@settings(max_examples=50, deadline=None)
@given(q=quantisation(), zero_dtype=st.sampled_from([np.int8, np.uint8]),
       dtype=st.sampled_from([np.float32, np.float16]), ties=st.booleans(),
       seed=st.integers(0, 2**16))
def test_quantize_matches_onnxruntime_exactly(q: dict[str, Any], zero_dtype: type, dtype: type,
                                              ties: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(zero_dtype)
    zero = np.asarray(rng.integers(info.min, info.max, q["scale_shape"], endpoint=True), zero_dtype)
    if ties:  # power-of-two scales and half-integer quotients: every element is a tie
        scale = np.asarray(2.0 ** rng.integers(-3, 3, q["scale_shape"]), dtype)
        steps = rng.integers(-200, 200, q["shape"]) + 0.5
        x = np.asarray(steps * per_axis_view(scale, len(q["shape"]), q["axis"]), dtype)
    else:  # quotients up to +-400: many saturate
        scale = np.asarray(rng.uniform(0.01, 2, q["scale_shape"]), dtype)
        x = rng.uniform(-400, 400, q["shape"]) * per_axis_view(scale, len(q["shape"]), q["axis"])
        x = np.asarray(x, dtype)
    attrs = {} if q["axis"] is None else {"axis": q["axis"]}
    inputs = {"x": x, "scale": scale, "zero": zero}
    ours, node = run_op("QuantizeLinear", inputs, **attrs)
    theirs = oracle("QuantizeLinear", inputs, dtype, **attrs)
    assert ours.dtype == np.dtype(zero_dtype) and ours.shape == x.shape
    np.testing.assert_array_equal(ours, theirs)
    assert node.attrs["axis"] == (1 if q["axis"] is None else q["axis"] % len(q["shape"]))


@settings(max_examples=50, deadline=None)
@given(q=quantisation(), x_dtype=st.sampled_from([np.int8, np.uint8, np.int32]),
       with_zero=st.booleans(), dtype=st.sampled_from([np.float32, np.float16]),
       seed=st.integers(0, 2**16))
def test_dequantize_matches_onnxruntime_exactly(q: dict[str, Any], x_dtype: type, with_zero: bool,
                                                dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    info = np.iinfo(x_dtype)
    x = np.asarray(rng.integers(info.min, info.max, q["shape"], endpoint=True), x_dtype)
    if x_dtype == np.int32:  # ONNX: an int32 input has a zero point of 0
        zero = np.zeros(q["scale_shape"], x_dtype)
    else:
        zero = rng.integers(info.min, info.max, q["scale_shape"], endpoint=True)
        zero = np.asarray(zero, x_dtype)
    scale = np.asarray(rng.uniform(1e-3, 2, q["scale_shape"]), dtype)
    if x_dtype == np.int32 and dtype == np.float16:
        x = np.asarray(x // 2**20, x_dtype)  # keep int32 * scale within float16's range
    attrs = {} if q["axis"] is None else {"axis": q["axis"]}
    inputs = {"x": x, "scale": scale, "zero": zero if with_zero else None}
    ours, _ = run_op("DequantizeLinear", inputs, **attrs)
    theirs = oracle("DequantizeLinear", inputs, dtype, **attrs)
    assert ours.dtype == np.dtype(dtype) and ours.shape == x.shape
    np.testing.assert_array_equal(ours, theirs)


def test_quantize_rounds_half_to_even_and_saturates() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 300.0, -300.0], np.float32)
    ours, _ = run_op("QuantizeLinear", {"x": x, "s": np.float32(1.0), "z": np.int8(0)})
    np.testing.assert_array_equal(ours, [0, 2, 2, 0, -2, -2, 127, -128])
    ours, _ = run_op("QuantizeLinear", {"x": x, "s": np.float32(1.0), "z": np.uint8(10)})
    np.testing.assert_array_equal(ours, [10, 12, 12, 10, 8, 8, 255, 0])


def test_quantize_divides_in_float32_like_onnxruntime() -> None:
    # 0.35f / 0.1f rounds to exactly 3.5 in float32 (so 4), while the exact quotient is
    # 3.4999999 (so 3): the quotient must be taken in float32, as onnxruntime takes it.
    x = np.array([0.35, 0.45000002, 0.75, 0.85, 0.95], np.float32)
    inputs = {"x": x, "s": np.float32(0.1), "z": np.int8(0)}
    ours, _ = run_op("QuantizeLinear", inputs)
    np.testing.assert_array_equal(ours, [4, 4, 8, 8, 10])
    np.testing.assert_array_equal(ours, oracle("QuantizeLinear", inputs, np.float32))


def test_dequantize_per_axis_by_hand() -> None:
    x = np.array([[0, 10], [20, 30]], np.uint8)
    scale = np.array([0.5, 2.0], np.float32)
    zero = np.array([10, 20], np.uint8)
    ours, node = run_op("DequantizeLinear", {"x": x, "s": scale, "z": zero}, axis=-1)
    np.testing.assert_array_equal(ours, [[-5.0, -20.0], [5.0, 20.0]])
    assert node.attrs == {"axis": 1, "block_size": 0}
    ours, node = run_op("DequantizeLinear", {"x": x, "s": scale, "z": zero}, axis=0)
    np.testing.assert_array_equal(ours, [[-5.0, 0.0], [0.0, 20.0]])


def test_per_tensor_axis_is_stored_as_the_default() -> None:
    x = np.zeros((2, 3), np.float32)
    for axis in (0, -1, 5):
        _, node = run_op("QuantizeLinear", {"x": x, "s": np.float32(1), "z": np.int8(0)},
                            axis=axis)
        assert node.attrs == {"axis": 1, "saturate": 1, "block_size": 0}


@pytest.mark.parametrize("op, x, scale, zero, attrs, message", [
    ("QuantizeLinear", np.zeros((2, 3), np.float32), np.ones(3, np.float32), np.zeros(3, np.int8),
     {"axis": 0}, r"per-axis scale f32\[3\] needs one entry per slice of axis 0 of f32\[2,3\]"),
    ("QuantizeLinear", np.zeros((2, 3), np.float32), np.ones(3, np.float32), np.zeros(2, np.int8),
     {}, r"zero point i8\[2\] must have the scale's shape \[3\]"),
    ("QuantizeLinear", np.zeros(3, np.float32), np.float32(1), np.int32(0), {},
     r"y_zero_point must be one of \['int8', 'uint8', .*\], got int32"),
    ("QuantizeLinear", np.zeros(3, np.float32), np.float16(1), np.int8(0), {},
     r"y_scale f16\[\] must have x's dtype float32"),
    ("QuantizeLinear", np.zeros(3, np.int32), np.float32(1), np.int8(0), {},
     r"input x must be one of"),
    ("QuantizeLinear", np.zeros((2, 2), np.float32), np.ones((2, 2), np.float32),
     np.zeros((2, 2), np.int8), {}, r"scale must be a scalar or 1-D \(or block_size set\), got f32\[2,2\]"),
    ("QuantizeLinear", np.zeros((2, 3), np.float32), np.ones(3, np.float32), np.zeros(3, np.int8),
     {"axis": 2}, r"axis 2 is out of range for rank 2"),
    ("DequantizeLinear", np.zeros(3, np.float32), np.float32(1), None, {},
     r"input x must be one of"),
    ("DequantizeLinear", np.zeros(3, np.int8), np.float32(1), np.uint8(0), {},
     r"x_zero_point u8\[\] must have x's dtype int8"),
    ("DequantizeLinear", np.zeros(3, np.int8), np.int32(1), None, {}, r"x_scale must be one of"),
])
def test_bad_parameters_are_rejected_by_name(op: str, x: np.ndarray, scale: np.ndarray,
                                             zero: np.ndarray | None, attrs: dict[str, Any],
                                             message: str) -> None:
    with pytest.raises(ShapeError, match=rf"\({op}\): .*{message}"):
        run_op(op, {"x": x, "s": np.asarray(scale),
                       "z": None if zero is None else np.asarray(zero)}, **attrs)


def test_flops_counted_by_hand() -> None:
    x = np.zeros((2, 3), np.float32)
    _, node = run_op("QuantizeLinear", {"x": x, "s": np.float32(1), "z": np.int8(0)})
    assert node.opdef.flops(node.input_types(), [node.output.type], node.attrs) == 12
    q = np.zeros((2, 3), np.int8)
    for zero, expected in ((np.int8(0), 12), (None, 6)):
        _, node = run_op("DequantizeLinear", {"x": q, "s": np.float32(1), "z": zero})
        types = [t for t in node.input_types() if t is not None]
        assert node.opdef.flops(types, [node.output.type], node.attrs) == expected
