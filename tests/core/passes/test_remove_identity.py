"""Identity and Dropout removal, and the output names it must keep."""

from __future__ import annotations

from hetero.core.ir import GraphBuilder
from hetero.core.passes.remove_identity import RULES, remove_identity
from hetero.core.passes.rewrite import rewrite


def test_identity_and_dropout_are_bypassed(same_numbers):
    b = GraphBuilder()
    x = b.input("x", (2, 3))
    h = b.Dropout(b.Identity(b.Relu(x)))
    b.output(b.Sigmoid(b.Identity(h), name="y"))
    g = b.build()
    text = str(g)
    out = remove_identity(g)
    assert str(g) == text
    assert out.op_histogram() == {"Relu": 1, "Sigmoid": 1}
    assert out.node("y").inputs[0].producer.op == "Relu"
    same_numbers(g, out)


def test_an_identity_output_keeps_its_name_on_the_producer(same_numbers):
    b = GraphBuilder()
    b.output(b.Identity(b.Relu(b.input("x", (4,)), name="r"), name="y"))
    g = b.build()
    out = remove_identity(g)
    assert out.op_histogram() == {"Relu": 1}
    assert [v.name for v in out.outputs] == ["y"]
    assert out.outputs[0].producer.op == "Relu"
    same_numbers(g, out)


def test_an_identity_naming_a_graph_input_stays_with_the_reason():
    b = GraphBuilder()
    x = b.input("x", (4,))
    b.output(b.Identity(b.Identity(x), name="y"))
    result = rewrite(b.build(), RULES)
    assert result.graph.op_histogram() == {"Identity": 1}  # the inner one went
    (rejection,) = result.rejected
    assert rejection.reason == "graph output y is graph input x under another name"


def test_an_identity_between_two_graph_outputs_stays():
    b = GraphBuilder()
    r = b.Relu(b.input("x", (4,)), name="r")
    b.output(r, b.Identity(r, name="y"))
    result = rewrite(b.build(), RULES)
    assert result.graph.op_histogram() == {"Relu": 1, "Identity": 1}
    assert "same value under two names" in result.rejected[0].reason
