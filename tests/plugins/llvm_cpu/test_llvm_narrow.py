"""bfloat16, float8, float4, int4 and int2 through llvm_cpu's compiled Cast and data movement.

The oracle is ml_dtypes (``numpy.astype``), which the IR's cast follows, and onnx's
``saturate_cast`` for saturating casts. Encodings are compared bit for bit on every
float16 value, on random float32 bit patterns and at each type's rounding midpoints
(ties to even, overflow to infinity or NaN, subnormals).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import onnx.numpy_helper
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind

# These tests cast NaN, infinities and values past each type's range on purpose (every
# code of every narrow type, and the values around its edges): numpy's warnings about
# those casts are what the tests are about, not a problem they found.
pytestmark = pytest.mark.filterwarnings(
    "ignore:(invalid value|overflow) encountered in (cast|multiply):RuntimeWarning")

RNG = np.random.default_rng(11)
FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
NARROW_FLOATS = FLOAT8 + ("float4_e2m1fn",)
NARROW_INTS = ("int4", "uint4", "int2", "uint2")


def _graph(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> Graph:
    gb = GraphBuilder(op.lower())
    gb.output(gb.op(op, *(gb.input(k, a.shape, a.dtype) for k, a in inputs.items()), **attrs))
    return gb.build()


def _run(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    got = bind(get_backend("llvm_cpu"), {"num_threads": 1}).compile(graph).run(inputs)
    want = run_reference(graph, inputs)
    name = graph.outputs[0].name
    return got[name], want[name]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint8)


def _probe_values(dtype: np.dtype) -> np.ndarray:
    """Every float16 value, random float32 patterns, and the type's midpoints and their
    neighbours: where rounding to nearest even decides."""
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    patterns = RNG.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    grid = np.arange(256 if dtype.itemsize == 1 else 1 << 16, dtype=np.uint8 if dtype.itemsize == 1
                     else np.uint16)
    if dtype.name == "float4_e2m1fn":
        grid = grid[:16]
    points = grid.view(dtype).astype(np.float32)
    points = np.sort(points[np.isfinite(points)])
    mids = (points[:-1].astype(np.float64) + points[1:]) / 2
    near = np.concatenate([mids, np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(mids.astype(np.float32), np.float32(-np.inf)),
                           points * 1.5, points * 2, points * 4]).astype(np.float32)
    return np.concatenate([halves, patterns, near, [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0]]
                          ).astype(np.float32)


@pytest.mark.parametrize("to", NARROW_FLOATS + ("bfloat16",))
def test_encoding_from_float32_is_ml_dtypes_bit_for_bit(to: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, to))
    x = _probe_values(dtype)
    got, _ = _run(_graph("Cast", {"x": x}, to=dtype, saturate=0), {"x": x})
    want = x.astype(dtype)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("to", FLOAT8)
@pytest.mark.parametrize("source", ["float64", "float32", "float16"])
def test_saturating_cast_is_onnx_saturate_cast(to: str, source: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, to))
    x = _probe_values(dtype)
    x = x[np.isfinite(x) | np.isinf(x)] if source != "float16" else x[np.abs(x) < 60000]
    x = x.astype(source)
    got, ref = _run(_graph("Cast", {"x": x}, to=dtype, saturate=1), {"x": x})
    want = onnx.numpy_helper.saturate_cast(x.astype(np.float32) if source == "float16" else x, dtype)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
    np.testing.assert_array_equal(_bits(ref)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("source", NARROW_FLOATS + ("float8_e8m0fnu", "bfloat16"))
@pytest.mark.parametrize("to", ["float32", "float16", "float64", "int32", "bool"])
def test_decoding_every_pattern(source: str, to: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, source))
    count = 16 if source == "float4_e2m1fn" else 256 if dtype.itemsize == 1 else 1 << 16
    x = np.arange(count, dtype=np.uint8 if dtype.itemsize == 1 else np.uint16).view(dtype)
    if to in ("int32",):
        wide = x.astype(np.float32)
        x = x[np.isfinite(wide) & (np.abs(wide) < 1e9)]
    got, want = _run(_graph("Cast", {"x": x}, to=np.dtype(to)), {"x": x})
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("to", NARROW_INTS)
def test_narrow_integers_from_floats_and_ints(to: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, to))
    floats = np.concatenate([np.arange(-20, 20, 0.25), [np.nan, np.inf, -np.inf]]).astype(np.float32)
    ints = np.arange(-300, 300, dtype=np.int32)
    for x in (floats, ints):
        got, want = _run(_graph("Cast", {"x": x}, to=dtype), {"x": x})
        np.testing.assert_array_equal(got.view(np.uint8), x.astype(dtype).view(np.uint8))
        np.testing.assert_array_equal(want.view(np.uint8), x.astype(dtype).view(np.uint8))
        back, _ = _run(_graph("Cast", {"y": got}, to=np.dtype(np.int32)), {"y": got})
        np.testing.assert_array_equal(back, got.astype(np.int32))


@pytest.mark.parametrize("dtype", NARROW_FLOATS + NARROW_INTS + ("float8_e8m0fnu", "bfloat16"))
def test_data_movement_keeps_every_bit_pattern(dtype: str) -> None:
    dt = np.dtype(getattr(ml_dtypes, dtype))
    width = {"int4": 16, "uint4": 16, "int2": 4, "uint2": 4, "float4_e2m1fn": 16}.get(dtype, 256)
    raw = np.arange(width, dtype=np.uint8) if dt.itemsize == 1 else RNG.integers(
        0, 1 << 16, 256, dtype=np.uint16)
    x = np.resize(raw, 8 * 32).view(dt).reshape(8, 32)
    got, want = _run(_graph("Transpose", {"x": x}, perm=[1, 0]), {"x": x})
    assert got.dtype == dt
    if dt == np.dtype(ml_dtypes.bfloat16) or dtype.startswith("float"):
        nan = np.isnan(want.astype(np.float32))
        np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
        np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])
    else:
        np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("source", ["float32", "float16", "float64"])
def test_cast_to_e8m0_is_onnx_to_float8e8m0(round_mode: str, saturate: int, source: str) -> None:
    dtype = np.dtype(ml_dtypes.float8_e8m0fnu)
    x = _probe_values(dtype)
    x = np.concatenate([x, np.float32(2.0**127) * np.float32([1.0, 1.25, 1.5, 1.75])]).astype(source)
    got, ref = _run(_graph("Cast", {"x": x}, to=dtype, saturate=saturate, round_mode=round_mode), {"x": x})
    want = onnx.numpy_helper.to_float8e8m0(x.astype(np.float32), bool(saturate), round_mode)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(ref.view(np.uint8), want.view(np.uint8))


_MOVES: list[tuple[str, dict[str, Any], Any]] = [
    ("Identity", {}, None), ("Reshape", {"shape": (4, 16)}, None), ("Flatten", {"axis": 1}, None),
    ("Unsqueeze", {"axes": (0,)}, None), ("Squeeze", {"axes": (0,)}, "unit"),
    ("Slice", {"starts": (1,), "ends": (7,), "axes": (0,), "steps": (2,)}, None),
    ("Concat", {"axis": 1}, "twice"), ("Gather", {"axis": 1}, "indices"),
    ("Expand", {"shape": (2, 8, 8)}, None), ("Tile", {"repeats": (2, 1)}, None),
]


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2fnuz", "float4_e2m1fn", "int4", "uint2",
                                   "bfloat16"])
@pytest.mark.parametrize(("op", "attrs", "extra"), _MOVES, ids=[m[0] for m in _MOVES])
def test_data_movement_ops_take_narrow_types(dtype: str, op: str, attrs: dict[str, Any], extra: Any) -> None:
    dt = np.dtype(getattr(ml_dtypes, dtype))
    width = {"int4": 16, "uint2": 4, "float4_e2m1fn": 16}.get(dtype, 256)
    x = np.resize(np.arange(width, dtype=np.uint8 if dt.itemsize == 1 else np.uint16), 64).view(dt)
    x = x.reshape((1, 8, 8) if extra == "unit" else (8, 8))
    inputs = {"x": x, "y": x} if extra == "twice" else {"x": x}
    gb = GraphBuilder(op.lower())
    operands = [gb.input(k, a.shape, a.dtype) for k, a in inputs.items()]
    if extra == "indices":
        operands.append(gb.constant(np.array([[0, 7], [3, 3]], np.int64), "i"))
    gb.output(gb.op(op, *operands, **attrs))
    graph = gb.build()
    got, want = _run(graph, inputs)
    assert got.dtype == dt and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))
