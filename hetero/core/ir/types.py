"""Tensor types of the graph IR: a static shape and a numpy dtype."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from hetero.errors import ShapeError

try:  # bfloat16 comes with ml_dtypes, which onnx depends on
    import ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - onnx always brings it
    BFLOAT16 = None

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
}
_FROM_SHORT = {short: name for name, short in _SHORT.items()}

FLOAT_DTYPES = tuple(np.dtype(d) for d in ("float64", "float32", "float16")) + (
    (BFLOAT16,) if BFLOAT16 is not None else ()
)
INT_DTYPES = tuple(
    np.dtype(d) for d in ("int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8")
)
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES
ALL_DTYPES = NUMERIC_DTYPES + (np.dtype(bool),)


def as_dtype(dtype: Any) -> np.dtype:
    """Normalise ``dtype`` ("float32", "f32", np.float32, np.dtype) to a supported np.dtype."""
    if isinstance(dtype, str) and dtype in _FROM_SHORT:
        dtype = _FROM_SHORT[dtype]
    if isinstance(dtype, str) and dtype == "bfloat16" and BFLOAT16 is not None:
        return BFLOAT16
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
