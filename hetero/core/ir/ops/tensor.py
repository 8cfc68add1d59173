"""Tensor-manipulation ops: reshaping, reordering, joining, splitting, indexing, padding and
reinterpreting bits (BitCast).

They move data and compute nothing, so they count no FLOPs. Every static operand
that ONNX passes as an input (Reshape's shape, Slice's starts, Unsqueeze's axes) is
an attribute here, and ``complete`` puts axes and indices in canonical form
(non-negative, sorted, clamped), so no backend re-derives ONNX's negative-index
and clamping rules.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, index_problem, no_flops, register
from hetero.core.ir.ops.common import (
    broadcast_shapes,
    normalize_axes,
    normalize_axis,
    require_dtype,
    same_dtype,
)
from hetero.core.ir.types import BFLOAT16, NARROW_FLOAT_DTYPES, TensorType
from hetero.errors import InputError, OpAttributeError, ShapeError

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _require_sizes(sizes: tuple[int, ...], what: str) -> None:
    if any(d < 0 for d in sizes):
        raise OpAttributeError(f"{what} {list(sizes)} has a negative entry: sizes are explicit and "
                               ">= 0 (ONNX's -1 must be resolved before the node is built)")


# -- Reshape, Flatten, Transpose ------------------------------------------------------
def _reshape_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    shape = attrs["shape"]
    _require_sizes(shape, "Reshape shape")
    if math.prod(shape) != ins[0].size:
        hint = (" (a 0 is a size here: resolve ONNX's copy-this-dim 0 before building the node)"
                if 0 in shape else "")
        raise ShapeError(f"cannot reshape {ins[0]} ({ins[0].size} elements) to {list(shape)}"
                         f" ({math.prod(shape)} elements){hint}")
    return [TensorType(shape, ins[0].dtype)]


register(OpDef(
    "Reshape", ("data",), ("reshaped",), _reshape_infer,
    lambda ins, attrs: [ins[0].reshape(attrs["shape"])],
    attrs={"shape": Attr("ints", doc="the output shape with ONNX's copy-dim 0 and inferred -1 "
                                     "resolved: every entry is the dim's size")},
    flops=no_flops,
    doc="the same elements in row-major order under a new shape of the same size",
))


def _flatten_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    rank, axis = ins[0].rank, attrs["axis"]
    if not -rank <= axis <= rank:
        raise ShapeError(f"Flatten axis {axis} is out of range for rank {rank}: use [-{rank}, {rank}]")
    attrs["axis"] = axis + rank if axis < 0 else axis
    return attrs


def _flatten_shape(shape: tuple[int, ...], axis: int) -> tuple[int, int]:
    return math.prod(shape[:axis]), math.prod(shape[axis:])


register(OpDef(
    "Flatten", ("input",), ("output",),
    lambda ins, attrs: [TensorType(_flatten_shape(ins[0].shape, attrs["axis"]), ins[0].dtype)],
    lambda ins, attrs: [ins[0].reshape(_flatten_shape(ins[0].shape, attrs["axis"]))],
    attrs={"axis": Attr("int", 1, "dims before it form the rows, the rest the columns; "
                                  "canonical in [0, rank]")},
    flops=no_flops, complete=_flatten_complete,
    doc="reshape to 2-D (prod(shape[:axis]), prod(shape[axis:]))",
))


def _transpose_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    if attrs["perm"] is None:
        attrs["perm"] = tuple(reversed(range(ins[0].rank)))
    return attrs


def _transpose_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    perm = attrs["perm"]
    if sorted(perm) != list(range(ins[0].rank)):
        raise ShapeError(f"perm {list(perm)} is not a permutation of the {ins[0].rank} axes of {ins[0]}")
    return [TensorType([ins[0].shape[p] for p in perm], ins[0].dtype)]


register(OpDef(
    "Transpose", ("data",), ("transposed",), _transpose_infer,
    lambda ins, attrs: [np.transpose(ins[0], attrs["perm"])],
    attrs={"perm": Attr("ints", None, "output axis i is input axis perm[i]; derived: reversed axes")},
    flops=no_flops, complete=_transpose_complete,
    doc="permute the axes",
))


# -- Concat, Split ------------------------------------------------------------------
def _concat_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    if not ins:
        raise ShapeError("Concat needs at least one input")
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank, "Concat axis")
    return attrs


def _concat_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    axis, first = attrs["axis"], ins[0]
    dtype = same_dtype(ins, "Concat inputs")
    for i, t in enumerate(ins[1:], 1):
        if t.rank != first.rank or any(
            a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != axis
        ):
            raise ShapeError(f"input {i} has shape {list(t.shape)} but input 0 has {list(first.shape)}: "
                             f"every dimension except axis {axis} must match")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in ins)
    return [TensorType(shape, dtype)]


register(OpDef(
    "Concat", ("inputs*",), ("concat_result",), _concat_infer,
    lambda ins, attrs: [np.concatenate(ins, axis=attrs["axis"])],
    attrs={"axis": Attr("int", doc="the axis to join along; canonical non-negative")},
    flops=no_flops, complete=_concat_complete,
    doc="join the inputs along ``axis``",
))


def _split_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank, "Split axis")
    return attrs


def _split_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    axis, split = attrs["axis"], attrs["split"]
    _require_sizes(split, "Split's split")
    if sum(split) != ins[0].shape[axis]:
        raise ShapeError(f"split sizes {list(split)} sum to {sum(split)} but axis {axis} of "
                         f"{ins[0]} has {ins[0].shape[axis]}")
    shape = list(ins[0].shape)
    return [TensorType(shape[:axis] + [n] + shape[axis + 1:], ins[0].dtype) for n in split]


def _split_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    return np.split(ins[0], np.cumsum(attrs["split"])[:-1], axis=attrs["axis"])


register(OpDef(
    "Split", ("input",), ("outputs*",), _split_infer, _split_reference,
    attrs={"axis": Attr("int", 0, "the axis to cut; canonical non-negative"),
           "split": Attr("ints", doc="the size of each output along axis; they sum to its dim")},
    flops=no_flops, complete=_split_complete,
    doc="cut the input along ``axis`` into one output per entry of ``split``",
))


# -- Slice, Gather ------------------------------------------------------------------
def _clamp_slice(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX Slice's clamping of one axis, with "past the beginning" written -(dim + 1)."""
    if dim == 0:
        return 0, 0
    start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    end = min(max(end, -1), dim - 1)
    # ONNX clamps such an end to -1, but -1 read again as an ONNX index means dim - 1:
    # -(dim + 1) means "past the beginning" both to ONNX's rules and to Python's slices,
    # so canonicalising twice changes nothing.
    return min(max(start, 0), dim - 1), end if end >= 0 else -dim - 1


