"""Indexing and data-movement ops: gathers and scatters by index tensors, tiling,
triangles, one-hot and identity-like tensors, block rearrangements, running sums and products.

Index tensors (GatherElements, GatherND, ScatterElements, ScatterND) are int32 or
int64; a negative index counts from the end and one out of range is an error, never
a clamp: each op declares ``index_bounds``, so constant indices are refused when the
node is built and run-time ones before a backend's kernel reads with them. Scatters
with ``reduction="none"`` and two updates for one element leave it undefined in
ONNX; here, as in onnx's reference, the last update wins. Only CumSum and CumProd
compute (sums, products); the others count no FLOPs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, index_problem, no_flops, register
from hetero.core.ir.ops.common import normalize_axis, require_dtype, same_dtype
from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import InputError, OpAttributeError, ShapeError

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
REDUCTIONS = ("none", "add", "mul", "max", "min")


def _check(op: str, indices: np.ndarray, axis: int, size: int | tuple[int, ...]) -> None:
    problem = index_problem(indices, axis, size)
    if problem is not None:
        raise InputError(f"{op} {problem}")


def _wrap(indices: np.ndarray, size: int | tuple[int, ...]) -> np.ndarray:
    indices = np.asarray(indices, np.int64)
    return np.where(indices < 0, indices + np.asarray(size, np.int64), indices)


def _reduction(attrs: dict[str, Any], op: str) -> str:
    if attrs["reduction"] not in REDUCTIONS:
        raise OpAttributeError(f"{op} reduction {attrs['reduction']!r} is not one of {list(REDUCTIONS)}")
    return attrs["reduction"]


_UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _scatter_into(out: np.ndarray, targets: tuple[np.ndarray, ...], updates: np.ndarray,
                  reduction: str) -> np.ndarray:
    """``out`` with ``updates[k]`` combined into ``out[targets[0][k], targets[1][k], ...]``
    (each target array 1-D, non-negative; the updates may carry trailing slice dims) one
    k after another: duplicates combine in order (``ufunc.at`` is unbuffered), and with
    reduction "none" the last one wins, as in onnx's reference."""
    if reduction == "none":
        linear = np.ravel_multi_index(targets, out.shape[:len(targets)])
        _, from_end = np.unique(linear[::-1], return_index=True)
        last = linear.size - 1 - from_end
        out[tuple(t[last] for t in targets)] = updates[last]
    else:
        with np.errstate(over="ignore"):  # integers wrap, as the backends' do
            _UFUNCS[reduction].at(out, targets, updates)
    return out


def _axis_complete(what: str) -> Any:
    def complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
        attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank, f"{what} axis")
        return attrs

    return complete


# -- GatherElements, ScatterElements ---------------------------------------------------------
def _elements_shapes(data: TensorType, indices: TensorType, axis: int, op: str) -> None:
    require_dtype(indices, _INDEX_DTYPES, f"{op} indices")
    if indices.rank != data.rank:
        raise ShapeError(f"{op} indices {indices} must have the rank of data {data}")
    for k, (i, d) in enumerate(zip(indices.shape, data.shape)):
        if k != axis and i > d:
            raise ShapeError(f"{op} indices {indices} are larger than data {data} on axis {k}: "
                             "only the indexed axis may be longer")


def _elements_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[int, int, int]]:
    return [(1, attrs["axis"], ins[0].shape[attrs["axis"]])]


