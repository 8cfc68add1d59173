"""Tensor types of the graph IR: a static shape and a numpy dtype."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from hetero.errors import ShapeError

try:  # bfloat16 and the narrow types come with ml_dtypes, which onnx depends on
    import ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
    #: Floats of 8 bits or fewer (float8 variants, float4), one byte per element in numpy.
    NARROW_FLOAT_DTYPES: tuple[np.dtype, ...] = tuple(np.dtype(getattr(ml_dtypes, n)) for n in (
        "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
        "float4_e2m1fn"))
    #: Integers of 4 or 2 bits, one byte per element in numpy (ONNX packs them; numpy_helper unpacks).
    NARROW_INT_DTYPES: tuple[np.dtype, ...] = tuple(
        np.dtype(getattr(ml_dtypes, n)) for n in ("int4", "uint4", "int2", "uint2"))
except ImportError:  # pragma: no cover - onnx always brings it
    BFLOAT16 = None
    NARROW_FLOAT_DTYPES = NARROW_INT_DTYPES = ()

#: Short names used by the text form, in the order the printer prefers them.
_SHORT = {
    "float64": "f64",
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "int64": "i64",
    "int32": "i32",
    "int16": "i16",
    "int8": "i8",
    "uint64": "u64",
    "uint32": "u32",
    "uint16": "u16",
    "uint8": "u8",
    "bool": "bool",
    "float8_e4m3fn": "f8e4m3fn",
    "float8_e4m3fnuz": "f8e4m3fnuz",
    "float8_e5m2": "f8e5m2",
    "float8_e5m2fnuz": "f8e5m2fnuz",
    "float8_e8m0fnu": "f8e8m0",
    "float4_e2m1fn": "f4e2m1",
    "int4": "i4",
    "uint4": "u4",
    "int2": "i2",
    "uint2": "u2",
}
_FROM_SHORT = {short: name for name, short in _SHORT.items()}

FLOAT_DTYPES = tuple(np.dtype(d) for d in ("float64", "float32", "float16")) + (
    (BFLOAT16,) if BFLOAT16 is not None else ()
)
INT_DTYPES = tuple(
    np.dtype(d) for d in ("int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8")
)
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES
#: Types that ops store, move and convert but do no arithmetic in (Cast, quantisation, data
#: movement); numpy's kind does not tell them apart (most are "V"), so ask these helpers.
NARROW_DTYPES = NARROW_FLOAT_DTYPES + NARROW_INT_DTYPES
ALL_DTYPES = NUMERIC_DTYPES + (np.dtype(bool),) + NARROW_DTYPES
_BY_NAME = {d.name: d for d in ALL_DTYPES}


def is_float(dtype: Any) -> bool:
    """Whether ``dtype`` is a floating-point type, bfloat16 and the narrow floats included."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == BFLOAT16 or dtype in NARROW_FLOAT_DTYPES


def is_narrow(dtype: Any) -> bool:
    """Whether ``dtype`` is one of the storage-only narrow types (float8, float4, int4, int2)."""
    return np.dtype(dtype) in NARROW_DTYPES


def int_range(dtype: Any) -> tuple[int, int]:
    """The smallest and largest value of an integer ``dtype``, int4 and int2 included."""
    dtype = np.dtype(dtype)
    info = ml_dtypes.iinfo(dtype) if dtype in NARROW_INT_DTYPES else np.iinfo(dtype)
    return int(info.min), int(info.max)


def as_dtype(dtype: Any) -> np.dtype:
    """Normalise ``dtype`` ("float32", "f32", np.float32, np.dtype) to a supported np.dtype."""
    if isinstance(dtype, str) and dtype in _FROM_SHORT:
        dtype = _FROM_SHORT[dtype]
    if isinstance(dtype, str) and dtype in _BY_NAME:
        # Before numpy reads it: np.dtype("int4") is numpy's 4-byte int32.
        return _BY_NAME[dtype]
    try:
        result = np.dtype(dtype)
    except TypeError as exc:
        raise ShapeError(f"unknown dtype {dtype!r}: use one of {', '.join(_SHORT)}") from exc
    if result not in ALL_DTYPES:
        raise ShapeError(f"dtype {result} is not supported: use one of {', '.join(_SHORT)}")
    return result


def short_name(dtype: np.dtype) -> str:
    """The short name of ``dtype`` in the text form ("f32", "i64", ...)."""
    return _SHORT[np.dtype(dtype).name]


@dataclass(frozen=True)
class TensorType:
    """A tensor's static shape and element type.

    >>> TensorType((1, 3), "float32")
    TensorType(f32[1,3])
    """

    shape: tuple[int, ...]
    dtype: np.dtype

    def __init__(self, shape: Any, dtype: Any) -> None:
        dims = tuple(int(d) for d in shape)
        if any(d < 0 for d in dims):
            raise ShapeError(f"shape {list(dims)} has a negative dimension")
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", as_dtype(dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __str__(self) -> str:
        return f"{short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"TensorType({self})"

    @staticmethod
    def of(array: np.ndarray) -> TensorType:
        """The type of a numpy array."""
        return TensorType(array.shape, array.dtype)
