"""Importers that turn a model file into hetero's graph IR: ONNX now, others later."""

from hetero.core.frontend.onnx import load_onnx, randomize_weights

__all__ = ["load_onnx", "randomize_weights"]
