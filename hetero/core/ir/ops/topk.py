"""Selection: TopK, the ``k`` largest (or smallest) elements along one axis.

The order is ONNX's reference order, a total one: values compare as numbers with
NaN above every other value (so NaN leads a ``largest`` selection and comes last in
a ``smallest`` one), and equal values (NaN with NaN included) keep the lower index
first. The values always come sorted in that order; ONNX's ``sorted=0`` leaves the
order open, and sorted output is one valid answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import normalize_axis, require_dtype
from hetero.core.ir.types import NUMERIC_DTYPES, TensorType
from hetero.errors import OpAttributeError, ShapeError

_INT64 = np.dtype("int64")


def _complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank, "TopK axis")
    return attrs


def _infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_dtype(x, NUMERIC_DTYPES, "TopK input X")
    if x.rank == 0:
        raise ShapeError(f"TopK input X must have rank >= 1, got {x}")
    axis, k = attrs["axis"], attrs["k"]
    if attrs["largest"] not in (0, 1):
        raise OpAttributeError(f"TopK largest must be 0 or 1, got {attrs['largest']}")
    if not 0 <= k <= x.shape[axis]:
        raise ShapeError(f"TopK k={k} must lie in [0, {x.shape[axis]}] (axis {axis} of X {x})")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return [TensorType(shape, x.dtype), TensorType(shape, _INT64)]


def order_along(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """The indices that sort ``x`` along ``axis`` in TopK's order (see the module doc)."""
    position = np.indices(x.shape)[axis]
    key = x.astype(np.float64) if x.dtype.kind not in "iu" else x  # bfloat16 has no sort
    # lexsort: ascending by value (NaN last), ties by the secondary key; for `largest`
    # the flip reverses that, so the ties' key is the negated position.
    if largest:
        return np.flip(np.lexsort((-position, key), axis=axis), axis=axis)
    return np.lexsort((position, key), axis=axis)


def _reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, axis = ins[0], attrs["axis"]
    order = np.take(order_along(x, axis, bool(attrs["largest"])), np.arange(attrs["k"]), axis=axis)
    return [np.take_along_axis(x, order, axis=axis), order.astype(_INT64)]


register(OpDef(
    "TopK", ("X",), ("Values", "Indices"), _infer, _reference,
    attrs={
        "k": Attr("int", doc="how many elements to select (ONNX's K input, a constant)"),
        "axis": Attr("int", -1, "the axis selected along; canonical non-negative"),
        "largest": Attr("int", 1, "1 selects the largest elements, 0 the smallest"),
    },
    # About one comparison per element: most candidates do not beat the k-th kept one.
    flops=lambda ins, outs, attrs: ins[0].size,
    complete=_complete,
    doc="the k largest (smallest) elements along axis and their int64 indices, sorted; "
        "NaN counts above every number and ties keep the lower index first",
))
