"""Reductions over a set of axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin.

Each reduces ``data`` over ``axes`` (all axes when left out) and keeps the reduced
dims as size 1 when ``keepdims`` is 1. ONNX's ``noop_with_empty_axes`` is the
frontend's business: here empty axes mean all axes, as in ONNX's default. Each
counts one FLOP per input element.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import normalize_axes, require_dtype
from hetero.core.ir.types import FLOAT_DTYPES, NUMERIC_DTYPES, TensorType
from hetero.errors import OpAttributeError

ReduceFn = Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]


def _input_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    """One operation per input element: each is added (or compared) once."""
    return ins[0].size


def _sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    # Floats accumulate in float64 so that the reference rounds once, at the end;
    # integers wrap around in their own type, as ONNX runtimes do.
    acc = np.float64 if x.dtype in FLOAT_DTYPES else x.dtype
    return np.sum(x, axis=axes, dtype=acc, keepdims=keepdims)


def _mean(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    total = _sum(x, axes, keepdims)
    count = int(np.prod([x.shape[a] for a in axes]))
    if x.dtype in FLOAT_DTYPES:
        with np.errstate(invalid="ignore"):  # an empty reduction is 0/0 = nan
            return total / count
    # Integer means truncate toward zero (C division), computed exactly in integers;
    # with no integer NaN, the mean of an empty set is taken to be 0.
    if x.dtype.kind == "u":
        return total // max(count, 1)
    quotient = np.abs(total) // max(count, 1)
    return np.where(total < 0, -quotient, quotient)


def _extreme(fn: Callable[..., np.ndarray], lowest: bool) -> ReduceFn:
    def reduce(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
        # The identity of max (min) is what an empty reduction yields, as ONNX 20 defines it.
        if x.dtype in FLOAT_DTYPES:
            initial = -np.inf if lowest else np.inf
        else:
            info = np.iinfo(x.dtype)
            initial = info.min if lowest else info.max
        return fn(x, axis=axes, keepdims=keepdims, initial=initial)

    return reduce


def _reduce(name: str, fn: ReduceFn, doc: str) -> None:
    def complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
        rank = ins[0].rank
        axes = attrs["axes"]
        attrs["axes"] = tuple(range(rank)) if not axes else normalize_axes(axes, rank, f"{name} axes")
        return attrs

    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        require_dtype(ins[0], NUMERIC_DTYPES, f"{name} input")
        if attrs["keepdims"] not in (0, 1):
            raise OpAttributeError(f"{name} keepdims must be 0 or 1, got {attrs['keepdims']}")
        axes = attrs["axes"]
        if attrs["keepdims"]:
            shape = [1 if i in axes else d for i, d in enumerate(ins[0].shape)]
        else:
            shape = [d for i, d in enumerate(ins[0].shape) if i not in axes]
        return [TensorType(shape, ins[0].dtype)]

    def reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        result = fn(ins[0], attrs["axes"], bool(attrs["keepdims"]))
        return [np.asarray(result).astype(ins[0].dtype)]

    register(OpDef(
        name, ("data",), ("reduced",), infer, reference,
        attrs={"axes": Attr("ints", None, "the reduced axes; derived: all of them (also when "
                                          "empty); canonical sorted, unique, non-negative"),
               "keepdims": Attr("int", 1, "1 keeps each reduced dim with size 1, 0 drops it")},
        flops=_input_flops, complete=complete, doc=doc,
    ))


_reduce("ReduceSum", _sum, "sum over ``axes``")
_reduce("ReduceMean", _mean, "arithmetic mean over ``axes`` (integers truncate toward zero)")
_reduce("ReduceMax", _extreme(np.max, lowest=True), "maximum over ``axes`` (-inf or the dtype's "
        "minimum over an empty set)")
_reduce("ReduceMin", _extreme(np.min, lowest=False), "minimum over ``axes`` (+inf or the dtype's "
        "maximum over an empty set)")
