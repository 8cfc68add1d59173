"""Translators of ONNX's selection and linear-algebra ops: TopK, Einsum, ConvTranspose.

TopK's ``k`` is an input since opset 10 (an attribute in opset 1) and must be
constant. Einsum has no canonical op of its own: its equation is rewritten here into
Transpose, Reshape, Gather (for diagonals), ReduceSum, Mul and MatMul, so contractions
run on the MatMul kernels.
"""

from __future__ import annotations

from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.errors import ShapeError


@translates("TopK")
def topk(ctx: NodeContext) -> None:
    x = ctx.input(0)
    if ctx.has_input(1):
        values = ctx.static_ints(1, "K")
        if len(values) != 1:
            raise ShapeError(f"{ctx.label}: K must hold one value, got {values}")
        k = values[0]
    else:
        k = ctx.attr("k")
    attrs = {"k": k, "axis": ctx.attr("axis", -1), "largest": ctx.attr("largest", 1)}
    ctx.emit("TopK", [x], attrs, n_outputs=2)