def _positions(indices: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """The full index tuple each element of ``indices`` names (its own position, with
    ``indices`` on ``axis``), as arrays of ``indices``' shape."""
    grid = list(np.indices(indices.shape, sparse=True))
    grid[axis] = _wrap(indices, 0)
    return tuple(np.broadcast_to(g, indices.shape) for g in grid)


def _gather_elements_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, indices = ins
    axis = attrs["axis"]
    _check("GatherElements", indices, axis, data.shape[axis])
    positions = list(_positions(_wrap(indices, data.shape[axis]), axis))
    return [np.array(data[tuple(positions)])]


def _gather_elements_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    _elements_shapes(ins[0], ins[1], attrs["axis"], "GatherElements")
    return [TensorType(ins[1].shape, ins[0].dtype)]


register(OpDef(
    "GatherElements", ("data", "indices"), ("output",), _gather_elements_infer,
    _gather_elements_reference,
    attrs={"axis": Attr("int", 0, "the axis indexed; canonical non-negative")},
    flops=no_flops, complete=_axis_complete("GatherElements"), index_bounds=_elements_bounds,
    doc="output[p] = data[p with p[axis] = indices[p]]: the output has the indices' shape, "
        "which may be smaller than data's on the other axes",
))


def _scatter_elements_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, indices, updates = ins
    _elements_shapes(data, indices, attrs["axis"], "ScatterElements")
    if updates.shape != indices.shape:
        raise ShapeError(f"ScatterElements updates {updates} must have the indices' shape "
                         f"{list(indices.shape)}")
    same_dtype([data, updates], "ScatterElements data and updates")
    if _reduction(attrs, "ScatterElements") != "none" and data.dtype.kind == "b":
        raise ShapeError(f"ScatterElements reduction {attrs['reduction']!r} needs numeric data, got bool")
    return [data]


def _scatter_elements_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, indices, updates = ins
    axis, reduction = attrs["axis"], attrs["reduction"]
    _check("ScatterElements", indices, axis, data.shape[axis])
    positions = _positions(_wrap(indices, data.shape[axis]), axis)
    targets = tuple(p.reshape(-1) for p in positions)  # row-major order of the indices
    return [_scatter_into(np.array(data), targets, updates.reshape(-1), reduction)]


register(OpDef(
    "ScatterElements", ("data", "indices", "updates"), ("output",), _scatter_elements_infer,
    _scatter_elements_reference,
    attrs={"axis": Attr("int", 0, "the axis indexed; canonical non-negative"),
           "reduction": Attr("str", "none", "how an update meets the element: none (replace), "
                                            "add, mul, max or min")},
    flops=no_flops, complete=_axis_complete("ScatterElements"), index_bounds=_elements_bounds,
    doc="a copy of data with output[p with p[axis] = indices[p]] combined with updates[p] "
        "for every position p of indices, in row-major order (Scatter of opset 9 is this op)",
))


# -- GatherND, ScatterND ------------------------------------------------------------
def _nd_bounds(data: TensorType, indices: TensorType, batch: int) -> tuple[int, ...]:
    return tuple(data.shape[batch:batch + indices.shape[-1]])


def _gather_nd_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, indices = ins
    b = attrs["batch_dims"]
    require_dtype(indices, _INDEX_DTYPES, "GatherND indices")
    if indices.rank < 1 or not 0 <= b < min(data.rank, indices.rank):
        raise ShapeError(f"GatherND batch_dims {b} must be below the ranks of data {data} and "
                         f"indices {indices}")
    if data.shape[:b] != indices.shape[:b]:
        raise ShapeError(f"GatherND's first {b} (batch) dims differ: data {data}, indices {indices}")
    q = indices.shape[-1]
    if not 1 <= q <= data.rank - b:
        raise ShapeError(f"GatherND indices {indices} index {q} axes; data {data} has "
                         f"{data.rank - b} after its {b} batch dims")
    return [TensorType(indices.shape[:-1] + data.shape[b + q:], data.dtype)]


def _gather_nd_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[int, int, Any]]:
    b = attrs["batch_dims"]
    return [(1, b, _nd_bounds(ins[0], ins[1], b))]


def _gather_nd_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, indices = ins
    b, q = attrs["batch_dims"], indices.shape[-1]
    sizes = tuple(data.shape[b:b + q])
    _check("GatherND", indices, b, sizes)
    wrapped = _wrap(indices, sizes)
    batch = math.prod(data.shape[:b])
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = wrapped.reshape(batch, -1, q)
    entry = np.broadcast_to(np.arange(batch)[:, None], flat_idx.shape[:2])
    picked = flat_data[(entry,) + tuple(flat_idx[..., j] for j in range(q))]
    return [np.array(picked.reshape(indices.shape[:-1] + data.shape[b + q:]))]


register(OpDef(
    "GatherND", ("data", "indices"), ("output",), _gather_nd_infer, _gather_nd_reference,
    attrs={"batch_dims": Attr("int", 0, "leading dims shared by data and indices")},
    flops=no_flops, index_bounds=_gather_nd_bounds,
    doc="slices of data at the index tuples in the last axis of indices, after "
        "``batch_dims`` leading batch dims; column j of an index tuple indexes data's "
        "axis batch_dims + j",
))


