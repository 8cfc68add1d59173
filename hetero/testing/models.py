"""Small end-to-end models for the conformance suite, built with the GraphBuilder.

Each model is a few nodes of the kind real networks are made of, small enough to
compile in a second on the CPU fallback: a convolution block, a multi-layer
perceptron and a transformer block. Weights come from a seeded generator, so a
model is the same graph on every run and every machine.

>>> graph = conv_block()
>>> sorted({node.op for node in graph.nodes})[:3]
['Add', 'Conv', 'Flatten']
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph


def _weights(seed: int) -> Callable[..., np.ndarray]:
    """A seeded maker of float32 weights scaled like a fan-in initialiser."""
    rng = np.random.default_rng(seed)

    def make(*shape: int) -> np.ndarray:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)

    return make


def conv_block() -> Graph:
    """Conv 3x3 + bias, Relu, a residual Conv, MaxPool, global pooling and a classifier."""
    w = _weights(1)
    b = GraphBuilder("conv_block")
    x = b.input("image", (1, 3, 8, 8))
    h = b.Relu(b.Conv(x, w(8, 3, 3, 3), w(8), pads=(1, 1, 1, 1)))
    r = b.Conv(h, w(8, 8, 3, 3), None, pads=(1, 1, 1, 1))
    h = b.Relu(b.Add(h, r))
    h = b.MaxPool(h, kernel_shape=(2, 2), strides=(2, 2))
    h = b.Flatten(b.GlobalAveragePool(h), axis=1)
    b.output(b.Gemm(h, w(8, 4), w(4)))
    return b.build()


def mlp() -> Graph:
    """Two hidden layers (MatMul, Add, Relu / Gelu) and a Softmax over ten classes."""
    w = _weights(2)
    b = GraphBuilder("mlp")
    x = b.input("features", (4, 16))
    h = b.Relu(b.Add(b.MatMul(x, w(16, 32)), w(32)))
    h = b.Gelu(b.Add(b.MatMul(h, w(32, 32)), w(32)))
    b.output(b.Softmax(b.Add(b.MatMul(h, w(32, 10)), w(10)), axis=-1))
    return b.build()


def transformer_block(tokens: int = 8, width: int = 16, heads: int = 2) -> Graph:
    """A pre-norm transformer encoder block: LayerNorm, multi-head self-attention with a
    residual, LayerNorm, a Gelu feed-forward layer with a residual."""
    w = _weights(3)
    head = width // heads
    b = GraphBuilder("transformer_block")
    x = b.input("tokens", (1, tokens, width))

    def split_heads(v: object) -> object:
        return b.Transpose(b.Reshape(v, shape=(1, tokens, heads, head)), perm=(0, 2, 1, 3))

    n = b.LayerNormalization(x, np.ones(width, np.float32), np.zeros(width, np.float32), axis=-1)
    q, k, v = (split_heads(b.MatMul(n, w(width, width))) for _ in range(3))
    scores = b.Mul(b.MatMul(q, b.Transpose(k, perm=(0, 1, 3, 2))), np.float32(1 / np.sqrt(head)))
    attended = b.MatMul(b.Softmax(scores, axis=-1), v)
    merged = b.Reshape(b.Transpose(attended, perm=(0, 2, 1, 3)), shape=(1, tokens, width))
    x = b.Add(x, b.MatMul(merged, w(width, width)))
    n = b.LayerNormalization(x, np.ones(width, np.float32), np.zeros(width, np.float32), axis=-1)
    ff = b.MatMul(b.Gelu(b.Add(b.MatMul(n, w(width, 2 * width)), w(2 * width))), w(2 * width, width))
    b.output(b.Add(x, ff))
    return b.build()


#: The models the suite runs end to end, by name.
MODELS: dict[str, Callable[[], Graph]] = {
    "conv_block": conv_block,
    "mlp": mlp,
    "transformer_block": transformer_block,
}


def model_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded standard-normal inputs for every input of ``graph``."""
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in graph.inputs}


#: Seeds of the samples an int8 model is calibrated on; seed 0, the inputs it is
#: checked on, stays out so the check does not run on calibration data.
CALIBRATION_SEEDS = (1, 2, 3, 4)


def calibration_inputs(graph: Graph) -> list[dict[str, np.ndarray]]:
    """The samples to calibrate ``graph`` on for int8: :func:`model_inputs` of each calibration seed."""
    return [model_inputs(graph, seed) for seed in CALIBRATION_SEEDS]
