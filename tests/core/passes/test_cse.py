"""Common-subexpression elimination."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder
from hetero.core.passes.cse import eliminate_common_subexpressions


def test_equal_constants_and_equal_nodes_are_merged(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    a1 = b.Add(x, np.ones(3, np.float32))
    a2 = b.Add(x, np.ones(3, np.float32))  # an equal constant: merged, then the Adds too
    b.output(b.Mul(b.Relu(a1), b.Relu(a2), name="y"))
    g = b.build()
    text = str(g)
    out = eliminate_common_subexpressions(g)
    assert str(g) == text
    assert out.op_histogram() == {"Add": 1, "Mul": 1, "Relu": 1}
    assert len(out.constants) == 1
    mul = out.node("y")
    assert mul.inputs[0] is mul.inputs[1]
    same_numbers(g, out)


def test_different_attributes_or_constant_dtypes_keep_nodes_apart():
    b = GraphBuilder()
    x = b.input("x", (4,))
    i = b.input("i", (4,), "int32")
    b.output(
        b.LeakyRelu(x, alpha=0.1), b.LeakyRelu(x, alpha=0.2),
        b.Add(i, np.array(1, np.int32)), b.Mul(i, np.array(1, np.int64).astype(np.int32)),
        b.Cast(x, to="int32"), b.Cast(x, to="int64"),
    )
    out = eliminate_common_subexpressions(b.build())
    assert out.op_histogram() == {"Cast": 2, "LeakyRelu": 2, "Add": 1, "Mul": 1}
    assert len(out.constants) == 1  # the two int32 ones are the same bytes


def test_array_attributes_compare_by_value(same_numbers):
    b = GraphBuilder()
    b.output(b.ConstantOfShape(shape=(2,), value=np.array([3.0], np.float32)),
             b.Relu(b.ConstantOfShape(shape=(2,), value=np.array([3.0], np.float32))),
             b.ConstantOfShape(shape=(2,), value=np.array([3.0], np.float64)))
    g = b.build()
    out = eliminate_common_subexpressions(g)
    # The second float32 one merges into the first; the float64 value differs.
    assert out.op_histogram() == {"ConstantOfShape": 2, "Relu": 1}
    same_numbers(g, out)


def test_a_duplicate_that_is_a_graph_output_keeps_its_name(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2,))
    b.output(b.Relu(x, name="first"), b.Relu(x, name="second"))
    g = b.build()
    out = eliminate_common_subexpressions(g)
    assert [v.name for v in out.outputs] == ["first", "second"]
    same_numbers(g, out)
