"""Simplification of Reshape and Transpose chains.

Invariant established: no reshape-like op (Reshape, Flatten, Squeeze, Unsqueeze) keeps
its input's shape or reads another reshape-like op (the pair is one Reshape to the
outer shape), no Transpose has the identity permutation, and no Transpose reads
another Transpose (the pair is one Transpose with the composed permutation). All of
these ops only move data, so the rewritten graph computes the same bits.
"""

from __future__ import annotations

from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.pattern import Match, Op, Var
from hetero.core.passes.rewrite import Rule, rewrite

#: Ops that keep the elements in row-major order and change only the shape.
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")


def _same_shape(node: Node) -> bool:
    return node.output.shape == node.inputs[0].shape


def _source(graph: Graph, m: Match) -> Value:
    return m["x"]


def _merge_reshapes(graph: Graph, m: Match) -> Value:
    return graph.add_node("Reshape", [m["x"]], {"shape": m.root.output.shape},
                          name=m.root.name).output


def _is_identity(node: Node) -> bool:
    return tuple(node.attrs["perm"]) == tuple(range(len(node.attrs["perm"])))


def _merge_transposes(graph: Graph, m: Match) -> Value:
    # out axis i = inner's axis outer[i] = x's axis inner[outer[i]].
    inner, outer = m.node("inner").attrs["perm"], m.root.attrs["perm"]
    return graph.add_node("Transpose", [m["x"]], {"perm": [inner[i] for i in outer]},
                          name=m.root.name).output


RULES = (
    Rule("remove_noop_reshape", Op(RESHAPES, Var("x"), where=_same_shape), _source,
         doc="a reshape to the input's own shape is its input"),
    Rule("merge_reshapes", Op(RESHAPES, Op(RESHAPES, Var("x"))), _merge_reshapes,
         doc="two reshapes in a row are one Reshape"),
    Rule("remove_identity_transpose", Op("Transpose", Var("x"), where=_is_identity), _source,
         doc="a Transpose with perm [0, 1, ...] is its input"),
    Rule("merge_transposes", Op("Transpose", Op("Transpose", Var("x"), name="inner")),
         _merge_transposes, doc="two Transposes in a row are one, with the composed perm"),
)


def simplify_reshape(graph: Graph) -> Graph:
    """A copy of ``graph`` with Reshape and Transpose chains shortened."""
    return rewrite(graph, RULES).graph
