"""The rewrite driver: fixed point, iteration limit, the log, names, and rule bugs caught."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir import Graph, GraphBuilder
from hetero.core.ir.pattern import Op, Var
from hetero.core.passes.rewrite import Rule, exclusive_use, rewrite
from hetero.errors import PatternError

# Relu(Relu(x)) == Relu(x): a rule whose repeated application shortens any Relu chain.
RELU_RELU = Rule("relu_relu", Op("Relu", Op("Relu", Var("x"), name="inner")),
                 lambda g, m: m.node("inner").output)


def relu_chain(n: int) -> Graph:
    b = GraphBuilder("chain")
    h = b.input("x", (2, 3))
    for _ in range(n):
        h = b.Relu(h)
    b.output(h)
    return b.build()


def test_reaches_a_fixed_point_and_leaves_the_input_alone(same_numbers):
    g = relu_chain(5)
    text = str(g)
    result = rewrite(g, [RELU_RELU])
    assert str(g) == text
    assert result.converged
    assert result.graph.op_histogram() == {"Relu": 1}
    assert result.fired("relu_relu") == 4
    assert result.iterations >= 2  # the last sweep is the one that finds nothing to do
    same_numbers(g, result.graph)


def test_respects_the_iteration_limit():
    # A rule that always fires (Sigmoid -> a fresh Sigmoid) never reaches a fixed point.
    churn = Rule("churn", Op("Sigmoid", Var("x")),
                 lambda g, m: g.add_node("Sigmoid", [m["x"]]).output)
    b = GraphBuilder()
    b.output(b.Sigmoid(b.input("x", (2,))))
    result = rewrite(b.build(), [churn], max_iterations=3)
    assert not result.converged
    assert result.iterations == 3
    assert result.fired("churn") == 3
    assert result.graph.op_histogram() == {"Sigmoid": 1}


def test_rejected_matches_carry_their_reasons():
    g = relu_chain(2)
    picky = Rule("picky", RELU_RELU.pattern, RELU_RELU.replacement,
                 check=lambda graph, m: f"not today ({m.node('inner').name})")
    result = rewrite(g, [picky])
    assert result.applied == []
    (rejection,) = result.rejected
    assert (rejection.rule, rejection.node) == ("picky", g.nodes[1].name)
    assert rejection.reason == f"not today ({g.nodes[0].name})"
    assert str(rejection).startswith("picky at ")
    assert result.graph.op_histogram() == {"Relu": 2}


@pytest.mark.parametrize("also_output, reason", [
    (False, "Relu r's output r has other users besides a: ['n']"),
    (True, "Relu r's output r is also a graph output"),
])
def test_exclusive_use_names_the_other_users(also_output, reason):
    b = GraphBuilder()
    r = b.Relu(b.input("x", (2,)), name="r")
    a = b.Relu(r, name="a")
    b.output(a, r) if also_output else b.output(a, b.Neg(r, name="n"))
    only_relu = Rule("only", RELU_RELU.pattern, RELU_RELU.replacement,
                     check=lambda graph, m: exclusive_use(graph, m.node("inner").output, m.root,
                                                          "Relu r's output"))
    result = rewrite(b.build(), [only_relu])
    assert [r.reason for r in result.rejected] == [reason]


def test_graph_output_names_survive_a_rewrite(same_numbers):
    g = relu_chain(3)
    out_name = g.outputs[0].name
    result = rewrite(g, [RELU_RELU])
    assert [v.name for v in result.graph.outputs] == [out_name]
    same_numbers(g, result.graph)


def test_an_identity_keeps_an_output_name_that_a_graph_input_cannot_take():
    # Neg(Neg(x)) is x, a graph input, which cannot also be called y: an Identity carries y.
    neg_neg = Rule("neg_neg", Op("Neg", Op("Neg", Var("x"))), lambda g, m: m["x"])
    b = GraphBuilder()
    b.output(b.Neg(b.Neg(b.input("x", (2,))), name="y"))
    result = rewrite(b.build(), [neg_neg])
    g = result.graph
    assert [v.name for v in g.outputs] == ["y"]
    assert g.op_histogram() == {"Identity": 1}
    assert g.outputs[0].producer.inputs[0] is g.inputs[0]


def test_values_made_by_a_rule_take_the_replaced_name():
    fresh = Rule("relu_to_max", Op("Relu", Var("x")),
                 lambda g, m: g.add_node("Max", [m["x"], g.add_constant(np.float32(0))]).output)
    b = GraphBuilder()
    b.output(b.Neg(b.Relu(b.input("x", (2,)), name="r")))
    g = rewrite(b.build(), [fresh]).graph
    assert g.values["r"].producer.op == "Max"


def test_replacement_bugs_raise_pattern_error_naming_the_rule():
    g = relu_chain(2)
    own = Rule("own", RELU_RELU.pattern, lambda graph, m: m.root.output)
    with pytest.raises(PatternError, match="rule own at node .*own output"):
        rewrite(g, [own])
    wrong_type = Rule("wrong", RELU_RELU.pattern,
                      lambda graph, m: graph.add_constant(np.zeros(3, np.float32)))
    with pytest.raises(PatternError, match=r"rule wrong .* has type f32\[3\]"):
        rewrite(g, [wrong_type])
    count = Rule("count", RELU_RELU.pattern, lambda graph, m: [])
    with pytest.raises(PatternError, match="returned 0 values for 1 outputs"):
        rewrite(g, [count])


def test_an_invalid_result_is_caught_by_verification():
    # The replacement edits a node's attributes behind the schema's back.
    def corrupt(graph, m):
        node = graph.add_node("LeakyRelu", [m["x"]])
        del node.attrs["alpha"]
        return node.output

    bad = Rule("corrupt", RELU_RELU.pattern, corrupt)
    with pytest.raises(PatternError, match=r"rewriting with \['corrupt'\] produced an invalid "
                                           r"graph: .*canonical form"):
        rewrite(relu_chain(3), [bad])


def test_unknown_ops_in_a_rule_are_reported_before_rewriting():
    typo = Rule("typo", Op("Rellu", Var()), lambda g, m: m.root.output)
    with pytest.raises(PatternError, match="rule typo: .*did you mean 'Relu'"):
        rewrite(relu_chain(1), [typo])
