"""Translators of ONNX's indexing and data-movement ops (canonical meanings:
:mod:`hetero.core.ir.ops.indexing`).

Operands that fix an output's shape or an op's structure (Tile's repeats, Trilu's k,
CumSum's and CumProd's axis, OneHot's depth, Range's three scalars) are ONNX inputs and
canonical attributes: each is evaluated with :meth:`NodeContext.static` and must be
constant.
Range has no canonical op: its output is known at import, so it becomes a constant.
Models below opset 13 arrive upgraded to 13 (:mod:`.opsets`); the differences after
it are the scatters' reductions (add and mul at 16, max and min at 18) and EyeLike's
and Trilu's dtypes, which the canonical ops take as they come.
"""

from __future__ import annotations

import math

import numpy as np

from hetero.core.frontend.onnx.budget import check_elements
from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.core.frontend.onnx.shapes import dtype_name, numpy_dtype
from hetero.errors import OpAttributeError, ShapeError


@translates("GatherElements")
def gather_elements(ctx: NodeContext) -> None:
    ctx.emit("GatherElements", [ctx.input(0), ctx.input(1)], {"axis": ctx.attr("axis", 0)})


@translates("GatherND")
def gather_nd(ctx: NodeContext) -> None:
    ctx.emit("GatherND", [ctx.input(0), ctx.input(1)], {"batch_dims": ctx.attr("batch_dims", 0)})


@translates("ScatterElements", "Scatter")
def scatter_elements(ctx: NodeContext) -> None:
    """ScatterElements, and Scatter (opset 9-10, deprecated at 11), which is the same op."""
    attrs = {"axis": ctx.attr("axis", 0), "reduction": ctx.attr("reduction", "none")}
    ctx.emit("ScatterElements", [ctx.input(0), ctx.input(1), ctx.input(2)], attrs)


@translates("ScatterND")
def scatter_nd(ctx: NodeContext) -> None:
    ctx.emit("ScatterND", [ctx.input(0), ctx.input(1), ctx.input(2)],
             {"reduction": ctx.attr("reduction", "none")})


@translates("Tile")
def tile(ctx: NodeContext) -> None:
    x = ctx.input(0)
    repeats = ctx.static_ints(1, "repeats")
    if repeats is not None and len(repeats) == x.type.rank:
        check_elements([d * r for d, r in zip(x.shape, repeats)], f"{ctx.label}: the tiled output",
                       ctx.model.max_elements)
    ctx.emit("Tile", [x], {"repeats": repeats})


@translates("Trilu")
def trilu(ctx: NodeContext) -> None:
    k = ctx.static_ints(1, "k")
    ctx.emit("Trilu", [ctx.input(0)], {"upper": ctx.attr("upper", 1), "k": k[0] if k else 0})


@translates("CumSum", "CumProd")
def cumulative(ctx: NodeContext) -> None:
    axis = ctx.static_ints(1, "axis")
    if axis is None or len(axis) != 1:
        raise ShapeError(f"{ctx.label}: its axis input must hold one integer, got {axis}")
    attrs = {"axis": axis[0], "exclusive": ctx.attr("exclusive", 0), "reverse": ctx.attr("reverse", 0)}
    ctx.emit(ctx.op_type, [ctx.input(0)], attrs)


@translates("OneHot")
def one_hot(ctx: NodeContext) -> None:
    """OneHot with its depth constant (a float depth is truncated, as the spec casts it)."""
    depth = ctx.static(1, "depth")
    if depth is None or np.asarray(depth).size != 1:
        raise ShapeError(f"{ctx.label}: its depth input must hold one number")
    size = int(np.asarray(depth).reshape(()))
    attrs = {"depth": size, "axis": ctx.attr("axis", -1)}
    ctx.emit("OneHot", [ctx.input(0), ctx.input(2)], attrs)


@translates("EyeLike")
def eye_like(ctx: NodeContext) -> None:
    attrs: dict[str, object] = {"k": ctx.attr("k", 0)}
    if ctx.has_attr("dtype"):
        dtype = numpy_dtype(ctx.attr("dtype"))
        if dtype is None:
            raise ctx.unsupported(f"an output of {dtype_name(ctx.attr('dtype'))} is not supported")
        attrs["dtype"] = dtype
    ctx.emit("EyeLike", [ctx.input(0)], attrs)


@translates("DepthToSpace")
def depth_to_space(ctx: NodeContext) -> None:
    attrs = {"blocksize": ctx.attr("blocksize"), "mode": ctx.attr("mode", "DCR")}
    ctx.emit("DepthToSpace", [ctx.input(0)], attrs)


@translates("SpaceToDepth")
def space_to_depth(ctx: NodeContext) -> None:
    """SpaceToDepth; its mode (CRD beside the default DCR) arrived in opset 28."""
    attrs = {"blocksize": ctx.attr("blocksize"), "mode": ctx.attr("mode", "DCR")}
    ctx.emit("SpaceToDepth", [ctx.input(0)], attrs)


@translates("ReverseSequence")
def reverse_sequence(ctx: NodeContext) -> None:
    attrs = {"batch_axis": ctx.attr("batch_axis", 1), "time_axis": ctx.attr("time_axis", 0)}
    ctx.emit("ReverseSequence", [ctx.input(0), ctx.input(1)], attrs)


@translates("Range")
def range_(ctx: NodeContext) -> None:
    """Range folded at import: its length is ``max(ceil((limit - start) / delta), 0)``, and
    element i is ``start + i * delta`` in the inputs' dtype."""
    start, limit, delta = (np.asarray(ctx.static(i, what)).reshape(-1)
                           for i, what in enumerate(("start", "limit", "delta")))
    if any(a.size != 1 for a in (start, limit, delta)):
        raise ShapeError(f"{ctx.label}: start, limit and delta must be scalars")
    dtype = start.dtype
    if dtype.kind in "iu":
        first, stop, step = int(start[0]), int(limit[0]), int(delta[0])
        if step == 0:
            raise OpAttributeError(f"{ctx.label}: delta is 0; a Range needs a non-zero step")
        count = max(-((first - stop) // step), 0)
        check_elements([count], f"{ctx.label}: the range", ctx.model.max_elements)
        array = (first + step * np.arange(count, dtype=np.int64)).astype(dtype)
    else:
        first, stop, step = float(start[0]), float(limit[0]), float(delta[0])
        if step == 0:
            raise OpAttributeError(f"{ctx.label}: delta is 0; a Range needs a non-zero step")
        count = max(math.ceil((stop - first) / step), 0)
        check_elements([count], f"{ctx.label}: the range", ctx.model.max_elements)
        array = (first + step * np.arange(count, dtype=np.float64)).astype(dtype)
    ctx.bind_constant(array)


@translates("TensorScatter")
def tensor_scatter(ctx: NodeContext) -> None:
    """TensorScatter (opset 24): a KV cache's in-place update, as a new tensor."""
    attrs = {name: ctx.attr(name) for name in ("axis", "mode") if ctx.has_attr(name)}
    ctx.emit("TensorScatter", [ctx.input(0), ctx.input(1), ctx.optional_input(2)], attrs)
