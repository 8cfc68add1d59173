"""Translators of ONNX's sampling ops (canonical meanings: :mod:`hetero.core.ir.ops.sample`).

GridSample (opset 16: 2-D, modes bilinear, nearest, bicubic; opset 20: N-D, the modes
renamed linear and cubic) maps to one canonical op that takes the new names.
AffineGrid (opset 20) is one canonical op (onnx's function body for it needs If); its
size input fixes the output's shape, so it must be constant. RoiAlign's rois and batch
indices stay run-time inputs (they do not shape the output);
its coordinate_transformation_mode arrived in opset 16, with a default (half_pixel)
other than opset 10's fixed meaning (output_half_pixel).
"""

from __future__ import annotations

from hetero.core.frontend.onnx.context import NodeContext, translates

#: GridSample-16's mode names and the canonical (opset 20) ones they mean.
_GRID_SAMPLE_MODES = {"bilinear": "linear", "bicubic": "cubic"}


@translates("GridSample")
def grid_sample(ctx: NodeContext) -> None:
    """GridSample of every opset: bilinear and bicubic (16) are linear and cubic (20)."""
    mode = ctx.attr("mode", "linear")
    attrs = {"mode": _GRID_SAMPLE_MODES.get(mode, mode),
             "padding_mode": ctx.attr("padding_mode", "zeros"),
             "align_corners": ctx.attr("align_corners", 0)}
    ctx.emit("GridSample", [ctx.input(0), ctx.input(1)], attrs)


#: RoiAlign's coordinate transforms and whether each shifts the rois by half a pixel.
_ROI_TRANSFORMS = {"half_pixel": 1, "output_half_pixel": 0}


@translates("RoiAlign")
def roi_align(ctx: NodeContext) -> None:
    """RoiAlign of opsets 10 and 16 (see the module doc)."""
    # Unset, the transform is opset 16's default, or before 16 the one meaning there was.
    transform = ctx.attr("coordinate_transformation_mode",
                         "half_pixel" if ctx.model.opset >= 16 else "output_half_pixel")
    if transform not in _ROI_TRANSFORMS:
        raise ctx.unsupported(f"RoiAlign coordinate_transformation_mode {transform!r} is not one "
                              f"of {sorted(_ROI_TRANSFORMS)}")
    attrs = {name: ctx.attr(name) for name in ("mode", "output_height", "output_width",
                                               "sampling_ratio", "spatial_scale")
             if ctx.has_attr(name)}
    attrs["half_pixel"] = _ROI_TRANSFORMS[transform]
    ctx.emit("RoiAlign", [ctx.input(0), ctx.input(1), ctx.input(2)], attrs)


@translates("AffineGrid")
def affine_grid(ctx: NodeContext) -> None:
    """AffineGrid with its size (the output's shape) made an attribute."""
    ctx.emit("AffineGrid", [ctx.input(0)], {"size": ctx.static_ints(1, "size"),
                                            "align_corners": ctx.attr("align_corners", 0)})
