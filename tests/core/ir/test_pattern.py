"""The pattern language: ops, attributes, producers, bindings, commutation, optional operands."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.pattern import Const, Op, Opt, Var
from hetero.errors import PatternError

W = np.ones((4, 3, 3, 3), np.float32)


def conv_relu(bias: bool = False, pads: tuple[int, ...] = (1, 1, 1, 1)):
    b = GraphBuilder()
    x = b.input("x", (1, 3, 8, 8))
    conv = b.Conv(x, W, np.zeros(4, np.float32) if bias else None, pads=pads, name="conv")
    b.output(b.Relu(conv, name="relu"))
    g = b.build()
    return g, g.node("relu")


def test_op_matches_producers_recursively_and_binds_names():
    g, relu = conv_relu()
    pattern = Op("Relu", Op("Conv", Var("x"), Const("w"), ..., name="conv"))
    (m,) = pattern.match(relu)
    assert m.root is relu
    assert m["x"] is g.inputs[0]
    assert m.node("conv") is g.node("conv")
    np.testing.assert_array_equal(m.const("w"), W)


def test_wrong_op_or_non_constant_does_not_match():
    _, relu = conv_relu()
    assert not list(Op("Sigmoid", Var()).match(relu))
    assert not list(Op("Relu", Op("MatMul", Var(), Var())).match(relu))
    assert not list(Op("Relu", Op("Conv", Const(), ...)).match(relu))  # x is an input


def test_operand_count_must_fit_unless_open():
    _, relu = conv_relu(bias=True)
    assert not list(Op("Relu", Op("Conv", Var(), Var())).match(relu))
    assert list(Op("Relu", Op("Conv", Var(), ...)).match(relu))
    assert list(Op("Relu", Op("Conv", Var(), Var(), Var())).match(relu))


def test_none_requires_an_absent_operand_and_opt_accepts_both():
    _, plain = conv_relu(bias=False)
    _, biased = conv_relu(bias=True)
    absent = Op("Relu", Op("Conv", Var(), Var(), None))
    assert list(absent.match(plain)) and not list(absent.match(biased))
    optional = Op("Relu", Op("Conv", Var(), Var(), Opt(Const("b"))))
    (m_plain,) = optional.match(plain)
    (m_biased,) = optional.match(biased)
    assert "b" not in m_plain and "b" in m_biased


def test_attribute_by_value_and_by_predicate():
    _, relu = conv_relu(pads=(1, 1, 1, 1))
    assert list(Op("Relu", Op("Conv", ..., attrs={"pads": [1, 1, 1, 1], "group": 1})).match(relu))
    assert not list(Op("Relu", Op("Conv", ..., attrs={"pads": (0, 0, 0, 0)})).match(relu))
    assert list(Op("Relu", Op("Conv", ..., attrs={"pads": lambda p: max(p) <= 1})).match(relu))
    assert not list(Op("Relu", Op("Conv", ..., attrs={"pads": lambda p: max(p) == 0})).match(relu))


def test_where_filters_the_node_and_the_value():
    g, relu = conv_relu()
    assert list(Op("Relu", where=lambda n: n.name == "relu").match(relu)) == []  # arity 0 != 1
    assert list(Op("Relu", ..., where=lambda n: n.name == "relu").match(relu))
    assert not list(Op("Relu", Var(where=lambda v: v.shape[1] == 3)).match(relu))
    assert list(Op(None, Var(where=lambda v: v.shape[1] == 4)).match(relu))


def test_repeated_name_binds_the_same_value():
    b = GraphBuilder()
    x, y = b.input("x", (2,)), b.input("y", (2,))
    b.output(b.Mul(x, x, name="square"), b.Mul(x, y, name="product"))
    g = b.build()
    square = Op("Mul", Var("a"), Var("a"))
    assert list(square.match(g.node("square")))
    assert not list(square.match(g.node("product")))


def test_commute_tries_both_operand_orders():
    b = GraphBuilder()
    x = b.input("x", (2,))
    b.output(b.Add(np.ones(2, np.float32), x, name="add"))
    add = b.build().node("add")
    assert not list(Op("Add", Var("x"), Const("c")).match(add))
    (m,) = Op("Add", Var("x"), Const("c"), commute=True).match(add)
    assert m["x"].name == "x" and m["c"].data is not None


def test_match_accessors_name_the_mistake():
    _, relu = conv_relu()
    (m,) = Op("Relu", Op("Conv", Var("x"), ..., name="conv")).match(relu)
    with pytest.raises(PatternError, match="binds node conv"):
        m["conv"]
    with pytest.raises(PatternError, match="not a constant"):
        m.const("x")
    with pytest.raises(PatternError, match="binds no 'w'"):
        m["w"]


def test_malformed_patterns_are_rejected():
    with pytest.raises(PatternError, match="last input"):
        Op("Add", ..., Var())
    with pytest.raises(PatternError, match="exactly two"):
        Op("Relu", Var(), commute=True)
    with pytest.raises(PatternError, match="Conv2d"):
        Op("Conv2d", ...).validate()
    with pytest.raises(PatternError, match="no attribute 'padding'"):
        Op("Conv", ..., attrs={"padding": 1}).validate()
