"""simplify_algebra drops nodes that give back an operand unchanged, and only those."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir.graph import Graph
from hetero.core.passes.algebra import simplify_algebra


def _graph(op: str, const: np.ndarray | None, attrs=None, shape=(2, 3), dtype="float32",
           const_first: bool = False) -> Graph:
    g = Graph("g")
    x = g.add_input("x", shape, dtype)
    operands = [x]
    if const is not None:
        c = g.add_constant(const, "c")
        operands = [c, x] if const_first else [x, c]
    y = g.add_node(op, operands, attrs or {}).output
    g.set_outputs([g.add_node("Relu", [y]).output])
    return g


@pytest.mark.parametrize("op, const, attrs, first", [
    ("Cast", None, {"to": np.dtype("float32")}, False),
    ("Expand", None, {"shape": [2, 3]}, False),
    ("Add", np.zeros(3, np.float32), None, True),
    ("Sub", np.zeros((2, 3), np.float32), None, False),
    ("Mul", np.ones(1, np.float32), None, False),
    ("Div", np.ones(3, np.float32), None, False),
])
def test_a_no_op_is_removed_and_the_result_unchanged(op, const, attrs, first) -> None:
    g = _graph(op, const, attrs, const_first=first)
    out = simplify_algebra(g)
    assert [n.op for n in out.nodes] == ["Relu"]
    x = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
    np.testing.assert_array_equal(run_reference(out, {"x": x})[out.outputs[0].name],
                                  run_reference(g, {"x": x})[g.outputs[0].name])


@pytest.mark.parametrize("op, const, attrs", [
    ("Cast", None, {"to": np.dtype("float16")}),  # a real conversion
    ("Expand", None, {"shape": [4, 2, 3]}),  # a real broadcast
    ("Add", np.zeros((4, 2, 3), np.float32), None),  # the zero broadcasts x up
    ("Mul", np.array([1, 2, 1], np.float32), None),  # not all ones
    ("Sub", None, None),
])
def test_what_changes_its_operand_stays(op, const, attrs) -> None:
    if op == "Sub":  # 0 - x is no no-op: only a zero subtrahend is
        g = _graph("Sub", np.zeros(3, np.float32), None, const_first=True)
    else:
        g = _graph(op, const, attrs)
    assert op in [n.op for n in simplify_algebra(g).nodes]


@pytest.mark.parametrize("cond, kept", [(True, "a"), (False, "b")])
def test_where_on_a_constant_condition_is_its_branch(cond: bool, kept: str) -> None:
    g = Graph("g")
    a, b = g.add_input("a", (2, 3), "float32"), g.add_input("b", (2, 3), "float32")
    c = g.add_constant(np.full((2, 1), cond), "c")
    g.set_outputs([g.add_node("Relu", [g.add_node("Where", [c, a, b]).output]).output])
    out = simplify_algebra(g)
    (relu,) = out.nodes
    assert relu.inputs[0].name == kept


def test_where_on_a_mixed_condition_stays() -> None:
    g = Graph("g")
    a, b = g.add_input("a", (2, 3), "float32"), g.add_input("b", (2, 3), "float32")
    c = g.add_constant(np.array([[True], [False]]), "c")
    g.set_outputs([g.add_node("Where", [c, a, b]).output])
    assert [n.op for n in simplify_algebra(g).nodes] == ["Where"]
