"""npu_sim compiler: elementwise, requantisation, pooling and data movement, bit-exact against the reference."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.plugins.npu_sim.config import PRESETS
from tests.plugins.npu_sim.test_compiler_conv import assert_exact, qconv_graph


def _add_multipliers(a_ratio: float, b_ratio: float) -> tuple[int, int, int]:
    """15-bit QAdd multipliers per the integer spec: the larger in [2^14, 2^15)."""
    _, shift = quantize_multiplier(max(a_ratio, b_ratio))
    shift -= 16
    ma, mb = round(a_ratio * 2**shift), round(b_ratio * 2**shift)
    return ma, mb, shift


def _graph(build) -> Graph:
    b = GraphBuilder("vec")
    b.output(build(b))
    return b.build()


@pytest.mark.parametrize("a_shape,b_shape", [((1, 6, 5, 7), (1, 6, 5, 7)), ((2, 3, 4, 5), (1, 3, 1, 1)),
                                             ((4, 9), (9,)), ((3, 1, 8), (1, 5, 1))])
def test_qadd_broadcasting_is_exact(a_shape: tuple[int, ...], b_shape: tuple[int, ...]) -> None:
    ma, mb, shift = _add_multipliers(0.8, 0.3)
    assert 2**14 <= max(ma, mb) < 2**15

    def build(b: GraphBuilder):
        return b.QAdd(b.input("a", a_shape, "int8"), b.input("b", b_shape, "int8"), a_zero=5, b_zero=-9,
                      a_multiplier=ma, b_multiplier=mb, shift=shift, y_zero=3, y_min=-100, y_max=90)
    assert_exact(_graph(build))


def test_qmul_is_exact() -> None:
    m, s = quantize_multiplier(0.004)

    def build(b: GraphBuilder):
        return b.QMul(b.input("a", (2, 5, 6, 3), "int8"), b.input("b", (1, 5, 1, 1), "int8"), a_zero=-4, b_zero=11,
                      multiplier=m, shift=s, y_zero=-2)
    assert_exact(_graph(build))


@pytest.mark.parametrize("per_channel", [False, True])
def test_requantize_is_exact(per_channel: bool) -> None:
    count = 6 if per_channel else 1
    pairs = [quantize_multiplier(0.3 + 0.2 * i) for i in range(count)]

    def build(b: GraphBuilder):
        return b.Requantize(b.input("x", (2, 6, 5, 4), "int8"), x_zero=9, multiplier=tuple(p[0] for p in pairs),
                            shift=tuple(p[1] for p in pairs), axis=1, y_zero=-7, y_min=-7)
    assert_exact(_graph(build))
    assert_exact(_graph(build), PRESETS["tiny-64k"])


@pytest.mark.parametrize("kernel,stride,pad", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_maxpool_and_average_pool_are_exact(kernel: int, stride: int, pad: int) -> None:
    m, s = quantize_multiplier(0.9 / (kernel * kernel))

    def build(b: GraphBuilder):
        x = b.input("x", (2, 7, 9, 10), "int8")
        mp = b.MaxPool(x, kernel_shape=(kernel,) * 2, strides=(stride,) * 2, pads=(pad,) * 4)
        ap = b.QAveragePool(x, kernel_shape=(kernel,) * 2, strides=(stride,) * 2, pads=(pad,) * 4, x_zero=-6,
                            multiplier=m, shift=s, y_zero=4)
        return b.Concat(mp, ap, axis=1)
    assert_exact(_graph(build))
    assert_exact(_graph(build), PRESETS["tiny-64k"])


def test_global_average_pool_is_exact() -> None:
    m, s = quantize_multiplier(1 / 49)

    def build(b: GraphBuilder):
        x = b.input("x", (1, 40, 7, 7), "int8")
        pooled = b.QAveragePool(x, kernel_shape=(7, 7), x_zero=2, multiplier=m, shift=s, y_zero=0)
        return b.Flatten(pooled, axis=1)
    assert_exact(_graph(build), PRESETS["tiny-64k"])


def test_reshape_transpose_of_nhwc_intermediates_are_exact() -> None:
    conv = qconv_graph(1, 3, (4, 6), 5, 1)
    b = GraphBuilder("moves")
    x = b.input("x", (1, 3, 4, 6), "int8")
    node = conv.nodes[0]
    y = b.QConv(x, conv.values[node.inputs[1].name].data, conv.values[node.inputs[2].name].data,
                **{k: v for k, v in node.attrs.items()})
    r = b.Reshape(y, shape=(5, 24))
    t = b.Transpose(b.Reshape(y, shape=(1, 5, 24)), perm=(0, 2, 1))
    b.output(r, t)
    assert_exact(b.build())


def test_residual_block_conv_add_relu_is_exact() -> None:
    rng = np.random.default_rng(5)
    b = GraphBuilder("residual")
    x = b.input("x", (1, 16, 8, 8), "int8")
    w1 = rng.integers(-127, 128, (16, 16, 3, 3)).astype(np.int8)
    w2 = rng.integers(-127, 128, (16, 16, 3, 3)).astype(np.int8)
    m, s = quantize_multiplier(1 / (40 * 12))
    h = b.QConv(x, w1, None, pads=(1,) * 4, x_zero=0, multiplier=(m,), shift=(s,), y_zero=-128, y_min=-128)
    h = b.QConv(h, w2, None, pads=(1,) * 4, x_zero=-128, multiplier=(m,), shift=(s,), y_zero=0)
    ma, mb, shift = _add_multipliers(0.7, 0.5)
    y = b.QAdd(h, x, a_zero=0, b_zero=0, a_multiplier=ma, b_multiplier=mb, shift=shift, y_zero=-128, y_min=-128)
    b.output(y)
    stats = assert_exact(b.build(), PRESETS["tiny-64k"])
    assert stats.utilisation > 0
