"""The ONNX frontend: :func:`load_onnx` imports a model into hetero's graph IR.

The modules, in the order a model meets them: :mod:`.loader` (reading the file
safely), :mod:`.external` (its external data), :mod:`.budget` (the element budget),
:mod:`.opsets`, :mod:`.shapes` (static input shapes, onnx's shape inference),
:mod:`.functions` (ops onnx defines by a function body, expanded where no translator is),
:mod:`.convert` (the driver) with :mod:`.context` and the translators
(:mod:`.translate_elementwise`, :mod:`.translate_nn`, :mod:`.translate_tensor`);
:mod:`.randomize` gives the weightless test models seeded random weights.
"""

from hetero.core.frontend.onnx.convert import load_onnx
from hetero.core.frontend.onnx import translate_rnn  # noqa: F401  (registers RNN, LSTM, GRU)
from hetero.core.frontend.onnx import translate_sample  # noqa: F401  (registers GridSample, RoiAlign, AffineGrid)
from hetero.core.frontend.onnx.randomize import randomize_weights

__all__ = ["load_onnx", "randomize_weights"]