def _slice_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    keys = ("starts", "ends", "axes", "steps")
    lengths = {k: len(attrs[k]) for k in keys}
    if len(set(lengths.values())) != 1:
        raise OpAttributeError(f"Slice's starts, ends, axes and steps must have one length, got {lengths}")
    if 0 in attrs["steps"]:
        raise OpAttributeError(f"Slice steps {list(attrs['steps'])} contain 0; a step must be non-zero")
    data = ins[0]
    axes = [normalize_axis(a, data.rank, "Slice axis") for a in attrs["axes"]]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"Slice axes {list(attrs['axes'])} name an axis twice (rank {data.rank})")
    rows = sorted(zip(axes, attrs["starts"], attrs["ends"], attrs["steps"]))
    clamped = [_clamp_slice(s, e, st, data.shape[a]) for a, s, e, st in rows]
    attrs.update(starts=tuple(c[0] for c in clamped), ends=tuple(c[1] for c in clamped),
                 axes=tuple(r[0] for r in rows), steps=tuple(r[3] for r in rows))
    return attrs


def _slice_index(rank: int, attrs: dict[str, Any]) -> tuple[slice, ...]:
    index = [slice(None)] * rank
    for a, s, e, st in zip(attrs["axes"], attrs["starts"], attrs["ends"], attrs["steps"]):
        index[a] = slice(s, e, st)
    return tuple(index)


def _slice_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    index = _slice_index(ins[0].rank, attrs)
    shape = [len(range(*s.indices(d))) for s, d in zip(index, ins[0].shape)]
    return [TensorType(shape, ins[0].dtype)]


