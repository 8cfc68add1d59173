"""Choosing int8 quantisation parameters, the way ONNX Runtime's static quantiser does.

Quantisation is affine, ``real = scale * (q - zero_point)``:

- activations: int8, per tensor, asymmetric; the calibrated range is first widened to
  include 0 (so that 0, the value of padding and of ReLU's cut, is exact), then
  ``scale = (max - min) / 255`` and ``zero_point = round(-128 - min / scale)``;
- weights: int8, symmetric (zero point 0), per output channel or per tensor, on the
  restricted range [-127, 127]: ``scale = max|w| / 127``;
- bias: int32, zero point 0, ``scale = x_scale * w_scale[c]``, so that it adds straight
  into the int32 accumulator of ``x_q * w_q``.

>>> p = activation_params(-1.0, 3.0)
>>> float(p.scale) == np.float32(4.0 / 255), p.zero_point
(True, -64)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero.errors import QuantizationError

INT8_MIN, INT8_MAX = -128, 127
#: Weights use [-127, 127] so that the range is symmetric and -w is always representable.
WEIGHT_QMAX = 127
_INT32 = np.iinfo(np.int32)
#: Below this a scale would underflow in float32 arithmetic; such ranges are all zeros.
_TINY = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class ActivationParams:
    """Per-tensor int8 parameters of an activation: ``real = scale * (q - zero_point)``."""

    scale: np.float32
    zero_point: int

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The scale (float32) and zero point (int8) as the 0-d arrays Q/DQ nodes read."""
        return np.array(self.scale, np.float32), np.array(self.zero_point, np.int8)


@dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """A constant quantised for a DequantizeLinear: ``values``, ``scale`` and ``zero_point``
    are the DQ operands; ``axis`` is the channel axis of a per-channel scale, else None."""

    values: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None

    def dequantize(self) -> np.ndarray:
        """The float32 values this tensor stands for."""
        shape = [1] * self.values.ndim
        if self.axis is not None:
            shape[self.axis] = -1
        scale = self.scale.reshape(shape) if self.axis is not None else self.scale
        zero = self.zero_point.reshape(shape) if self.axis is not None else self.zero_point
        return ((self.values.astype(np.int64) - zero.astype(np.int64)) * scale).astype(np.float32)


def activation_params(low: float, high: float) -> ActivationParams:
    """Asymmetric int8 parameters for values calibrated to lie in [low, high].

    The range is widened to include 0; an empty range (all zeros) gets scale 1 and
    zero point 0, as onnxruntime gives it.
    """
    if not (np.isfinite(low) and np.isfinite(high)) or low > high:
        raise QuantizationError(
            f"calibrated range [{low}, {high}] is not a finite interval; calibrate on "
            f"inputs that produce finite values"
        )
    low32, high32 = np.float32(min(low, 0.0)), np.float32(max(high, 0.0))
    # float64 division then float32, as onnxruntime computes it, so scales match bit for bit.
    scale = np.float32(np.float64(high32 - low32) / (INT8_MAX - INT8_MIN))
    if scale < _TINY:
        return ActivationParams(np.float32(1.0), 0)
    zero = np.round(np.float32(INT8_MIN) - low32 / scale)
    return ActivationParams(scale, int(np.clip(zero, INT8_MIN, INT8_MAX)))


def quantize_weight(weight: np.ndarray, axis: int | None) -> QuantizedTensor:
    """Symmetric int8 quantisation of a float ``weight``, per slice of ``axis`` or per tensor.

    ``scale = max|w| / 127`` over each slice; an all-zero slice gets scale 1 (its
    values quantise to 0 whatever the scale, and a zero scale would break the bias's).
    """
    w = np.asarray(weight, np.float32)
    if axis is None:
        absmax = np.array(np.abs(w).max() if w.size else 0.0, np.float32)
    else:
        others = tuple(i for i in range(w.ndim) if i != axis)
        absmax = np.abs(w).max(axis=others).astype(np.float32)
    scale = (absmax.astype(np.float64) / WEIGHT_QMAX).astype(np.float32)
    scale = np.where(scale < _TINY, np.float32(1.0), scale).astype(np.float32)
    shape = [1] * w.ndim
    if axis is not None:
        shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -WEIGHT_QMAX, WEIGHT_QMAX).astype(np.int8)
    return QuantizedTensor(q, scale, np.zeros(scale.shape, np.int8), axis)


def quantize_bias(bias: np.ndarray, x_scale: np.float32, w_scale: np.ndarray) -> QuantizedTensor:
    """int32 quantisation of a 1-D ``bias`` at ``x_scale * w_scale`` (per channel or per tensor)."""
    b = np.asarray(bias, np.float32)
    scale = (np.float32(x_scale) * np.asarray(w_scale, np.float32)).astype(np.float32)
    # float32 division, as onnxruntime divides, so the integers match its quantiser's.
    q = np.clip(np.rint(b / scale).astype(np.float64), _INT32.min, _INT32.max).astype(np.int32)
    axis = 0 if scale.ndim == 1 and scale.size > 1 else None
    return QuantizedTensor(q, scale, np.zeros(scale.shape, np.int32), axis)
