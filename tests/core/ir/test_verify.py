"""verify() names the node and the rule each broken graph breaks."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir import Graph, GraphBuilder, TensorType, problems, verify
from hetero.errors import VerificationError


def chain() -> Graph:
    b = GraphBuilder("chain")
    x = b.input("x", (2, 2))
    b.output(b.Tanh(b.Relu(x, name="r"), name="t"))
    return b.build().copy()


def test_sound_graph_has_no_problems() -> None:
    assert problems(chain()) == []


def test_out_of_order_nodes_are_named() -> None:
    g = chain()
    g.nodes.reverse()
    with pytest.raises(VerificationError, match=r"node t \(Tanh\): input r used before it is defined"):
        verify(g)


def test_wrong_recorded_type_is_named() -> None:
    g = chain()
    g.node("r").output.type = TensorType((3, 3), "float32")
    found = problems(g)
    assert any("node r (Relu)" in p and "differ from the inferred" in p for p in found)


def test_unknown_op_is_named() -> None:
    g = chain()
    g.node("t").op = "Tanhh"
    with pytest.raises(VerificationError, match=r"node t \(Tanhh\).*did you mean 'Tanh'"):
        verify(g)


def test_non_canonical_attributes_are_named() -> None:
    g = chain()
    g.node("t").op = "LeakyRelu"
    g.node("t").attrs = {}
    assert any("node t (LeakyRelu): attributes are not in canonical form" in p for p in problems(g))


def test_broken_use_lists_are_named() -> None:
    g = chain()
    g.node("r").output.users.clear()
    assert any("does not list this node among its users" in p for p in problems(g))


def test_undefined_output_is_named() -> None:
    g = chain()
    stray = Graph("other").add_input("stray", (1,), "float32")
    g.set_outputs([stray])
    assert any("output stray: not defined" in p for p in problems(g))


def test_constant_with_mismatched_type_is_named() -> None:
    g = chain()
    c = g.add_constant(np.zeros(3, np.float32), "c")
    c.type = TensorType((4,), "float32")
    assert any("constant c" in p for p in problems(g))


def test_graph_without_outputs_is_rejected() -> None:
    g = Graph("empty")
    g.add_input("x", (1,), "float32")
    with pytest.raises(VerificationError, match="has no outputs"):
        verify(g)


def test_verify_reports_how_many_more_problems() -> None:
    g = chain()
    g.nodes.reverse()
    g.node("t").op = "Nope"
    with pytest.raises(VerificationError, match=r"and \d+ more"):
        verify(g)
