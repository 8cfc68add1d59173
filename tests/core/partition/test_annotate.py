"""annotate(): every backend's answer for every node, and its composites."""

from __future__ import annotations

import pytest
from toyplugin import ToyBackend

from hetero import GraphBuilder
from hetero.core.ir.pattern import Op, Var
from hetero.core.partition import annotate
from hetero.core.plugin import Pattern, Support
from hetero.errors import PartitionError


def graph():
    b = GraphBuilder("g")
    x = b.input("x", (1, 8))
    b.output(b.Relu(b.Add(b.Neg(x, name="neg"), x, name="add"), name="relu"))
    return b.build()


def test_every_backend_answers_for_every_node_with_reasons() -> None:
    acc = ToyBackend("acc", ops=("Relu",))
    cpu = ToyBackend("cpu", ops=("Relu", "Neg", "Add"))
    ann = annotate(graph(), [acc, cpu])
    assert ann.names == ("acc", "cpu")
    assert set(ann.support) == {"neg", "add", "relu"}
    assert ann.support["relu"]["acc"].ok and ann.support["neg"]["cpu"].ok
    assert not ann.support["neg"]["acc"].ok
    assert ann.reason("neg", "acc") == "acc does not implement Neg"
    assert ann.reason("relu", "acc") == ""


def test_a_raising_supports_becomes_a_refusal_naming_the_error() -> None:
    class Broken(ToyBackend):
        def supports(self, node, target):
            raise RuntimeError("device lost")

    ann = annotate(graph(), [Broken("broken"), ToyBackend("cpu", ops=("Relu", "Neg", "Add"))])
    assert not ann.support["add"]["broken"].ok
    assert "RuntimeError: device lost" in ann.support["add"]["broken"].reason


def test_composites_cover_inner_unnamed_ops_and_keep_the_check_verdict() -> None:
    fused = Pattern("add_relu", Op("Relu", Op("Add", Op("Neg", Var("x")), Var("y"))))
    refused = Pattern("neg_relu", Op("Relu", Op("Add", ...)),
                      check=lambda m, target: Support.no("accumulator too narrow"))
    acc = ToyBackend("acc", ops=("Relu",))
    acc.patterns = (fused, refused)
    ann = annotate(graph(), [acc, ToyBackend("cpu", ops=("Relu", "Neg", "Add"))])
    by_pattern = {c.pattern: c for c in ann.composites}
    assert by_pattern["add_relu"].nodes == ("neg", "add", "relu")
    assert by_pattern["add_relu"].support.ok and by_pattern["add_relu"].root == "relu"
    assert by_pattern["neg_relu"].support.reason == "accumulator too narrow"
    assert [c.pattern for c in ann.accepted()] == ["add_relu"]
    # A backend takes what its accepted composite covers, though it refuses those nodes alone.
    assert ann.takes("neg", "acc") and not ann.support["neg"]["acc"].ok


def test_a_composite_that_is_not_convex_is_refused_with_the_node_in_the_way() -> None:
    # Add(Neg(Relu(x)), y) over the diamond covers A, B and D, but C reads A and feeds D.
    b = GraphBuilder("diamond")
    a = b.Relu(b.input("x", (1, 8)), name="A")
    b.output(b.Add(b.Neg(a, name="B"), b.Relu(a, name="C"), name="D"))
    acc = ToyBackend("acc", ops=("Relu", "Add"))
    acc.patterns = (Pattern("relu_neg_add", Op("Add", Op("Neg", Op("Relu", Var("x"))), Var("y"))),)
    (composite,) = annotate(b.build(), [acc]).composites
    assert composite.nodes == ("A", "B", "D")
    assert composite.support.reason == "pattern relu_neg_add at D is not convex: node C reads from it and feeds it"


def test_a_backend_selected_twice_is_an_error() -> None:
    with pytest.raises(PartitionError, match="selected once"):
        annotate(graph(), [ToyBackend("cpu"), ToyBackend("cpu")])