register(OpDef(
    "Slice", ("data",), ("output",), _slice_infer,
    lambda ins, attrs: [ins[0][_slice_index(ins[0].ndim, attrs)]],
    attrs={"starts": Attr("ints", doc="first index on each sliced axis"),
           "ends": Attr("ints", doc="end index (exclusive) on each sliced axis"),
           "axes": Attr("ints", doc="the sliced axes"),
           "steps": Attr("ints", doc="the stride on each sliced axis, non-zero")},
    flops=no_flops, complete=_slice_complete,
    doc="""data[starts:ends:steps] on each of ``axes`` (ONNX Slice).

``complete`` accepts ONNX's raw values (negative indices counting from the end,
INT64_MAX / INT64_MIN ends, axes in any order) and writes the canonical form:
axes sorted, unique, non-negative, with starts and ends clamped as ONNX clamps them.
For a dim ``d``: with step > 0, start and end lie in [0, d]; with step < 0, start
lies in [0, d - 1] and end in [0, d - 1], or is ``-(d + 1)`` when the slice runs
through index 0 (ONNX's internal "-1, past the beginning", which a second pass of
ONNX's own rules would read as ``d - 1``). A dim of 0 gives start = end = 0. The
canonical values are exact Python slice bounds: ``x[start:end:step]`` on each axis.""",
))


def _gather_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank, "Gather axis")
    return attrs


def _gather_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, indices = ins
    require_dtype(indices, _INDEX_DTYPES, "Gather indices")
    axis = attrs["axis"]
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    return [TensorType(shape, data.dtype)]


def _gather_index_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(1, attrs["axis"], ins[0].shape[attrs["axis"]])]


def _gather_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, indices = ins
    axis = attrs["axis"]
    problem = index_problem(indices, axis, data.shape[axis])
    if problem is not None:
        raise InputError(f"Gather {problem}")
    return [np.take(data, indices, axis=axis)]


register(OpDef(
    "Gather", ("data", "indices"), ("output",), _gather_infer, _gather_reference,
    attrs={"axis": Attr("int", 0, "the axis indexed; canonical non-negative")},
    flops=no_flops, complete=_gather_complete, index_bounds=_gather_index_bounds,
    doc="take entries of ``data`` along ``axis`` at ``indices`` (int32/int64; negative "
        "indices count from the end, out-of-range ones are an error: constant ones when "
        "the node is built, run-time ones when it runs)",
))


# -- Unsqueeze, Squeeze, Expand -------------------------------------------------------
def _unsqueeze_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    attrs["axes"] = normalize_axes(attrs["axes"], ins[0].rank + len(attrs["axes"]), "Unsqueeze axes")
    return attrs


def _unsqueeze_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    dims = iter(shape)
    return tuple(1 if i in axes else next(dims) for i in range(len(shape) + len(axes)))


register(OpDef(
    "Unsqueeze", ("data",), ("expanded",),
    lambda ins, attrs: [TensorType(_unsqueeze_shape(ins[0].shape, attrs["axes"]), ins[0].dtype)],
    lambda ins, attrs: [ins[0].reshape(_unsqueeze_shape(ins[0].shape, attrs["axes"]))],
    attrs={"axes": Attr("ints", doc="where the new size-1 dims go, in the output's rank; "
                                    "canonical sorted non-negative")},
    flops=no_flops, complete=_unsqueeze_complete,
    doc="insert size-1 dimensions at ``axes`` of the output",
))


def _squeeze_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    shape = ins[0].shape
    if attrs["axes"] is None:
        attrs["axes"] = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        attrs["axes"] = normalize_axes(attrs["axes"], len(shape), "Squeeze axes")
    return attrs


def _squeeze_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    shape, axes = ins[0].shape, attrs["axes"]
    for a in axes:
        if shape[a] != 1:
            raise ShapeError(f"cannot squeeze axis {a} of {ins[0]}: its size is {shape[a]}, not 1")
    return [TensorType([d for i, d in enumerate(shape) if i not in axes], ins[0].dtype)]


register(OpDef(
    "Squeeze", ("data",), ("squeezed",), _squeeze_infer,
    lambda ins, attrs: [ins[0].reshape([d for i, d in enumerate(ins[0].shape) if i not in attrs["axes"]])],
    attrs={"axes": Attr("ints", None, "the size-1 dims to remove; derived: all of them (an "
                                      "explicit empty list removes none); canonical sorted "
                                      "non-negative")},
    flops=no_flops, complete=_squeeze_complete,
    doc="remove size-1 dimensions",
))