def _scatter_nd_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    data, indices, updates = ins
    require_dtype(indices, _INDEX_DTYPES, "ScatterND indices")
    same_dtype([data, updates], "ScatterND data and updates")
    q = indices.shape[-1] if indices.rank else 0
    if indices.rank < 1 or not 1 <= q <= data.rank:
        raise ShapeError(f"ScatterND indices {indices} must index 1 to {data.rank} axes of data {data}")
    want = indices.shape[:-1] + data.shape[q:]
    if updates.shape != want:
        raise ShapeError(f"ScatterND updates {updates} must have shape {list(want)} "
                         "(indices' dims but the last, then data's dims after the indexed ones)")
    if _reduction(attrs, "ScatterND") != "none" and data.dtype.kind == "b":
        raise ShapeError(f"ScatterND reduction {attrs['reduction']!r} needs numeric data, got bool")
    return [data]


def _scatter_nd_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[int, int, Any]]:
    return [(1, 0, _nd_bounds(ins[0], ins[1], 0))]


def _scatter_nd_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    data, indices, updates = ins
    reduction, q = attrs["reduction"], indices.shape[-1]
    sizes = tuple(data.shape[:q])
    _check("ScatterND", indices, 0, sizes)
    wrapped = _wrap(indices, sizes).reshape(-1, q)
    targets = tuple(wrapped[:, j] for j in range(q))
    slices = updates.reshape((wrapped.shape[0],) + data.shape[q:])
    return [_scatter_into(np.array(data), targets, slices, reduction)]


register(OpDef(
    "ScatterND", ("data", "indices", "updates"), ("output",), _scatter_nd_infer,
    _scatter_nd_reference,
    attrs={"reduction": Attr("str", "none", "how an update meets the slice: none (replace), "
                                            "add, mul, max or min")},
    flops=no_flops, index_bounds=_scatter_nd_bounds,
    doc="a copy of data with the slice at each index tuple (the last axis of indices) "
        "combined with its updates, in row-major order of the tuples",
))


# -- Tile, Trilu, EyeLike -----------------------------------------------------------
def _tile_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    repeats = attrs["repeats"]
    if len(repeats) != ins[0].rank or any(r < 0 for r in repeats):
        raise ShapeError(f"Tile repeats {list(repeats)} must be one count >= 0 per axis of {ins[0]}")
    return [TensorType(tuple(d * r for d, r in zip(ins[0].shape, repeats)), ins[0].dtype)]


register(OpDef(
    "Tile", ("input",), ("output",), _tile_infer,
    lambda ins, attrs: [np.tile(ins[0], attrs["repeats"])],
    attrs={"repeats": Attr("ints", doc="how many copies along each axis")},
    flops=no_flops,
    doc="the input repeated ``repeats[k]`` times along each axis k",
))


def _trilu_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    if ins[0].rank < 2:
        raise ShapeError(f"Trilu needs a tensor of rank >= 2, got {ins[0]}")
    return [ins[0]]


def _trilu_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    k = attrs["k"]
    return [np.triu(ins[0], k) if attrs["upper"] else np.tril(ins[0], k)]


register(OpDef(
    "Trilu", ("input",), ("output",), _trilu_infer, _trilu_reference,
    attrs={"upper": Attr("int", 1, "1 keeps the upper triangle, 0 the lower"),
           "k": Attr("int", 0, "the diagonal that bounds it: 0 the main one, > 0 above")},
    flops=no_flops,
    doc="the upper (j - i >= k) or lower (j - i <= k) triangle of each matrix in the "
        "last two axes, the rest zero",
))


def _eye_like_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    if attrs["dtype"] is None:
        attrs["dtype"] = ins[0].dtype
    return attrs


def _eye_like_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    if ins[0].rank != 2:
        raise ShapeError(f"EyeLike needs a 2-D input, got {ins[0]}")
    return [TensorType(ins[0].shape, attrs["dtype"])]


