"""Translators of ONNX's shape and data-movement ops and of the reductions.

Their static operands (shapes, axes, split sizes, slice bounds) are ONNX inputs
since opset 13 (reductions since 18) and canonical attributes in hetero; each is
evaluated with :meth:`NodeContext.static` and must be constant.
"""

from __future__ import annotations

import math

import numpy as np

from hetero.core.frontend.onnx.budget import check_elements
from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.core.frontend.onnx.shapes import dtype_name, numpy_dtype
from hetero.core.ir.ops.tensor import BITCAST_DTYPES
from hetero.errors import ShapeError


@translates("BitCast")
def bit_cast(ctx: NodeContext) -> None:
    """BitCast between the dtypes of whole bytes (the canonical op's ``BITCAST_DTYPES``)."""
    to, x = ctx.attr("to"), ctx.input(0)
    dtype = numpy_dtype(to)
    for what, t in (("to", dtype), ("from", x.dtype)):
        if t not in BITCAST_DTYPES:
            name = dtype_name(to) if t is None else t.name
            raise ctx.unsupported(
                f"a bit cast {what} {name} is not supported; hetero reinterprets between "
                f"{', '.join(d.name for d in BITCAST_DTYPES)}")
    ctx.emit("BitCast", [x], {"to": dtype})


