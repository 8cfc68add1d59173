"""Folding BatchNormalization, and per-channel Mul/Add by constants, into the producer's weights."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder, Value
from hetero.core.passes.fold_batchnorm import RULES, fold_batchnorm
from hetero.core.passes.rewrite import rewrite

# Folding multiplies weights by scale / sqrt(var + eps) in float64 and rounds once to
# float32; the folded graph then sums differently rounded products, so outputs of
# magnitude ~1 move by a few float32 ulps: 1e-5 relative and absolute is ample.
TOL = {"rtol": 1e-5, "atol": 1e-5}
RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def bn(b: GraphBuilder, x: Value, channels: int, **kw) -> Value:
    scale, var = (RNG.uniform(0.5, 1.5, channels).astype(np.float32) for _ in range(2))
    return b.BatchNormalization(x, scale, rand(channels), rand(channels), var, **kw)


@pytest.mark.parametrize("shape, group, bias", [
    ((1, 4, 6, 6), 1, False),
    ((2, 4, 6, 6), 4, True),     # depthwise
    ((1, 4, 9), 2, True),        # 1-D, grouped
    ((1, 2, 4, 4, 4), 1, False),  # 3-D
])
def test_batchnorm_folds_into_conv(same_numbers, shape, group, bias):
    c_in, c_out, k = shape[1], 6 if group == 1 else 4, (3,) * (len(shape) - 2)
    b = GraphBuilder()
    x = b.input("x", shape)
    conv = b.Conv(x, rand(c_out, c_in // group, *k), rand(c_out) if bias else None, group=group)
    b.output(b.Relu(bn(b, conv, c_out, epsilon=1e-3), name="y"))
    g = b.build()
    text = str(g)
    out = fold_batchnorm(g)
    assert str(g) == text
    assert out.op_histogram() == {"Conv": 1, "Relu": 1}
    folded = out.nodes[0]
    assert folded.inputs[2] is not None and folded.inputs[2].data.shape == (c_out,)
    assert folded.attrs["group"] == group
    same_numbers(g, out, **TOL)


@pytest.mark.parametrize("trans_b, with_c, alpha, beta", [
    (0, False, 1.0, 1.0), (1, True, 0.5, 2.0), (0, True, 1.0, 0.5),
])
def test_batchnorm_folds_into_gemm(same_numbers, trans_b, with_c, alpha, beta):
    b = GraphBuilder()
    x = b.input("x", (3, 5))
    w = rand(4, 5) if trans_b else rand(5, 4)
    gemm = b.Gemm(x, w, rand(1, 4) if with_c else None, transB=trans_b, alpha=alpha, beta=beta)
    b.output(bn(b, gemm, 4))
    g = b.build()
    out = fold_batchnorm(g)
    assert out.op_histogram() == {"Gemm": 1}
    same_numbers(g, out, **TOL)


def test_batchnorm_turns_a_2d_matmul_into_gemm_but_not_a_batched_one(same_numbers):
    b = GraphBuilder()
    y2 = bn(b, b.MatMul(b.input("x", (3, 5)), rand(5, 4)), 4)
    y3 = bn(b, b.MatMul(b.input("z", (2, 4, 5)), rand(5, 3), name="batched"), 4)
    b.output(y2, y3)
    g = b.build()
    result = rewrite(g, RULES)
    assert result.graph.op_histogram() == {"Gemm": 1, "MatMul": 1, "BatchNormalization": 1}
    (rejection,) = result.rejected
    assert rejection.reason == ("MatMul batched multiplies f32[2,4,5] by f32[5,3]; only a 2-D "
                                "product becomes a Gemm")
    same_numbers(g, result.graph, **TOL)


@pytest.mark.parametrize("const_shape", [(6, 1, 1), (1, 6, 1, 1), (1,), ()])
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_per_channel_mul_and_add_fold_into_conv(same_numbers, op, const_shape):
    b = GraphBuilder()
    conv = b.Conv(b.input("x", (1, 3, 5, 5)), rand(6, 3, 3, 3))
    c = rand(*const_shape)
    b.output(b.op(op, c, conv) if op == "Mul" else b.op(op, conv, c))  # either operand order
    g = b.build()
    out = fold_batchnorm(g)
    assert out.op_histogram() == {"Conv": 1}
    same_numbers(g, out, **TOL)


def test_imported_batchnorm_scale_and_shift_fold_into_batchnorm_then_conv(same_numbers):
    # The light models' block: Conv, BatchNormalization, Mul by [C,1,1], Add of [C,1,1].
    b = GraphBuilder()
    pooled = b.MaxPool(b.input("x", (1, 4, 6, 6)), kernel_shape=(2, 2))
    pre = b.Add(b.Mul(bn(b, pooled, 4), rand(4, 1, 1)), rand(4, 1, 1))  # no Conv before it
    conv = b.Conv(b.Relu(pre), rand(4, 4, 1, 1))
    b.output(b.Relu(b.Add(b.Mul(bn(b, conv, 4), rand(4, 1, 1)), rand(4, 1, 1)), name="y"))
    g = b.build()
    out = fold_batchnorm(g)
    assert out.op_histogram() == {"Relu": 2, "BatchNormalization": 1, "Conv": 1, "MaxPool": 1}
    same_numbers(g, out, **TOL)


def test_rejections_say_why():
    b = GraphBuilder()
    x = b.input("x", (1, 3, 4, 4))
    shared = b.Conv(x, rand(4, 3, 1, 1), name="shared")
    spatial = b.Mul(b.Conv(x, rand(4, 3, 1, 1), name="c2"), rand(4), name="spatial")
    variable = b.Conv(x, b.input("w", (4, 3, 1, 1)), name="variable")
    scale = b.input("scale", (4,))
    b.output(bn(b, shared, 4), b.Neg(shared), spatial, bn(b, variable, 4),
             b.BatchNormalization(b.Conv(x, rand(4, 3, 1, 1), name="c4"), scale, rand(4),
                                  rand(4), np.ones(4, np.float32), name="bn4"))
    reasons = {r.node: r.reason for r in rewrite(b.build(), RULES).rejected}
    assert len(reasons) == 4
    assert any("Conv shared's output shared has other users" in r for r in reasons.values())
    assert reasons["spatial"].startswith("constant const_")
    assert "is not per-channel for Conv c2's output f32[1,4,4,4]" in reasons["spatial"]
    assert any(r == "Conv variable's weight 'w' is not a constant" for r in reasons.values())
    assert reasons["bn4"] == "BatchNormalization bn4's scale 'scale' is not a constant"