register(OpDef(
    "EyeLike", ("input",), ("output",), _eye_like_infer,
    lambda ins, attrs: [np.eye(*ins[0].shape, k=attrs["k"], dtype=attrs["dtype"])],
    attrs={"k": Attr("int", 0, "the diagonal of ones: 0 the main one, > 0 above"),
           "dtype": Attr("dtype", None, "the output dtype; derived: the input's")},
    flops=no_flops, complete=_eye_like_complete,
    doc="ones on diagonal k and zeros elsewhere, in the input's shape (its values are unread)",
))


# -- OneHot ---------------------------------------------------------------------------
def _one_hot_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    rank = ins[0].rank
    attrs["axis"] = normalize_axis(attrs["axis"], rank + 1, "OneHot axis")
    return attrs


def _one_hot_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    indices, values = ins
    if indices.dtype.kind not in "iuf":
        raise ShapeError(f"OneHot indices must be numeric, got {indices.dtype.name}")
    if values.shape != (2,):
        raise ShapeError(f"OneHot values {values} must hold two elements: [off_value, on_value]")
    if attrs["depth"] < 1:
        raise OpAttributeError(f"OneHot depth {attrs['depth']} must be at least 1")
    axis = attrs["axis"]
    return [TensorType(indices.shape[:axis] + (attrs["depth"],) + indices.shape[axis:], values.dtype)]


def _one_hot_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    indices, values = ins
    depth, axis = attrs["depth"], attrs["axis"]
    # Non-integer indices are cast to int64 (truncated) first; an index outside
    # [-depth, depth) selects no position, so its row is all off_value.
    index = np.expand_dims(_wrap(np.trunc(indices) if indices.dtype.kind == "f" else indices, depth), axis)
    shape = [1] * (indices.ndim + 1)
    shape[axis] = depth
    hot = index == np.arange(depth).reshape(shape)
    return [np.where(hot, values[1], values[0]).astype(values.dtype)]


register(OpDef(
    "OneHot", ("indices", "values"), ("output",), _one_hot_infer, _one_hot_reference,
    attrs={"depth": Attr("int", doc="the size of the new axis"),
           "axis": Attr("int", -1, "where the new axis goes, in the output's rank; canonical "
                                   "non-negative")},
    flops=no_flops, complete=_one_hot_complete,
    doc="on_value (values[1]) where the new axis's position equals the index (negative "
        "ones count from the end), off_value (values[0]) elsewhere; an index outside "
        "[-depth, depth) gives a row of off_value",
))


