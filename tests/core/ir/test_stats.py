"""graph_stats counts parameters and FLOPs without running anything."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder
from hetero.core.ir.stats import graph_stats


def test_parameters_include_computed_weights_and_exclude_shapes() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3))
    w = b.Mul(b.constant(np.ones((2, 3), np.float32), "w"), 2.0)  # a weight computed from constants
    y = b.Add(x, w)
    b.output(b.Relu(y))
    stats = graph_stats(b.build())
    # w (6 elements) feeds Add; the raw constant and the 2.0 only feed constant-only Mul.
    assert stats.parameters == 6
    assert stats.parameter_bytes == 24
    # Add and Relu: one FLOP per output element each; the constant-only Mul is not counted.
    assert stats.flops == 12
    assert stats.flops_by_op == {"Add": 6, "Relu": 6}
    assert stats.op_histogram == {"Add": 1, "Mul": 1, "Relu": 1}