def _expand_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    _require_sizes(attrs["shape"], "Expand shape")
    try:
        shape = broadcast_shapes(ins[0].shape, attrs["shape"])
    except ShapeError:
        raise ShapeError(f"cannot expand {ins[0]} to shape {list(attrs['shape'])}: each pair of "
                         "trailing dims must be equal or one of them 1") from None
    return [TensorType(shape, ins[0].dtype)]


register(OpDef(
    "Expand", ("input",), ("output",), _expand_infer,
    lambda ins, attrs: [np.array(np.broadcast_to(
        ins[0], broadcast_shapes(ins[0].shape, attrs["shape"])))],
    attrs={"shape": Attr("ints", doc="broadcast with the input's shape to give the output's")},
    flops=no_flops,
    doc="broadcast the input to broadcast(input.shape, shape) (ONNX Expand: ``shape`` may "
        "hold 1 where the input is larger, and may have a smaller rank)",
))


# -- Shape, ConstantOfShape -----------------------------------------------------------
def _shape_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    rank = ins[0].rank
    end = rank if attrs["end"] is None else attrs["end"]
    attrs["start"], attrs["end"] = (min(max(x + rank if x < 0 else x, 0), rank)
                                    for x in (attrs["start"], end))
    return attrs


def _shape_fold(ins: list[TensorType], attrs: dict[str, Any]) -> list[np.ndarray]:
    return [np.array(ins[0].shape[attrs["start"]:attrs["end"]], dtype=np.int64)]


register(OpDef(
    "Shape", ("data",), ("shape",),
    lambda ins, attrs: [TensorType((max(attrs["end"] - attrs["start"], 0),), np.int64)],
    lambda ins, attrs: _shape_fold([TensorType.of(ins[0])], attrs),
    attrs={"start": Attr("int", 0, "first dim reported; canonical clamped to [0, rank]"),
           "end": Attr("int", None, "end dim (exclusive); derived: rank; canonical clamped "
                                    "to [0, rank]")},
    flops=no_flops, fold=_shape_fold, complete=_shape_complete,
    doc="the input's dims [start, end) as a 1-D int64 tensor; computable from the type alone",
))


register(OpDef(
    "Size", ("data",), ("size",),
    lambda ins, attrs: [TensorType((), np.int64)],
    lambda ins, attrs: [np.array(ins[0].size, np.int64)],
    flops=no_flops, fold=lambda ins, attrs: [np.array(ins[0].size, np.int64)],
    doc="the input's element count as an int64 scalar; computable from the type alone",
))


def _constant_of_shape_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    _require_sizes(attrs["shape"], "ConstantOfShape shape")
    if attrs["value"].size != 1:
        raise OpAttributeError(f"ConstantOfShape value must hold one element, got shape "
                               f"{list(attrs['value'].shape)}")
    return [TensorType(attrs["shape"], attrs["value"].dtype)]


_ZERO = np.zeros(1, np.float32)
_ZERO.flags.writeable = False

register(OpDef(
    "ConstantOfShape", (), ("output",), _constant_of_shape_infer,
    lambda ins, attrs: [np.full(attrs["shape"], attrs["value"].reshape(()), attrs["value"].dtype)],
    attrs={"shape": Attr("ints", doc="the output shape"),
           "value": Attr("tensor", _ZERO, "the one-element fill value; its dtype is the output's")},
    flops=no_flops,
    doc="a tensor of ``shape`` filled with ``value``",
))


# -- Pad ------------------------------------------------------------------------------
_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _pad_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    data = ins[0]
    if attrs["mode"] not in _PAD_MODES:
        raise OpAttributeError(f"Pad mode {attrs['mode']!r} is not one of {list(_PAD_MODES)}")
    if len(attrs["pads"]) != 2 * data.rank:
        raise OpAttributeError(f"Pad pads {list(attrs['pads'])} must hold 2 x rank = "
                               f"{2 * data.rank} entries (all begins, then all ends) for {data}")
    if attrs["value"] is None:
        attrs["value"] = np.zeros((), data.dtype)
    elif attrs["value"].size != 1:
        raise OpAttributeError(f"Pad value must hold one element, got shape {list(attrs['value'].shape)}")
    return attrs


