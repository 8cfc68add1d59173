"""Algebraic no-ops: nodes that give back one of their operands unchanged.

Invariant established: no Cast to its operand's own dtype, no Expand to its operand's
own shape, no Add or Sub of a zero constant, no Mul or Div by a constant one, and no
Where with a constant condition, where the result has the kept operand's type. Such
nodes are what onnx's function bodies leave when an optional feature is unused
(Attention without a mask adds a zero bias, casts float32 to float32 and selects
with an all-false "row fully masked" condition).

Each rewrite returns the operand bit for bit, except that ``x + 0`` and ``x - 0`` of
``x = -0.0`` give ``-0.0`` where IEEE arithmetic gives ``+0.0``: equal as numbers,
which is what every op downstream compares.
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.pattern import Const, Match, Op, Var
from hetero.core.passes.rewrite import Rule, rewrite


def _same_type_as(operand: str):  # noqa: ANN202 - a check function
    def check(graph: Graph, m: Match) -> str | None:
        if m[operand].type != m.root.output.type:
            return f"the result's type {m.root.output.type} is not its operand's {m[operand].type}"
        return None

    return check


def _keep(operand: str):  # noqa: ANN202 - a replacement function
    def replacement(graph: Graph, m: Match) -> Value:
        return m[operand]

    return replacement


def _all(value: float):  # noqa: ANN202 - a constant predicate
    def where(array: np.ndarray) -> bool:
        return bool(array.size) and bool(np.all(array == value))

    return where


def _where_branch(graph: Graph, m: Match) -> Value:
    return m["a"] if np.all(m["cond"].data) else m["b"]


def _where_constant(graph: Graph, m: Match) -> str | None:
    cond = m["cond"].data
    if np.any(cond) and not np.all(cond):
        return "the condition is mixed"
    kept = _where_branch(graph, m)
    if kept.type != m.root.output.type:
        return f"the result's type {m.root.output.type} is not the kept branch's {kept.type}"
    return None


RULES = (
    Rule("cast_to_own_dtype", Op("Cast", Var("x"), where=lambda n: n.inputs[0].dtype == n.output.dtype),
         _keep("x"), _same_type_as("x"), doc="Cast to the dtype x has is x"),
    Rule("expand_to_own_shape", Op("Expand", Var("x")), _keep("x"), _same_type_as("x"),
         doc="Expand to the shape x has is x"),
    Rule("add_zero", Op("Add", Var("x"), Const("z", where=_all(0.0)), commute=True), _keep("x"),
         _same_type_as("x"), doc="x + 0 is x"),
    Rule("sub_zero", Op("Sub", Var("x"), Const("z", where=_all(0.0))), _keep("x"),
         _same_type_as("x"), doc="x - 0 is x"),
    Rule("mul_one", Op("Mul", Var("x"), Const("o", where=_all(1.0)), commute=True), _keep("x"),
         _same_type_as("x"), doc="x * 1 is x"),
    Rule("div_one", Op("Div", Var("x"), Const("o", where=_all(1.0))), _keep("x"),
         _same_type_as("x"), doc="x / 1 is x"),
    Rule("where_constant_condition", Op("Where", Const("cond"), Var("a"), Var("b")), _where_branch,
         _where_constant, doc="Where with an all-true (all-false) condition is its first (second) branch"),
)


def simplify_algebra(graph: Graph) -> Graph:
    """A copy of ``graph`` with the no-ops above removed."""
    return rewrite(graph, RULES).graph
