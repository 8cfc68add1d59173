"""Translators of ONNX's signal ops (canonical meanings: :mod:`hetero.core.ir.ops.signal`).

DFT (opset 17; 20 made its axis an input, default -2 where 17's attribute defaulted
to 1) and STFT (opset 17) become the canonical ops, their lengths, steps and axis
(ONNX inputs) evaluated with :meth:`NodeContext.static`. MelWeightMatrix reads
scalars only, so it becomes a constant (:func:`~hetero.core.ir.ops.signal.mel_weight_matrix`).
The window ops (HannWindow, HammingWindow, BlackmanWindow) have no translator: onnx's
function bodies expand them (:mod:`.functions`), computing in float32 as the bodies do,
and their Range folds once the size is known.
"""

from __future__ import annotations

import numpy as np

from hetero.core.frontend.onnx.budget import check_elements
from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.core.frontend.onnx.shapes import dtype_name, numpy_dtype
from hetero.core.ir.ops.signal import mel_weight_matrix
from hetero.errors import OpAttributeError, ShapeError


def _scalar(ctx: NodeContext, i: int, what: str) -> np.generic | None:
    """Input ``i`` as one numpy scalar of its own dtype (None if absent)."""
    array = ctx.static(i, what)
    if array is None:
        return None
    array = np.asarray(array)
    if array.size != 1:
        raise ShapeError(f"{ctx.label}: its {what} input must hold one value, got shape "
                         f"{list(array.shape)}")
    return array.reshape(())[()]


@translates("DFT")
def dft(ctx: NodeContext) -> None:
    """DFT at opset 17 (``axis`` an attribute) or 20 (``axis`` input 2).

    A node with neither takes its opset's default: 1 before opset 20, -2 from it.
    """
    x = ctx.input(0)
    length = _scalar(ctx, 1, "dft_length")
    if ctx.has_input(2):
        axis = int(_scalar(ctx, 2, "axis"))
    elif ctx.has_attr("axis"):
        axis = ctx.attr("axis")
    else:
        axis = 1 if ctx.model.opset < 20 else -2  # the defaults of opsets 17 and 20
    attrs = {"axis": axis, "inverse": ctx.attr("inverse", 0), "onesided": ctx.attr("onesided", 0)}
    if length is not None:
        attrs["dft_length"] = int(length)
    ctx.emit("DFT", [x], attrs)


@translates("STFT")
def stft(ctx: NodeContext) -> None:
    """STFT (opset 17): frame_step and frame_length constant, the window any tensor."""
    step = _scalar(ctx, 1, "frame_step")
    if step is None:
        raise ShapeError(f"{ctx.label}: STFT needs its frame_step input")
    length = _scalar(ctx, 3, "frame_length")
    attrs = {"frame_step": int(step), "onesided": ctx.attr("onesided", 1)}
    if length is not None:
        attrs["frame_length"] = int(length)
    ctx.emit("STFT", [ctx.input(0), ctx.optional_input(2)], attrs)


@translates("MelWeightMatrix")
def mel_weights(ctx: NodeContext) -> None:
    """MelWeightMatrix folded at import, in ``output_datatype`` (float by default)."""
    names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
    args = [_scalar(ctx, i, what) for i, what in enumerate(names)]
    elem_type = ctx.attr("output_datatype", 1)
    dtype = numpy_dtype(elem_type)
    if dtype is None:
        raise ctx.unsupported(f"an output of {dtype_name(elem_type)} is not supported")
    if any(a is None for a in args):
        raise ShapeError(f"{ctx.label}: MelWeightMatrix needs all five of its inputs")
    spectrum, bands = int(args[1]) // 2 + 1, int(args[0])
    check_elements([spectrum, bands], f"{ctx.label}: the mel weight matrix", ctx.model.max_elements)
    try:
        weights = mel_weight_matrix(*args)
    except ValueError as exc:
        raise OpAttributeError(f"{ctx.label}: {exc}") from None
    ctx.bind_constant(weights.astype(dtype))
