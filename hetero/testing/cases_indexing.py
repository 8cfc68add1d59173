"""Case generators of the indexing ops (:mod:`hetero.core.ir.ops.indexing`).

Indices come in every form ONNX accepts: int32 and int64, negative ones counting
from the end, graph inputs or constants. The edge cases feed a run-time index just
out of range (GatherElements, GatherND, ScatterElements, ScatterND; a sequence
length past the time axis for ReverseSequence), where the reference raises and a
backend must too. Scatters with ``reduction="none"`` never get two updates for one
element (ONNX leaves that undefined); with a reduction they often do, and the sums
are judged as sums of that many terms. OneHot gets indices outside ``[-depth,
depth)`` on purpose: their rows are all off_value by definition.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.types import is_float
from hetero.errors import InputError
from hetero.testing.cases_base import (
    ALL,
    EXACT,
    FLOATS,
    Draw,
    Operand,
    Spec,
    exact_or,
    generates,
    integers,
    peak,
    rounded,
    shape,
    summed,
    values,
)

_NUMERIC = FLOATS + ("int8", "uint8", "int32", "int64")
_CUMULATIVE_DTYPES = FLOATS + ("float64", "bfloat16", "int32", "int64", "uint32", "uint64")


def _index_dtype(d: Draw) -> np.dtype:
    return np.dtype(d.pick(("int64", "int32")))


def _negate_some(d: Draw, indices: np.ndarray, size: int | np.ndarray) -> np.ndarray:
    """``indices`` (each in [0, size)) with about half written the negative way."""
    flip = d.rng.random(indices.shape) < 0.5
    return np.where(flip, indices - size, indices).astype(indices.dtype)


def _out_of_range(d: Draw, indices: np.ndarray, size: int | np.ndarray) -> np.ndarray:
    """``indices`` with one entry just out of range (``size`` or ``-size - 1``)."""
    out = np.array(indices)
    flat = out.reshape(-1)
    k = int(d.rng.integers(flat.size))
    limit = int(np.broadcast_to(np.asarray(size), out.shape).reshape(-1)[k])
    flat[k] = d.pick((limit, -limit - 1))
    return out


def _maybe_negative(d: Draw, axis: int, rank: int) -> int:
    return axis - rank if d.pick((False, True)) else axis


def _reduction(d: Draw, dtype: np.dtype) -> str:
    return "none" if dtype.kind == "b" else d.pick(("none", "add", "mul", "max", "min"))


def _updates(d: Draw, shape_: tuple[int, ...], dtype: np.dtype, reduction: str) -> np.ndarray:
    if reduction == "mul" and is_float(dtype):
        return np.asarray(d.rng.uniform(0.5, 2.0, shape_) * d.rng.choice((-1, 1), shape_)).astype(dtype)
    return values(d, shape_, dtype, small=reduction == "mul")


def _scatter_tolerance(dtype: np.dtype, reduction: str, terms: int, *arrays: np.ndarray) -> object:
    if reduction in ("none", "max", "min"):
        return EXACT
    if reduction == "add":
        return exact_or(dtype, lambda: summed(dtype, terms + 1, (terms + 1) * peak(*arrays)))
    # Products of up to `terms` factors: one rounding each, relative.
    return exact_or(dtype, lambda: summed(dtype, terms + 1, 0.0, ulps=2.0 * (terms + 1)))


@generates(("GatherElements",), ALL)
def _gather_elements(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = values(d, shape(d, 1, 3), dtype)
    rank = data.ndim
    axis = d.integer(0, rank - 1)
    dim = data.shape[axis]
    idx_shape = tuple(d.integer(1, 4) if k == axis else d.integer(1, n) for k, n in enumerate(data.shape))
    indices = _negate_some(d, integers(d, idx_shape, _index_dtype(d), 0, dim - 1), dim)
    attrs = {"axis": _maybe_negative(d, axis, rank)}
    if d.edge():
        bad = Operand("indices", _out_of_range(d, indices, dim))
        return Spec((Operand("data", data), bad), attrs, EXACT, error=InputError)
    return Spec((Operand("data", data), Operand("indices", indices, constant=d.pick((False, True)))),
                attrs, EXACT)


def _nd_shapes(d: Draw, data_shape: tuple[int, ...], batch: int) -> tuple[int, tuple[int, ...]]:
    q = d.integer(1, len(data_shape) - batch)
    lead = data_shape[:batch] + shape(d, 0, 2, 3)
    return q, lead


@generates(("GatherND",), ALL)
def _gather_nd(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = values(d, shape(d, 1, 4), dtype)
    batch = d.integer(0, data.ndim - 1) if d.pick((False, True)) else 0
    q, lead = _nd_shapes(d, data.shape, batch)
    sizes = np.array(data.shape[batch:batch + q])
    columns = [integers(d, lead + (1,), np.int64, 0, int(n) - 1) for n in sizes]
    indices = _negate_some(d, np.concatenate(columns, axis=-1), sizes).astype(_index_dtype(d))
    attrs = {"batch_dims": batch}
    if d.edge():
        bad = Operand("indices", _out_of_range(d, indices, sizes))
        return Spec((Operand("data", data), bad), attrs, EXACT, error=InputError)
    return Spec((Operand("data", data), Operand("indices", indices, constant=d.pick((False, True)))),
                attrs, EXACT)


@generates(("ScatterElements",), ALL)
def _scatter_elements(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = values(d, shape(d, 1, 3), dtype)
    rank = data.ndim
    axis = d.integer(0, rank - 1)
    dim = data.shape[axis]
    reduction = _reduction(d, dtype)
    along = d.integer(1, dim) if reduction == "none" else d.integer(1, 4)
    idx_shape = tuple(along if k == axis else d.integer(1, n) for k, n in enumerate(data.shape))
    if reduction == "none":
        # Distinct targets along each line: ONNX leaves a repeated one undefined.
        lines = np.moveaxis(np.zeros(idx_shape, np.int64), axis, -1)
        for k in np.ndindex(lines.shape[:-1]):
            lines[k] = d.rng.permutation(dim)[:along]
        chosen = np.moveaxis(lines, -1, axis)
    else:
        chosen = integers(d, idx_shape, np.int64, 0, dim - 1)
    indices = _negate_some(d, chosen, dim).astype(_index_dtype(d))
    updates = _updates(d, idx_shape, dtype, reduction)
    attrs = {"axis": _maybe_negative(d, axis, rank), "reduction": reduction}
    tolerance = _scatter_tolerance(dtype, reduction, along, data, updates)
    if d.edge():
        bad = Operand("indices", _out_of_range(d, indices, dim))
        return Spec((Operand("data", data), bad, Operand("updates", updates)), attrs, EXACT,
                    error=InputError)
    operands = (Operand("data", data), Operand("indices", indices, constant=d.pick((False, True))),
                Operand("updates", updates))
    return Spec(operands, attrs, tolerance)


@generates(("ScatterND",), ALL)
def _scatter_nd(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = values(d, shape(d, 1, 3), dtype)
    q = d.integer(1, data.ndim)
    reduction = _reduction(d, dtype)
    targets = math.prod(data.shape[:q])
    count = d.integer(1, targets) if reduction == "none" else d.integer(1, 6)
    lead = d.pick(((count,), (1, count)))
    if reduction == "none":
        flat = d.rng.permutation(targets)[:count]  # distinct tuples: no undefined writes
    else:
        flat = d.rng.integers(0, targets, count)
    sizes = np.array(data.shape[:q])
    tuples = np.stack(np.unravel_index(flat, tuple(sizes)), axis=-1).reshape(lead + (q,))
    indices = _negate_some(d, tuples, sizes).astype(_index_dtype(d))
    updates = _updates(d, lead + data.shape[q:], dtype, reduction)
    attrs = {"reduction": reduction}
    tolerance = _scatter_tolerance(dtype, reduction, count, data, updates)
    if d.edge():
        bad = Operand("indices", _out_of_range(d, indices, sizes))
        return Spec((Operand("data", data), bad, Operand("updates", updates)), attrs, EXACT,
                    error=InputError)
    operands = (Operand("data", data), Operand("indices", indices, constant=d.pick((False, True))),
                Operand("updates", updates))
    return Spec(operands, attrs, tolerance)


@generates(("Tile",), ALL)
def _tile(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 1, 3), dtype)
    return Spec((Operand("input", x),), {"repeats": tuple(d.integer(1, 3) for _ in x.shape)}, EXACT)


@generates(("Trilu",), ALL)
def _trilu(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 2, 3, 5), dtype)
    return Spec((Operand("input", x),), {"upper": d.pick((0, 1)), "k": d.integer(-4, 4)}, EXACT)


@generates(("EyeLike",), ALL)
def _eye_like(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 2, 2, 5), dtype)
    attrs: dict[str, object] = {"k": d.integer(-4, 4)}
    out = d.pick((None, "float32", "int64", "bool", "uint8"))
    if out is not None:
        attrs["dtype"] = np.dtype(out)
    return Spec((Operand("input", x),), attrs, EXACT)


@generates(("OneHot",), ("int64", "int32", "float32", "uint8"))
def _one_hot(op: str, d: Draw, dtype: np.dtype) -> Spec:
    depth = d.integer(1, 5)
    lo = 0 if dtype.kind == "u" else -depth - 1
    # Integral values, some outside [-depth, depth): those rows are all off_value.
    indices = integers(d, shape(d, 0, 3), np.int64, lo, depth).astype(dtype)
    value_dtype = np.dtype(d.pick(ALL))
    pair = values(d, (2,), value_dtype)
    axis = d.integer(-indices.ndim - 1, indices.ndim)
    return Spec((Operand("indices", indices), Operand("values", pair, constant=d.pick((False, True)))),
                {"depth": depth, "axis": axis}, EXACT)


def _blocks(d: Draw, dtype: np.dtype, to_space: bool) -> Spec:
    bs = d.integer(1, 3)
    n, c, h, w = d.integer(1, 2), d.integer(1, 3), d.integer(1, 3), d.integer(1, 3)
    x_shape = (n, c * bs * bs, h, w) if to_space else (n, c, h * bs, w * bs)
    attrs = {"blocksize": bs, "mode": d.pick(("DCR", "CRD"))}
    return Spec((Operand("input", values(d, x_shape, dtype)),), attrs, EXACT)


@generates(("DepthToSpace",), ALL)
def _depth_to_space(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _blocks(d, dtype, True)


@generates(("SpaceToDepth",), ALL)
def _space_to_depth(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _blocks(d, dtype, False)


@generates(("ReverseSequence",), ALL)
def _reverse_sequence(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 2, 3, 5), dtype)
    batch_axis = d.pick((0, 1))
    time_axis = 1 - batch_axis
    steps = x.shape[time_axis]
    lens = integers(d, (x.shape[batch_axis],), np.int64, 0, steps)
    attrs = {"batch_axis": batch_axis, "time_axis": time_axis}
    if d.edge():
        lens[int(d.rng.integers(lens.size))] = steps + 1
        return Spec((Operand("input", x), Operand("sequence_lens", lens)), attrs, EXACT, error=InputError)
    return Spec((Operand("input", x), Operand("sequence_lens", lens, constant=d.pick((False, True)))),
                attrs, EXACT)


def _running(d: Draw, dtype: np.dtype, product: bool) -> tuple[np.ndarray, dict[str, Any], int]:
    """CumSum's and CumProd's operand and attributes: floats (bfloat16 among them) in
    [-4, 4], for products magnitudes in [0.5, 2] so a row stays within float16's range;
    integers within ±100 (products of up to 6 wrap around in int32, as they must)."""
    s = shape(d, 1, 3, 6)
    if _floating(dtype):
        low = 0.5 if product else 0.0
        x = (d.rng.choice((-1.0, 1.0), s) * d.rng.uniform(low, 2.0 if product else 4.0, s))
        x = x.astype(dtype)
    else:
        x = values(d, s, dtype)
    axis = d.integer(0, x.ndim - 1)
    attrs = {"axis": _maybe_negative(d, axis, x.ndim), "exclusive": d.pick((0, 1)),
             "reverse": d.pick((0, 1))}
    return x, attrs, x.shape[axis]


def _floating(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype.name == "bfloat16"


@generates(("CumSum",), _CUMULATIVE_DTYPES)
def _cumsum(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x, attrs, n = _running(d, dtype, product=False)
    tolerance = summed(dtype, n, n * peak(x)) if _floating(dtype) else EXACT
    return Spec((Operand("x", x),), attrs, tolerance)


@generates(("CumProd",), _CUMULATIVE_DTYPES)
def _cumprod(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x, attrs, n = _running(d, dtype, product=True)
    # A product of n rounded factors: within n + 1 roundings, relative (no cancellation).
    return Spec((Operand("x", x),), attrs, rounded(dtype, n + 2) if _floating(dtype) else EXACT)


@generates(("TensorScatter",), ALL)
def _tensor_scatter(op: str, d: Draw, dtype: np.dtype) -> Spec:
    # A KV cache (batch, heads, max_len, head_dim) or another layout, its axis not 0.
    cache_shape = list(shape(d, 2, 4, dim_lo=1, dim_hi=4))
    axis = d.integer(1, len(cache_shape) - 1)
    cache_shape[axis] = d.integer(1, 6)
    width = cache_shape[axis]
    length = d.integer(1, width)
    update_shape = list(cache_shape)
    update_shape[axis] = length
    mode = d.pick(("linear", "circular"))
    attrs = {"axis": axis - len(cache_shape) if d.pick((False, True)) else axis, "mode": mode}
    cache, update = values(d, cache_shape, dtype), values(d, update_shape, dtype)
    batch = cache_shape[0]
    if mode == "circular":
        starts = integers(d, (batch,), np.int64, -2 * width, 2 * width)  # any start wraps
    else:
        starts = integers(d, (batch,), np.int64, 0, width - length)
        if d.edge():  # a write past the cache's end
            starts[int(d.rng.integers(batch))] = width - length + 1
            return Spec((Operand("past_cache", cache), Operand("update", update),
                         Operand("write_indices", starts)), attrs, EXACT, error=InputError)
    where = d.pick((None, Operand("write_indices", starts, constant=d.pick((False, True)))))
    return Spec((Operand("past_cache", cache), Operand("update", update), where), attrs, EXACT)
