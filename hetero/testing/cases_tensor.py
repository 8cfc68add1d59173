"""Case generators of the tensor-manipulation ops: every one moves values exactly.

Their attributes come in ONNX's raw forms where the op accepts them (negative
axes, Slice's negative and out-of-range starts and ends, INT64 sentinels, negative
steps), so a backend meets what ``complete`` canonicalises, and every case has at
least one output element.
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.types import as_dtype
from hetero.errors import InputError
from hetero.testing.cases_base import (
    ALL,
    EXACT,
    Draw,
    Operand,
    Spec,
    generates,
    integers,
    shape,
    values,
)

_INT64_MAX, _INT64_MIN = 2**63 - 1, -(2**63)


def _data(d: Draw, dtype: np.dtype, rank_lo: int = 1, rank_hi: int = 4) -> Operand:
    return Operand("data", values(d, shape(d, rank_lo, rank_hi), dtype))


def _maybe_negative(d: Draw, axis: int, rank: int) -> int:
    return axis - rank if d.pick((False, True)) else axis


@generates(("Reshape",), ALL)
def _reshape(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype, 0)
    # A new shape of the same size: the prime factors of the size dealt out to new dims.
    dims = [1] * d.integer(1, 4)
    size = data.array.size
    for p in (2, 3, 5, 7):
        while size % p == 0:
            size //= p
            dims[d.integer(0, len(dims) - 1)] *= p
    return Spec((data,), {"shape": tuple(dims)}, EXACT)


@generates(("Flatten",), ALL)
def _flatten(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    rank = data.array.ndim
    return Spec((data,), {"axis": d.integer(-rank, rank)}, EXACT)


@generates(("Transpose",), ALL)
def _transpose(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    perm = d.pick((None, tuple(d.rng.permutation(data.array.ndim).tolist())))
    return Spec((data,), {} if perm is None else {"perm": perm}, EXACT)


@generates(("Concat",), ALL)
def _concat(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 4)
    axis = d.integer(0, len(s) - 1)
    parts = []
    for i in range(d.integer(1, 4)):
        part = list(s)
        part[axis] = d.integer(1, 3)
        parts.append(Operand(f"x{i}", values(d, part, dtype)))
    return Spec(tuple(parts), {"axis": _maybe_negative(d, axis, len(s))}, EXACT)


@generates(("Split",), ALL)
def _split(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    axis = d.integer(0, data.array.ndim - 1)
    dim = data.array.shape[axis]
    cuts = sorted(d.rng.choice(np.arange(1, dim), d.integer(0, dim - 1), replace=False).tolist())
    split = tuple(np.diff([0, *cuts, dim]).tolist())
    return Spec((data,), {"axis": _maybe_negative(d, axis, data.array.ndim), "split": split}, EXACT)


def _slice_axis(d: Draw, dim: int) -> tuple[int, int, int]:
    """A start, end and step of one axis that select at least one element, in raw ONNX form."""
    step = d.pick((1, 2, -1, -2, 3))
    first = d.integer(0, dim - 1)
    if step > 0:
        stop = d.integer(first + 1, dim)
        end = d.pick((stop, _INT64_MAX, dim + 5)) if stop == dim \
            else d.pick((stop, stop - dim))
    else:
        stop = d.integer(-1, first - 1)
        # -1 is "past the beginning": only an end below -dim says that in ONNX's terms.
        end = d.pick((_INT64_MIN, -dim - 1, -dim - 7)) if stop == -1 else d.pick((stop, stop - dim))
    start = d.pick((first, first - dim))
    return start, end, step


@generates(("Slice",), ALL)
def _slice(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    rank = data.array.ndim
    axes = d.rng.permutation(rank)[: d.integer(1, rank)].tolist()
    rows = [_slice_axis(d, data.array.shape[a]) for a in axes]
    attrs = {"axes": tuple(_maybe_negative(d, a, rank) for a in axes),
             "starts": tuple(r[0] for r in rows), "ends": tuple(r[1] for r in rows),
             "steps": tuple(r[2] for r in rows)}
    return Spec((data,), attrs, EXACT)


@generates(("Gather",), ALL)
def _gather(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    axis = d.integer(0, data.array.ndim - 1)
    dim = data.array.shape[axis]
    index_dtype = np.dtype(d.pick(("int64", "int32")))
    indices = integers(d, shape(d, 0, 2), index_dtype, -dim, dim - 1)  # negatives count from the end
    attrs = {"axis": _maybe_negative(d, axis, data.array.ndim)}
    if d.edge():
        # One index just out of range, at run time: the reference raises, so must the
        # backend (a constant one is refused when the graph is built, before any backend).
        indices = indices.reshape(-1)[:3].copy() if indices.size else np.zeros(1, index_dtype)
        indices[int(d.rng.integers(indices.size))] = d.pick((dim, -dim - 1))
        return Spec((data, Operand("indices", indices)), attrs, EXACT, error=InputError)
    operands = (data, Operand("indices", indices, constant=d.pick((False, True))))
    return Spec(operands, attrs, EXACT)


@generates(("Unsqueeze",), ALL)
def _unsqueeze(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype, 0, 3)
    out_rank = data.array.ndim + d.integer(1, 2)
    axes = d.rng.permutation(out_rank)[: out_rank - data.array.ndim].tolist()
    return Spec((data,), {"axes": tuple(_maybe_negative(d, a, out_rank) for a in axes)}, EXACT)


@generates(("Squeeze",), ALL)
def _squeeze(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = tuple(1 if d.pick((True, False)) else n for n in shape(d, 1, 4))
    ones = [i for i, n in enumerate(s) if n == 1]
    chosen = [a for a in ones if d.pick((True, False))]
    attrs = d.pick(({}, {"axes": tuple(_maybe_negative(d, a, len(s)) for a in chosen)}))
    return Spec((Operand("data", values(d, s, dtype)),), attrs, EXACT)


@generates(("Expand",), ALL)
def _expand(op: str, d: Draw, dtype: np.dtype) -> Spec:
    full = shape(d, 1, 4)
    # The input and the shape attribute are each a suffix of `full` with some dims 1.
    def part() -> tuple[int, ...]:
        dims = full[len(full) - d.integer(0, len(full)):]
        return tuple(1 if d.pick((True, False)) else n for n in dims)

    x = values(d, part(), dtype)
    return Spec((Operand("input", x),), {"shape": part()}, EXACT)


@generates(("Shape",), ALL)
def _shape(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    rank = data.array.ndim
    start = d.integer(-rank, rank - 1)
    first = start % rank
    stop = d.integer(first + 1, rank)
    end = d.pick((None, stop, stop - rank if stop < rank else _INT64_MAX))
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    return Spec((data,), attrs, EXACT)


@generates(("Size",), ALL)
def _size(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return Spec((_data(d, dtype, 0),), {}, EXACT)


@generates(("ConstantOfShape",), ALL)
def _constant_of_shape(op: str, d: Draw, dtype: np.dtype) -> Spec:
    out = shape(d, 0, 3)
    value = values(d, (1,), dtype)
    return Spec((), {"shape": out, "value": value}, EXACT)


@generates(("Pad",), ALL)
def _pad(op: str, d: Draw, dtype: np.dtype) -> Spec:
    data = _data(d, dtype)
    mode = d.pick(("constant", "reflect", "edge", "wrap"))
    dims = data.array.shape
    begins, ends = [], []
    for n in dims:
        # A negative pad crops; what is left keeps at least one element.
        begin = d.integer(-(n - 1) // 2, 3)
        end = d.integer(-(n - 1 + min(begin, 0)) // 2, 3)
        begins.append(begin)
        ends.append(end)
    attrs: dict = {"pads": tuple(begins + ends), "mode": mode}
    if mode == "constant" and d.pick((False, True)):
        attrs["value"] = values(d, (), dtype)
    return Spec((data,), attrs, EXACT)


_BITCAST_INPUTS = ("float32", "float16", "float64", "bfloat16", "float8_e4m3fn",
                   "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "int8",
                   "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool")


@generates(("BitCast",), _BITCAST_INPUTS)
def _bitcast(op: str, d: Draw, dtype: np.dtype) -> Spec:
    """Random bit patterns (NaNs with payloads, infinities, subnormals among the floats)
    read as another dtype of the same width; bool only from bool."""
    s = shape(d, 0, 3)
    if dtype.kind == "b":
        x = values(d, s, dtype)
        targets = ("uint8", "int8", "bool")
    else:
        raw = d.rng.integers(0, 256, (*s, dtype.itemsize), dtype=np.uint8)
        x = raw.view(dtype).reshape(s)
        targets = tuple(t for t in _BITCAST_INPUTS[:-1]
                        if as_dtype(t).itemsize == dtype.itemsize)
    return Spec((Operand("input", x),), {"to": d.pick(targets)}, EXACT)
