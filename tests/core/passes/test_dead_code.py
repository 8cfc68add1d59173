"""Dead-code elimination."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder
from hetero.core.passes.dead_code import eliminate_dead_code


def test_nodes_and_constants_no_output_needs_are_removed(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    unused = b.input("unused", (1,))
    dead = b.Exp(b.Add(x, np.ones((2, 3), np.float32)))  # a dead chain and its constant
    b.Neg(dead)
    b.Sigmoid(unused)
    b.output(b.Relu(x, name="y"))
    g = b.build()
    text = str(g)
    out = eliminate_dead_code(g)
    assert str(g) == text
    assert out.op_histogram() == {"Relu": 1}
    assert out.constants == {}
    assert [v.name for v in out.inputs] == ["x", "unused"]  # the interface stays
    same_numbers(g, out)


def test_a_live_graph_is_unchanged_and_constant_outputs_stay():
    b = GraphBuilder()
    x = b.input("x", (2,))
    c = b.constant(np.arange(2, dtype=np.float32), name="c")
    b.output(b.Add(x, c), c)
    g = b.build()
    assert str(eliminate_dead_code(g)) == str(g)
