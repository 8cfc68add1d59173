"""Reductions over a set of axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd,
ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp; and ArgMax, ArgMin.

Each reduces ``data`` over ``axes`` (all axes when left out) and keeps the reduced
dims as size 1 when ``keepdims`` is 1. ONNX's ``noop_with_empty_axes`` is the
frontend's business: here empty axes mean all axes, as in ONNX's default. Each
counts one FLOP per input element. ArgMax and ArgMin reduce one axis to the int64
index of its extreme, NaN counting as the extreme (numpy's and onnx's rule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import normalize_axes, normalize_axis, require_dtype
from hetero.core.ir.types import FLOAT_DTYPES, NUMERIC_DTYPES, TensorType
from hetero.errors import OpAttributeError, ShapeError

INDEX = np.dtype("int64")

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


def _reduce(name: str, fn: ReduceFn, doc: str,
            allowed: tuple[np.dtype, ...] = NUMERIC_DTYPES) -> None:
    def complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
        rank = ins[0].rank
        axes = attrs["axes"]
        attrs["axes"] = tuple(range(rank)) if not axes else normalize_axes(axes, rank, f"{name} axes", as_set=True)
        return attrs

    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        require_dtype(ins[0], allowed, f"{name} input")
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


def _prod(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    acc = np.float64 if x.dtype in FLOAT_DTYPES else x.dtype
    return np.prod(x, axis=axes, dtype=acc, keepdims=keepdims)


def _l1(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return _sum(np.abs(x), axes, keepdims)


def _sum_square(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    wide = x.astype(np.float64) if x.dtype in FLOAT_DTYPES else x
    return _sum(wide * wide, axes, keepdims)


def _l2(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    return np.sqrt(_sum_square(x, axes, keepdims))


def _log_sum(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) = -inf, log(<0) = nan
        return np.log(_sum(x, axes, keepdims))


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    # log(sum(exp(x - m))) + m with m the maximum, so that no exp overflows; an infinite
    # (or empty: -inf) maximum is replaced by 0, which gives what the plain formula
    # gives there (+inf, or log(0) = -inf).
    wide = x.astype(np.float64)
    peak = np.max(wide, axis=axes, keepdims=True, initial=-np.inf)
    peak = np.where(np.isinf(peak), 0.0, peak)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        total = np.sum(np.exp(wide - peak), axis=axes, keepdims=True)
        result = np.log(total) + peak
    return result if keepdims else np.squeeze(result, axis=axes)


_reduce("ReduceProd", _prod, "product over ``axes`` (1 over an empty set; integers wrap)")
_reduce("ReduceL1", _l1, "sum of absolute values over ``axes``")
_reduce("ReduceSumSquare", _sum_square, "sum of squares over ``axes``")
_reduce("ReduceL2", _l2, "square root of the sum of squares over ``axes``", FLOAT_DTYPES)
_reduce("ReduceLogSum", _log_sum, "natural log of the sum over ``axes`` (-inf over an empty "
        "set)", FLOAT_DTYPES)
_reduce("ReduceLogSumExp", _log_sum_exp, "log(sum(exp(x))) over ``axes``, computed stably "
        "around the maximum (-inf over an empty set)", FLOAT_DTYPES)


# -- ArgMax, ArgMin ----------------------------------------------------------------------


def _arg(name: str, fn: Callable[..., np.ndarray], doc: str) -> None:
    def complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank)
        return attrs

    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        x = ins[0]
        require_dtype(x, NUMERIC_DTYPES, f"{name} input")
        for key in ("keepdims", "select_last_index"):
            if attrs[key] not in (0, 1):
                raise OpAttributeError(f"{name} {key} must be 0 or 1, got {attrs[key]}")
        axis = attrs["axis"]
        if x.rank == 0 or x.shape[axis] == 0:
            raise ShapeError(f"{name} needs a non-empty axis {axis} to pick from, got {x}")
        shape = list(x.shape)
        if attrs["keepdims"]:
            shape[axis] = 1
        else:
            del shape[axis]
        return [TensorType(shape, INDEX)]

    def reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, axis = ins[0], attrs["axis"]
        if attrs["select_last_index"]:
            # The last extreme is the first of the reversed axis.
            flipped = fn(np.flip(x, axis), axis=axis, keepdims=True)
            index = x.shape[axis] - 1 - flipped
        else:
            index = fn(x, axis=axis, keepdims=True)
        if not attrs["keepdims"]:
            index = np.squeeze(index, axis=axis)
        return [np.asarray(index).astype(INDEX)]

    register(OpDef(
        name, ("data",), ("reduced",), infer, reference,
        attrs={"axis": Attr("int", 0, "the axis picked along; canonical non-negative"),
               "keepdims": Attr("int", 1, "1 keeps the axis with size 1, 0 drops it"),
               "select_last_index": Attr("int", 0, "1 picks the last of tied extremes, 0 "
                                                   "the first")},
        flops=_input_flops, complete=complete, doc=doc,
    ))


_arg("ArgMax", np.argmax, "int64 index of the maximum along ``axis`` (a NaN is the maximum)")
_arg("ArgMin", np.argmin, "int64 index of the minimum along ``axis`` (a NaN is the minimum)")


# -- Det -------------------------------------------------------------------------------
def _det_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_dtype(x, FLOAT_DTYPES, "Det input")
    if x.rank < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"Det needs square matrices in its last two axes, got {x}")
    return [TensorType(x.shape[:-2], x.dtype)]


def _det_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    # numpy's LU in float64, rounded once (LAPACK's float32 one pivots the same way).
    return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]


register(OpDef(
    "Det", ("X",), ("Y",), _det_infer, _det_reference,
    flops=lambda ins, outs, attrs: int(np.prod(ins[0].shape[:-2], dtype=np.int64)) * 2 * ins[0].shape[-1] ** 3 // 3,
    doc="the determinant of each square matrix in the last two axes",
))
