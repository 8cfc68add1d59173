"""Whole networks of the families users export, built with the GraphBuilder, seeded weights.

The light models that ship with onnx are CNNs of one era (AlexNet to ResNet-50); these
two fill the gaps that matter to backends: a MobileNetV2-style network (inverted
residual blocks: a 1x1 expansion, a depthwise 3x3, a 1x1 linear projection, ReLU6 as
Clip, residual adds where shapes allow) and a BERT-style encoder (token and position
embeddings, post-norm layers of multi-head self-attention and a Gelu feed-forward
block). Sizes are parameters, with defaults small enough to compile and check in
seconds; weights come from a seeded generator, so a network is the same graph on every
machine. They are not in :data:`hetero.testing.models.MODELS`: the conformance suite
runs those on every backend, and these are for benchmarks and backend tests.

>>> graph = mobilenet_v2_style()
>>> sum(node.op == "Conv" and node.attrs["group"] > 1 for node in graph.nodes)
7
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.testing.models import _weights

#: MobileNetV2's inverted residual settings (expansion t, channels c, repeats n, stride s),
#: shortened to one block a stage past the first two; ``width`` scales the channels.
MOBILENET_V2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 1, 2), (6, 64, 1, 2), (6, 96, 1, 1),
                       (6, 160, 1, 2))


def mobilenet_v2_style(resolution: int = 64, width: float = 0.5, classes: int = 100) -> Graph:
    """A MobileNetV2-style classifier on ``resolution`` x ``resolution`` RGB images."""
    w = _weights(7)
    b = GraphBuilder("mobilenet_v2_style")
    x = b.input("image", (1, 3, resolution, resolution))

    def scaled(c: int) -> int:
        return max(8, int(round(c * width / 8)) * 8)

    def conv_bn(h: object, cin: int, cout: int, k: int, stride: int, group: int = 1, act: bool = True) -> object:
        pad = k // 2
        h = b.Conv(h, w(cout, cin // group, k, k), w(cout) * 0.1, pads=(pad,) * 4, strides=(stride, stride),
                   group=group)
        return b.Clip(h, min=0.0, max=6.0) if act else h

    channels = scaled(32)
    h = conv_bn(x, 3, channels, 3, 2)
    for t, c, n, s in MOBILENET_V2_BLOCKS:
        out = scaled(c)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = channels * t
            y = conv_bn(h, channels, hidden, 1, 1) if t != 1 else h
            y = conv_bn(y, hidden, hidden, 3, stride, group=hidden)
            y = conv_bn(y, hidden, out, 1, 1, act=False)
            h = b.Add(h, y) if stride == 1 and channels == out else y
            channels = out
    h = conv_bn(h, channels, 4 * channels, 1, 1)
    h = b.Flatten(b.GlobalAveragePool(h), axis=1)
    b.output(b.Gemm(h, w(4 * channels, classes), w(classes)))
    return b.build()


def bert_style_encoder(layers: int = 2, tokens: int = 16, width: int = 64, heads: int = 4,
                       vocabulary: int = 500) -> Graph:
    """A BERT-style encoder over ``tokens`` token ids (int64): embeddings, then ``layers``
    post-norm layers of self-attention and a 4x Gelu feed-forward block."""
    w = _weights(8)
    head = width // heads
    b = GraphBuilder("bert_style_encoder")
    ids = b.input("input_ids", (1, tokens), "int64")
    ones, zeros = np.ones(width, np.float32), np.zeros(width, np.float32)
    x = b.Add(b.Gather(w(vocabulary, width), ids, axis=0), w(1, tokens, width))
    x = b.LayerNormalization(x, ones, zeros, axis=-1)

    def split_heads(v: object) -> object:
        return b.Transpose(b.Reshape(v, shape=(1, tokens, heads, head)), perm=(0, 2, 1, 3))

    for _ in range(layers):
        q, k, v = (split_heads(b.Add(b.MatMul(x, w(width, width)), w(width))) for _ in range(3))
        scores = b.Mul(b.MatMul(q, b.Transpose(k, perm=(0, 1, 3, 2))), np.float32(1 / np.sqrt(head)))
        attended = b.MatMul(b.Softmax(scores, axis=-1), v)
        merged = b.Reshape(b.Transpose(attended, perm=(0, 2, 1, 3)), shape=(1, tokens, width))
        x = b.LayerNormalization(b.Add(x, b.Add(b.MatMul(merged, w(width, width)), w(width))), ones, zeros,
                                 axis=-1)
        ff = b.Gelu(b.Add(b.MatMul(x, w(width, 4 * width)), w(4 * width)))
        x = b.LayerNormalization(b.Add(x, b.Add(b.MatMul(ff, w(4 * width, width)), w(width))), ones, zeros,
                                 axis=-1)
    b.output(x)
    return b.build()


__all__ = ["MOBILENET_V2_BLOCKS", "bert_style_encoder", "mobilenet_v2_style"]
