"""Translators of ONNX's sampling ops (canonical meanings: :mod:`hetero.core.ir.ops.sample`).

GridSample (opset 16: 2-D, modes bilinear, nearest, bicubic; opset 20: N-D, the modes
renamed linear and cubic) maps to one canonical op that takes the new names.
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
