"""Reading the quantisation a QDQ graph writes: activation, weight and bias parameters.

A QDQ graph (as onnxruntime's static quantiser and :mod:`hetero.core.passes.quantize`
write it) keeps its quantisation in the constant operands of its QuantizeLinear and
DequantizeLinear nodes. These readers return what integer arithmetic needs from
them, or a sentence saying why a node's quantisation does not fit it (uint8, per-axis
activations, asymmetric weights...), for :mod:`hetero.core.passes.lower_qdq` to log.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetero.core.ir.graph import Node, Value
from hetero.core.ir.ops.fixed_point import quantize_multiplier

_INT8 = np.dtype("int8")
_INT32 = np.dtype("int32")
#: Relative difference allowed between a bias's scale and x_scale · w_scale: the
#: quantiser stores that product in float32, so they agree to a few ulps.
_BIAS_SCALE_RTOL = 1e-5
#: Multipliers must stay below 2^30 to keep a shift of at least 1 (fixed_point).
_MAX_RATIO = 2.0**30


@dataclass(frozen=True)
class QParams:
    """Per-tensor int8 quantisation of an activation: ``real = scale · (q - zero)``."""

    scale: float
    zero: int


def read_params(node: Node, quantised: Value) -> QParams | str:
    """The per-tensor int8 parameters of a Q or DQ ``node``, or why it has none."""
    scale = node.inputs[1]
    zero = node.inputs[2] if len(node.inputs) > 2 else None
    where = f"{node.op} {node.name}"
    if quantised.dtype != _INT8:
        return f"{where} quantises to {quantised.dtype.name}; only int8 activations are lowered"
    if scale.data is None or (zero is not None and zero.data is None):
        return f"{where} has a scale or zero point that is not a constant"
    if scale.data.size != 1:
        return f"{where} quantises per axis; only per-tensor activation scales are lowered"
    value = float(scale.data.reshape(()))
    if not (math.isfinite(value) and value > 0):
        return f"{where} has scale {value}; it must be positive and finite"
    return QParams(value, 0 if zero is None else int(zero.data.reshape(())))


def read_weight(dq: Node, channel_axis: int) -> tuple[np.ndarray, np.ndarray] | str:
    """A constant int8 weight and its float64 scales (1 or one per channel), or why not."""
    w, scale = dq.inputs[0], dq.inputs[1]
    zero = dq.inputs[2] if len(dq.inputs) > 2 else None
    where = f"weight DequantizeLinear {dq.name}"
    if w.data is None or w.dtype != _INT8:
        return f"{where} does not read a constant int8 tensor"
    if scale.data is None or (zero is not None and zero.data is None):
        return f"{where} has a scale or zero point that is not a constant"
    if zero is not None and np.any(zero.data != 0):
        return f"{where} has nonzero zero points: only symmetric weights are lowered"
    if dq.attrs.get("block_size"):
        return f"{where} is blocked (block_size {dq.attrs['block_size']}): only per-channel weights are lowered"
    if scale.data.size != 1 and dq.attrs["axis"] != channel_axis:
        return (f"{where} is per-axis along axis {dq.attrs['axis']}, not the output-channel "
                f"axis {channel_axis}")
    return w.data, scale.data.astype(np.float64).reshape(-1)


def read_bias(dq: Node, expected: np.ndarray) -> Value | str:
    """The int32 bias constant of ``dq`` if its scale is ``expected`` (x_scale · w_scale)."""
    b, scale = dq.inputs[0], dq.inputs[1]
    zero = dq.inputs[2] if len(dq.inputs) > 2 else None
    where = f"bias DequantizeLinear {dq.name}"
    if b.data is None or b.dtype != _INT32:
        return f"{where} does not read a constant int32 tensor"
    if scale.data is None or (zero is not None and (zero.data is None or np.any(zero.data != 0))):
        return f"{where} needs a constant scale and zero points 0"
    if not np.allclose(scale.data.astype(np.float64), expected, rtol=_BIAS_SCALE_RTOL, atol=0):
        return f"{where} has a scale other than x_scale · w_scale, so it cannot be added exactly"
    return b


def fixed_point_factors(ratios: np.ndarray, where: str) -> tuple[tuple[int, ...], tuple[int, ...]] | str:
    """Fixed-point (multiplier, shift) tuples for ``ratios`` (one entry when all are equal)."""
    if np.any(~np.isfinite(ratios)) or np.any(ratios <= 0) or np.any(ratios >= _MAX_RATIO):
        return f"{where}: requantisation factors {ratios.tolist()} are not in (0, 2^30)"
    if np.all(ratios == ratios[0]):
        ratios = ratios[:1]
    pairs = [quantize_multiplier(float(r)) for r in ratios]
    return tuple(m for m, _ in pairs), tuple(s for _, s in pairs)


def output_clamp(act: Node | None, out: QParams) -> tuple[int, int] | str:
    """``(y_min, y_max)`` that apply a fused Relu or Clip to the int8 output."""
    lo, hi = -128, 127
    if act is None:
        return lo, hi
    if act.op == "Relu":
        return max(lo, out.zero), hi
    low, high = act.attrs["min"], act.attrs["max"]
    if math.isfinite(low):
        lo = max(lo, min(hi, out.zero + round(low / out.scale)))
    if math.isfinite(high):
        hi = min(hi, max(-128, out.zero + round(high / out.scale)))
    if lo > hi:
        return f"Clip {act.name} [{low}, {high}] leaves no int8 value at the output's scale"
    return lo, hi
