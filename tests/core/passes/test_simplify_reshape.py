"""Shortening Reshape and Transpose chains."""

from __future__ import annotations

import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.passes.rewrite import rewrite
from hetero.core.passes.simplify_reshape import RULES, simplify_reshape


def test_reshape_chains_become_one_reshape(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4))
    h = b.Unsqueeze(b.Flatten(b.Reshape(x, shape=(6, 4)), axis=1), axes=(0,))
    b.output(b.Relu(b.Reshape(h, shape=(4, 6)), name="y"))
    g = b.build()
    text = str(g)
    out = simplify_reshape(g)
    assert str(g) == text
    assert out.op_histogram() == {"Reshape": 1, "Relu": 1}
    reshape = out.nodes[0]
    assert reshape.inputs[0] is out.inputs[0] and reshape.attrs["shape"] == (4, 6)
    same_numbers(g, out)


@pytest.mark.parametrize("op, attrs", [
    ("Reshape", {"shape": (2, 3)}), ("Flatten", {"axis": 1}), ("Squeeze", {"axes": ()}),
])
def test_a_reshape_to_the_same_shape_is_removed(same_numbers, op, attrs):
    b = GraphBuilder()
    b.output(b.Relu(b.op(op, b.input("x", (2, 3)), **attrs), name="y"))
    g = b.build()
    out = simplify_reshape(g)
    assert out.op_histogram() == {"Relu": 1}
    same_numbers(g, out)


def test_transposes_compose_and_identity_permutations_vanish(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2, 3, 4, 5))
    once = b.Transpose(b.Transpose(x, perm=(0, 2, 3, 1)), perm=(3, 0, 2, 1))
    undone = b.Transpose(b.Transpose(x, perm=(0, 2, 3, 1)), perm=(0, 3, 1, 2))
    b.output(b.Relu(once, name="y"), b.Neg(undone, name="z"))
    g = b.build()
    result = rewrite(g, RULES)
    out = result.graph
    assert out.op_histogram() == {"Transpose": 1, "Relu": 1, "Neg": 1}
    assert out.node("y").inputs[0].producer.attrs["perm"] == (1, 0, 3, 2)
    assert out.node("z").inputs[0] is out.inputs[0]
    assert result.fired("merge_transposes") == 2 and result.fired("remove_identity_transpose") == 1
    same_numbers(g, out)


def test_a_removed_reshape_of_an_input_keeps_the_output_name():
    b = GraphBuilder()
    b.output(b.Reshape(b.input("x", (2, 3)), shape=(2, 3), name="y"))
    out = simplify_reshape(b.build())
    assert [v.name for v in out.outputs] == ["y"]
    assert out.op_histogram() == {"Identity": 1}
