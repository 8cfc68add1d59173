"""Constant folding: evaluate what only depends on constants, within an element budget."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder
from hetero.core.passes.constant_folding import constant_folding_rules, fold_constants
from hetero.core.passes.rewrite import rewrite


def test_constant_subgraphs_become_constants(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    scale = b.Unsqueeze(b.Exp(b.constant(np.arange(3, dtype=np.float32))), axes=(0,))
    b.output(b.Mul(x, scale, name="y"))
    g = b.build()
    text = str(g)
    out = fold_constants(g)
    assert str(g) == text
    assert out.op_histogram() == {"Mul": 1}
    folded = out.node("y").inputs[1]
    # The reference semantics, bit for bit: same numpy calls on the same bytes.
    np.testing.assert_array_equal(folded.data, np.exp(np.arange(3, dtype=np.float32))[None])
    assert folded.data.dtype == np.float32 and not folded.data.flags.writeable
    same_numbers(g, out)


def test_nodes_without_inputs_and_shape_of_a_variable_fold():
    b = GraphBuilder()
    x = b.input("x", (2, 5))
    b.output(b.Shape(x, name="s"), b.ConstantOfShape(shape=(3,), name="z"))
    out = fold_constants(b.build())
    assert out.nodes == []
    s, z = out.outputs
    assert (s.name, z.name) == ("s", "z")  # folded outputs keep their names
    np.testing.assert_array_equal(s.data, np.array([2, 5], np.int64))
    np.testing.assert_array_equal(z.data, np.zeros(3, np.float32))


def test_outputs_over_the_limit_stay_with_the_reason(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (4,))
    big = b.Expand(b.constant(np.float32(1.0)), shape=(64,))
    b.output(b.Add(x, b.ReduceSum(big, keepdims=0)), b.Neg(big))
    g = b.build()
    result = rewrite(g, constant_folding_rules(limit=63))
    assert result.graph.op_histogram() == {"Expand": 1, "ReduceSum": 1, "Add": 1, "Neg": 1}
    (rejection,) = result.rejected
    assert rejection.rule == "fold_constants"
    assert "would hold 64 elements, over the folding limit of 63" in rejection.reason
    same_numbers(g, result.graph)
    assert rewrite(g, constant_folding_rules(limit=64)).graph.op_histogram() == {"Add": 1}
