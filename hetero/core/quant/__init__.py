"""Post-training int8 quantisation: calibration and quantisation parameters.

:func:`calibrate` finds the range of every float tensor over sample inputs
(:class:`MinMax` or :class:`Percentile`); :mod:`hetero.core.quant.params` turns ranges
and weights into scales and zero points; the graph pass
:func:`hetero.core.passes.quantize.quantize` writes them into the graph as ONNX QDQ
(QuantizeLinear/DequantizeLinear pairs), the format onnxruntime's static quantiser writes.

>>> from hetero.core.passes.quantize import quantize               # doctest: +SKIP
>>> calib = calibrate(graph, samples)                                # doctest: +SKIP
>>> qgraph = quantize(graph, calib)                                  # doctest: +SKIP
"""

from hetero.core.quant.calibrate import Calibration, MinMax, Percentile, RangeMethod, calibrate
from hetero.core.quant.params import (
    ActivationParams, QuantizedTensor, activation_params, quantize_bias, quantize_weight,
)

__all__ = [
    "ActivationParams", "Calibration", "MinMax", "Percentile", "QuantizedTensor", "RangeMethod",
    "activation_params", "calibrate", "quantize_bias", "quantize_weight",
]