def _pad_cropped(shape: tuple[int, ...], pads: tuple[int, ...]) -> list[int]:
    """Each dim after the negative pads have cropped it."""
    rank = len(shape)
    return [d + min(pads[a], 0) + min(pads[rank + a], 0) for a, d in enumerate(shape)]


def _pad_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, pads, mode = ins[0], attrs["pads"], attrs["mode"]
    rank = data.rank
    cropped = _pad_cropped(data.shape, pads)
    for a, d in enumerate(cropped):
        grows = pads[a] > 0 or pads[rank + a] > 0
        if d < 0 or (d == 0 and grows and mode != "constant"):
            raise ShapeError(f"Pad pads {list(pads)} leave axis {a} of {data} with {d} elements"
                             + (f", from which {mode} mode cannot pad" if d == 0 else
                                ": negative pads may crop at most the whole axis"))
    shape = [d + max(pads[a], 0) + max(pads[rank + a], 0) for a, d in enumerate(cropped)]
    return [TensorType(shape, data.dtype)]


def _pad_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, pads, mode = ins[0], attrs["pads"], attrs["mode"]
    rank = data.ndim
    crop = tuple(slice(-min(pads[a], 0), data.shape[a] + min(pads[rank + a], 0)) for a in range(rank))
    width = [(max(pads[a], 0), max(pads[rank + a], 0)) for a in range(rank)]
    cropped = data[crop]
    if mode == "constant":
        value = attrs["value"].reshape(()).astype(data.dtype)
        return [np.pad(cropped, width, mode="constant", constant_values=value)]
    return [np.pad(cropped, width, mode=mode)]


register(OpDef(
    "Pad", ("data",), ("output",), _pad_infer, _pad_reference,
    attrs={"pads": Attr("ints", doc="2 x rank entries: the begin pad of every axis, then the end "
                                    "pads; a negative pad crops that many elements"),
           "mode": Attr("str", "constant", "constant, reflect (mirror without the edge), edge "
                                           "(repeat the edge) or wrap (periodic)"),
           "value": Attr("tensor", None, "the one-element fill of constant mode; derived: 0 of "
                                         "the data's dtype")},
    flops=no_flops, complete=_pad_complete,
    doc="""pad each axis at both ends (ONNX Pad, every axis explicit).

Negative pads crop first, as onnxruntime does; the positive ones then pad the cropped
tensor. reflect and wrap repeat periodically when a pad exceeds the axis (numpy's
rule); edge and reflect of a 1-element axis repeat it.""",
))


# -- BitCast --------------------------------------------------------------------------
#: The dtypes BitCast reinterprets between (a bool is its byte, 0 or 1): every dtype of
#: a whole number of bytes (int4, int2 and float4, packed in ONNX, are not).
BITCAST_DTYPES = tuple(np.dtype(d) for d in (
    "bool", "int8", "uint8", "int16", "uint16", "float16", "int32", "uint32", "float32",
    "int64", "uint64", "float64")) + ((BFLOAT16,) if BFLOAT16 is not None else ()) + tuple(
    d for d in NARROW_FLOAT_DTYPES if d.name.startswith("float8"))


def _bitcast_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, to = ins[0], attrs["to"]
    require_dtype(x, BITCAST_DTYPES, "BitCast input")
    require_dtype(TensorType((), to), BITCAST_DTYPES, "BitCast to")
    if to.itemsize != x.dtype.itemsize:
        raise ShapeError(f"BitCast from {x.dtype.name} to {to.name}: ONNX reinterprets only "
                         "between types of the same bit width")
    if to.kind == "b" and x.dtype.kind != "b":
        raise ShapeError(f"BitCast from {x.dtype.name} to bool: a byte other than 0 or 1 is no "
                         "bool; compare with 0 (Cast) instead")
    return [TensorType(x.shape, to)]


register(OpDef(
    "BitCast", ("input",), ("output",), _bitcast_infer,
    lambda ins, attrs: [np.array(ins[0]).reshape(-1).view(attrs["to"]).reshape(np.shape(ins[0]))],
    attrs={"to": Attr("dtype", doc="the dtype the bits are read as; as wide as the input's")},
    flops=no_flops,
    doc="the input's bits, unchanged, read as ``to`` (little endian, the shape kept)",
))