@translates("Reshape")
def reshape(ctx: NodeContext) -> None:
    """Reshape with the target shape made explicit: 0 copies a dim, -1 is inferred."""
    data = ctx.input(0)
    shape = ctx.static_ints(1, "shape")
    allow_zero = ctx.attr("allowzero", 0)
    if not allow_zero:
        for i, d in enumerate(shape):
            if d == 0:
                if i >= data.type.rank:
                    raise ShapeError(f"{ctx.label}: shape {shape} copies dimension {i} (0), "
                                     f"but the input has rank {data.type.rank}")
                shape[i] = data.shape[i]
    if shape.count(-1) > 1:
        raise ShapeError(f"{ctx.label}: shape {shape} has more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or data.type.size % known:
            raise ShapeError(f"{ctx.label}: cannot reshape {data.type} to {shape}")
        shape[shape.index(-1)] = data.type.size // known
    ctx.emit("Reshape", [data], {"shape": shape})


@translates("Flatten")
def flatten(ctx: NodeContext) -> None:
    ctx.emit("Flatten", [ctx.input(0)], {"axis": ctx.attr("axis", 1)})


@translates("Transpose")
def transpose(ctx: NodeContext) -> None:
    ctx.emit("Transpose", [ctx.input(0)], {"perm": ctx.attr("perm")})


@translates("Concat")
def concat(ctx: NodeContext) -> None:
    ctx.emit("Concat", ctx.inputs(), {"axis": ctx.attr("axis")})


@translates("Split")
def split(ctx: NodeContext) -> None:
    """Split to explicit sizes: from the split input, num_outputs (opset 18) or equal parts."""
    data = ctx.input(0)
    axis = ctx.attr("axis", 0)
    if not -data.type.rank <= axis < data.type.rank:
        raise ShapeError(f"{ctx.label}: axis {axis} is out of range for {data.type}")
    dim = data.shape[axis]
    sizes = ctx.static_ints(1, "split")
    if sizes is None:
        parts = ctx.attr("num_outputs", ctx.num_outputs)
        if ctx.has_attr("num_outputs"):
            # Opset 18: chunks of ceil(dim / n), the last one smaller.
            chunk = math.ceil(dim / parts)
            sizes = [min(chunk, dim - i * chunk) for i in range(parts)]
        elif dim % parts:
            raise ShapeError(f"{ctx.label}: cannot split dimension {dim} into {parts} equal parts")
        else:
            sizes = [dim // parts] * parts
    ctx.emit("Split", [data], {"axis": axis, "split": sizes}, n_outputs=len(sizes))


@translates("Slice")
def slice_(ctx: NodeContext) -> None:
    """Slice with raw ONNX bounds; the canonical op's ``complete`` clamps them."""
    starts = ctx.static_ints(1, "starts")
    ends = ctx.static_ints(2, "ends")
    axes = ctx.static_ints(3, "axes")
    steps = ctx.static_ints(4, "steps")
    attrs = {
        "starts": starts,
        "ends": ends,
        "axes": axes if axes is not None else list(range(len(starts))),
        "steps": steps if steps is not None else [1] * len(starts),
    }
    ctx.emit("Slice", [ctx.input(0)], attrs)


@translates("Gather")
def gather(ctx: NodeContext) -> None:
    ctx.emit("Gather", [ctx.input(0), ctx.input(1)], {"axis": ctx.attr("axis", 0)})


def _axes(ctx: NodeContext) -> list[int] | None:
    """Axes from the input (Squeeze, Unsqueeze, ReduceSum; other reductions from opset 18)
    or the attribute (other reductions before opset 18)."""
    axes = ctx.static_ints(1, "axes")
    return axes if axes is not None else ctx.attr("axes")


@translates("Unsqueeze")
def unsqueeze(ctx: NodeContext) -> None:
    ctx.emit("Unsqueeze", [ctx.input(0)], {"axes": _axes(ctx)})


@translates("Squeeze")
def squeeze(ctx: NodeContext) -> None:
    axes = _axes(ctx)
    ctx.emit("Squeeze", [ctx.input(0)], {"axes": axes} if axes else {})


@translates("Expand")
def expand(ctx: NodeContext) -> None:
    shape = ctx.static_ints(1, "shape")
    check_elements(shape, f"{ctx.label}: the requested shape", ctx.model.max_elements)
    ctx.emit("Expand", [ctx.input(0)], {"shape": shape})


@translates("Shape")
def shape_of(ctx: NodeContext) -> None:
    attrs = {"start": ctx.attr("start", 0)}
    if ctx.has_attr("end"):
        attrs["end"] = ctx.attr("end")
    ctx.emit("Shape", [ctx.input(0)], attrs)


@translates("Size")
def size_of(ctx: NodeContext) -> None:
    ctx.emit("Size", [ctx.input(0)], {})


@translates("ConstantOfShape")
def constant_of_shape(ctx: NodeContext) -> None:
    """ConstantOfShape; the size is checked against the budget before anything exists."""
    shape = ctx.static_ints(0, "shape")
    check_elements(shape, f"{ctx.label}: the requested shape", ctx.model.max_elements)
    attrs = {"shape": shape}
    if ctx.has_attr("value"):
        attrs["value"] = ctx.attr("value")
    ctx.emit("ConstantOfShape", [], attrs)


@translates("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
def reduce(ctx: NodeContext) -> None:
    """Reductions; empty axes mean all axes, or the identity with noop_with_empty_axes=1."""
    axes = _axes(ctx)
    if not axes and ctx.attr("noop_with_empty_axes", 0):
        ctx.emit("Identity", [ctx.input(0)])
        return
    attrs = {"keepdims": ctx.attr("keepdims", 1)}
    if axes:
        attrs["axes"] = axes
    data = ctx.input(0)
    if data.dtype == np.bool_ and ctx.op_type in ("ReduceMax", "ReduceMin"):
        # Opset 20's boolean max and min (any, all) are those of 0 and 1.
        wide = ctx.add("Cast", [data], {"to": np.dtype(np.uint8)})
        ctx.emit("Cast", [ctx.add(ctx.op_type, [wide], attrs)], {"to": np.dtype(bool)})
        return
    ctx.emit(ctx.op_type, [data], attrs)


@translates("Pad")
def pad(ctx: NodeContext) -> None:
    """Pad with explicit begin and end pads on every axis.

    pads and the fill are attributes before opset 11 (``pads``, ``value``) and inputs
    after it (``pads``, ``constant_value``); opset 18 adds the ``axes`` input, which
    says which axes the pads name (the others get 0).
    """
    data = ctx.input(0)
    rank = data.type.rank
    if ctx.has_attr("pads"):
        pads, value = ctx.attr("pads"), ctx.attr("value", 0.0)
        fill = None if value == 0.0 else np.array(value, data.dtype)
    else:
        pads = ctx.static_ints(1, "pads")
        constant = ctx.static(2, "constant_value")
        fill = None if constant is None or constant.size == 0 \
            else np.asarray(constant).reshape(()).astype(data.dtype)
    axes = ctx.static_ints(3, "axes")
    if axes is not None:
        if len(pads) != 2 * len(axes):
            raise ShapeError(f"{ctx.label}: pads {pads} must hold 2 entries per axis of {axes}")
        full = [0] * (2 * rank)
        for k, a in enumerate(axes):
            if not -rank <= a < rank:
                raise ShapeError(f"{ctx.label}: axis {a} is out of range for {data.type}")
            full[a % rank], full[rank + a % rank] = pads[k], pads[len(axes) + k]
        pads = full
    attrs = {"pads": pads, "mode": ctx.attr("mode", "constant")}
    if fill is not None:
        attrs["value"] = fill
    ctx.emit("Pad", [data], attrs)


def _optional_static(ctx: NodeContext, i: int, what: str) -> np.ndarray | None:
    """A constant operand that ONNX may also leave out as an empty tensor."""
    array = ctx.static(i, what)
    return None if array is None or array.size == 0 else np.asarray(array)


def _resize_shape(ctx: NodeContext, axes: list[int], sizes: np.ndarray | None,
                  scales: np.ndarray | None) -> tuple[list[int], list[float]]:
    """The output shape and the per-axis scales of the coordinate transform, as onnx's
    reference derives them (sizes win; keep_aspect_ratio_policy scales them)."""
    shape = list(ctx.input(0).shape)
    rank = len(shape)
    given = sizes if sizes is not None else scales
    if given is None:
        raise ShapeError(f"{ctx.label}: Resize needs scales or sizes")
    if given.size != len(axes):
        raise ShapeError(f"{ctx.label}: {'sizes' if sizes is not None else 'scales'} "
                         f"{given.tolist()} must hold one entry per resized axis ({len(axes)})")
    if sizes is None:
        factors = [1.0] * rank
        for a, s in zip(axes, scales.tolist()):
            factors[a] = float(s)
        return [int(f * d) for f, d in zip(factors, shape)], factors
    out = list(shape)
    for a, s in zip(axes, sizes.tolist()):
        out[a] = int(s)
    if any(shape[a] == 0 for a in axes):
        raise ShapeError(f"{ctx.label}: cannot resize {ctx.input(0).type} to sizes: an axis is empty")
    factors = [o / d if d else 1.0 for o, d in zip(out, shape)]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return out, factors
    if policy not in ("not_larger", "not_smaller"):
        raise ShapeError(f"{ctx.label}: keep_aspect_ratio_policy {policy!r} is not one of "
                         "stretch, not_larger, not_smaller")
    pick = min if policy == "not_larger" else max
    scale = pick(factors[a] for a in axes)
    factors = [scale if a in axes else 1.0 for a in range(rank)]
    return [int(scale * shape[a] + 0.5) if a in axes else shape[a] for a in range(rank)], factors


@translates("Resize")
def resize(ctx: NodeContext) -> None:
    """Resize with explicit output sizes and per-axis scales (roi, scales and sizes
    must be constant; opset 18's axes and keep_aspect_ratio_policy are resolved here).

    Models before opset 13 arrive upgraded; :func:`.opsets.upgrade` spells out
    Resize-10's asymmetric coordinates and nearest rule before onnx's converter would
    lose them.
    """
    x = ctx.input(0)
    rank = x.type.rank
    mode = ctx.attr("mode", "nearest")
    axes = ctx.attr("axes")
    if axes is None:
        axes = list(range(rank))
    else:
        if any(not -rank <= a < rank for a in axes):
            raise ShapeError(f"{ctx.label}: axes {axes} are out of range for {x.type}")
        axes = [a % rank for a in axes]
    scales = _optional_static(ctx, 2, "scales")
    sizes = _optional_static(ctx, 3, "sizes") if ctx.has_input(3) else None
    out, factors = _resize_shape(ctx, axes, sizes, scales)
    check_elements(out, f"{ctx.label}: the output", ctx.model.max_elements)
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel")
    attrs = {"sizes": out, "scales": factors, "mode": mode,
             "coordinate_transformation_mode": transform,
             "nearest_mode": ctx.attr("nearest_mode", "round_prefer_floor"),
             "cubic_coeff_a": ctx.attr("cubic_coeff_a", -0.75),
             "exclude_outside": ctx.attr("exclude_outside", 0),
             "antialias": ctx.attr("antialias", 0) if mode != "nearest" else 0,
             "extrapolation_value": ctx.attr("extrapolation_value", 0.0)}
    if transform == "tf_crop_and_resize":
        roi = _optional_static(ctx, 1, "roi")
        if roi is None or roi.size != 2 * len(axes):
            raise ShapeError(f"{ctx.label}: tf_crop_and_resize needs a roi of 2 x {len(axes)} "
                             f"entries, got {None if roi is None else roi.tolist()}")
        full = [0.0] * rank + [1.0] * rank
        for k, a in enumerate(axes):
            full[a], full[rank + a] = float(roi[k]), float(roi[len(axes) + k])
        attrs["roi"], attrs["roi_dtype"] = full, roi.dtype
    ctx.emit("Resize", [x], attrs)


@translates("Upsample")
def upsample(ctx: NodeContext) -> None:
    """Upsample (opsets 7 to 9): Resize with asymmetric coordinates, nearest flooring."""
    x = ctx.input(0)
    scales = np.asarray(ctx.attr("scales")) if ctx.has_attr("scales") else ctx.static(1, "scales")
    shape = list(x.shape)
    factors = [float(s) for s in np.asarray(scales).ravel()]
    if len(factors) != len(shape) or any(f < 1 for f in factors):
        raise ShapeError(f"{ctx.label}: Upsample scales {factors} must hold one entry >= 1 per "
                         f"axis of {x.type}")
    out = [int(f * d) for f, d in zip(factors, shape)]
    check_elements(out, f"{ctx.label}: the output", ctx.model.max_elements)
    mode = ctx.attr("mode", "nearest")
    ctx.emit("Resize", [x], {"sizes": out, "scales": factors,
                             "mode": "linear" if mode in ("linear", "bilinear") else mode,
                             "coordinate_transformation_mode": "asymmetric",
                             "nearest_mode": "floor"})