# -- DepthToSpace, SpaceToDepth -------------------------------------------------------
def _blocks_infer(op: str) -> Any:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        x, bs = ins[0], attrs["blocksize"]
        if x.rank != 4 or bs < 1:
            raise ShapeError(f"{op} needs a 4-D NCHW input and blocksize >= 1, got {x} and {bs}")
        n, c, h, w = x.shape
        if attrs["mode"] not in ("DCR", "CRD"):
            raise OpAttributeError(f"{op} mode {attrs['mode']!r} is not DCR or CRD")
        if op == "DepthToSpace":
            if c % (bs * bs):
                raise ShapeError(f"DepthToSpace channels {c} are not a multiple of blocksize² {bs * bs}")
            return [TensorType((n, c // (bs * bs), h * bs, w * bs), x.dtype)]
        if h % bs or w % bs:
            raise ShapeError(f"SpaceToDepth height {h} and width {w} must be multiples of blocksize {bs}")
        return [TensorType((n, c * bs * bs, h // bs, w // bs), x.dtype)]

    return infer


def _depth_to_space_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, bs = ins[0], attrs["blocksize"]
    n, c, h, w = x.shape
    if attrs["mode"] == "DCR":
        y = x.reshape(n, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return [y.reshape(n, c // (bs * bs), h * bs, w * bs)]


def _space_to_depth_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, bs = ins[0], attrs["blocksize"]
    n, c, h, w = x.shape
    order = (0, 3, 5, 1, 2, 4) if attrs["mode"] == "DCR" else (0, 1, 3, 5, 2, 4)
    y = x.reshape(n, c, h // bs, bs, w // bs, bs).transpose(order)
    return [y.reshape(n, c * bs * bs, h // bs, w // bs)]


register(OpDef(
    "DepthToSpace", ("input",), ("output",), _blocks_infer("DepthToSpace"), _depth_to_space_reference,
    attrs={"blocksize": Attr("int", doc="the side of each block"),
           "mode": Attr("str", "DCR", "DCR: channels are (block row, block column, channel); "
                                      "CRD: (channel, block row, block column)")},
    flops=no_flops,
    doc="move channel blocks into blocksize x blocksize spatial blocks (NCHW)",
))

register(OpDef(
    "SpaceToDepth", ("input",), ("output",), _blocks_infer("SpaceToDepth"), _space_to_depth_reference,
    attrs={"blocksize": Attr("int", doc="the side of each block"),
           "mode": Attr("str", "DCR", "DCR: output channels are (block row, block column, "
                                      "channel); CRD: (channel, block row, block column)")},
    flops=no_flops,
    doc="move blocksize x blocksize spatial blocks into channels (NCHW), the inverse of "
        "DepthToSpace in the same mode",
))


# -- ReverseSequence --------------------------------------------------------------------
def _reverse_sequence_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    for key in ("batch_axis", "time_axis"):
        attrs[key] = normalize_axis(attrs[key], ins[0].rank, f"ReverseSequence {key}")
    return attrs


def _reverse_sequence_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, lens = ins
    b, t = attrs["batch_axis"], attrs["time_axis"]
    if x.rank < 2 or b == t or b > 1 or t > 1:
        raise ShapeError(f"ReverseSequence needs rank >= 2 with batch_axis and time_axis 0 and 1 "
                         f"in some order, got {x}, batch_axis {b}, time_axis {t}")
    require_dtype(lens, (np.dtype(np.int64),), "ReverseSequence sequence_lens")
    if lens.shape != (x.shape[b],):
        raise ShapeError(f"ReverseSequence sequence_lens {lens} must hold one length per batch "
                         f"entry ({x.shape[b]})")
    return [x]


def _reverse_sequence_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[int, int, int, bool]]:
    # Lengths lie in [0, T]: a count, so a negative one is an error, not a wrap.
    return [(1, attrs["time_axis"], ins[0].shape[attrs["time_axis"]] + 1, False)]


def _reverse_sequence_reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, lens = ins
    b, t = attrs["batch_axis"], attrs["time_axis"]
    steps = x.shape[t]
    if np.any((lens < 0) | (lens > steps)):
        bad = int(lens[(lens < 0) | (lens > steps)][0])
        raise InputError(f"ReverseSequence sequence length {bad} is out of range: lengths lie in "
                         f"[0, {steps}]")
    out = np.array(x)
    for i, n in enumerate(lens.tolist()):
        index: list[Any] = [slice(None)] * x.ndim
        index[b], index[t] = i, slice(0, n)
        out[tuple(index)] = np.flip(x[tuple(index)], axis=0)  # axis b is gone: time is axis 0
    return [out]


register(OpDef(
    "ReverseSequence", ("input", "sequence_lens"), ("output",), _reverse_sequence_infer,
    _reverse_sequence_reference,
    attrs={"batch_axis": Attr("int", 1, "the batch axis (0 or 1); canonical non-negative"),
           "time_axis": Attr("int", 0, "the time axis (1 or 0); canonical non-negative")},
    flops=no_flops, complete=_reverse_sequence_complete, index_bounds=_reverse_sequence_bounds,
    doc="for each batch entry b, its first sequence_lens[b] time steps reversed, the rest kept",
))


# -- TensorScatter -------------------------------------------------------------------------
def _tensor_scatter_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank, "TensorScatter axis")
    return attrs


def _tensor_scatter_infer(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[TensorType]:
    cache, update, where = ins
    axis, mode = attrs["axis"], attrs["mode"]
    if mode not in ("linear", "circular"):
        raise OpAttributeError(f"TensorScatter mode must be 'linear' or 'circular', got {mode!r}")
    same_dtype([cache, update], "TensorScatter past_cache and update")
    if axis == 0 or update.rank != cache.rank or any(
            u != c for k, (u, c) in enumerate(zip(update.shape, cache.shape)) if k != axis) \
            or update.shape[axis] > cache.shape[axis]:
        raise ShapeError(f"TensorScatter update {update} must match past_cache {cache} on every axis "
                         f"but the sequence axis {axis} (not the batch axis 0), and be no longer on it")
    if where is not None:
        require_dtype(where, (np.dtype(np.int64),), "TensorScatter write_indices")
        if where.shape != (cache.shape[0],):
            raise ShapeError(f"TensorScatter write_indices {where} must hold one start per batch "
                             f"entry ({cache.shape[0]})")
    return [cache]


def _tensor_scatter_bounds(ins: list[TensorType | None], attrs: dict[str, Any]) -> list[tuple[int, int, int, bool]]:
    # A linear write must fit: starts lie in [0, max_len - len]; a circular one wraps any start.
    if attrs["mode"] != "linear" or ins[2] is None:
        return []
    axis = attrs["axis"]
    return [(2, axis, ins[0].shape[axis] - ins[1].shape[axis] + 1, False)]


def _tensor_scatter_reference(ins: list[np.ndarray | None], attrs: dict[str, Any]) -> list[np.ndarray]:
    cache, update, where = ins
    axis, circular = attrs["axis"], attrs["mode"] == "circular"
    width, length = cache.shape[axis], update.shape[axis]
    starts = np.zeros(cache.shape[0], np.int64) if where is None else where
    if not circular:
        problem = index_problem(starts, axis, width - length + 1, wraps=False)
        if problem is not None:
            raise InputError(f"TensorScatter write_indices: {problem}")
    out = np.array(cache)
    for prefix in np.ndindex(cache.shape[:axis]):
        for s in range(length):
            position = int(starts[prefix[0]]) + s
            out[(*prefix, position % width if circular else position)] = update[(*prefix, s)]
    return [out]


register(OpDef(
    "TensorScatter", ("past_cache", "update", "write_indices?"), ("present_cache",),
    _tensor_scatter_infer, _tensor_scatter_reference,
    attrs={"axis": Attr("int", -2, "the sequence axis (not 0, the batch axis); canonical "
                                   "non-negative"),
           "mode": Attr("str", "linear", "'linear' writes at start + s, 'circular' modulo the "
                                         "cache length")},
    flops=no_flops, complete=_tensor_scatter_complete, index_bounds=_tensor_scatter_bounds,
    doc="past_cache with update written along ``axis`` from each batch entry's write index "
        "(0 without write_indices): a KV cache's update",
))


# -- CumSum, CumProd ---------------------------------------------------------------------
#: What CumSum and CumProd take (ONNX's types): the floats and 32- and 64-bit integers.
_CUMULATIVE_DTYPES = FLOAT_DTYPES + tuple(np.dtype(d) for d in ("int32", "int64", "uint32",
                                                                  "uint64"))
#: The running combinations: op -> (numpy's running function, its identity, what it keeps).
CUMULATIVE = {"CumSum": (np.cumsum, 0, "sums"), "CumProd": (np.cumprod, 1, "products")}


def _cumulative_infer(op: str) -> Any:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        require_dtype(ins[0], _CUMULATIVE_DTYPES, f"{op} input x")
        return [ins[0]]

    return infer


def _cumulative_reference(op: str) -> Any:
    running, identity, _ = CUMULATIVE[op]

    def reference(ins: list[np.ndarray], attrs: dict[str, Any]) -> list[np.ndarray]:
        x, axis = ins[0], attrs["axis"]
        if attrs["reverse"]:
            x = np.flip(x, axis)
        acc = np.float64 if x.dtype in FLOAT_DTYPES else x.dtype
        y = running(x.astype(acc), axis=axis, dtype=acc)
        if attrs["exclusive"]:
            first = np.full_like(np.take(y, [0], axis), identity)
            y = np.concatenate([first, np.delete(y, -1, axis)], axis)
        if attrs["reverse"]:
            y = np.flip(y, axis)
        return [np.array(y.astype(x.dtype))]

    return reference


def _cumulative_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    return outs[0].size


for _op, (_running, _identity, _kept) in CUMULATIVE.items():
    register(OpDef(
        _op, ("x",), ("y",), _cumulative_infer(_op), _cumulative_reference(_op),
        attrs={"axis": Attr("int", doc="the axis combined along; canonical non-negative"),
               "exclusive": Attr("int", 0, f"1: each result leaves out its own element "
                                           f"(the first is {_identity})"),
               "reverse": Attr("int", 0, "1: combine from the end of the axis")},
        flops=_cumulative_flops, complete=_axis_complete(_op),
        doc=f"running {_kept} along ``axis`` (float ones accumulated in float64, rounded "
            "once; integer ones wrap around in their dtype)",
    ))
