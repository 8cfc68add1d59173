"""Identity and (inference) Dropout removal.

Invariant established: no Identity or Dropout node remains, except an Identity that
carries a graph output's name for a graph input or for a value that is another graph
output too: the graph's interface names are part of its contract, so they are kept.
When the removed node's output is a graph output, its producer's value is renamed to
the output name, so callers see the same output names after the pass.
"""

from __future__ import annotations

from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.pattern import Match, Op, Var
from hetero.core.passes.rewrite import Rule, rewrite


def _check(graph: Graph, m: Match) -> str | None:
    out, source = m.root.output, m["x"]
    if out not in graph.outputs:
        return None
    if source in graph.inputs:
        return f"graph output {out.name} is graph input {source.name} under another name"
    if source in graph.outputs:
        return f"graph outputs {out.name} and {source.name} are the same value under two names"
    return None


def _source(graph: Graph, m: Match) -> Value:
    return m["x"]


RULES = (
    Rule("remove_identity", Op(("Identity", "Dropout"), Var("x")), _source, _check,
         doc="Identity(x) and Dropout(x) are x"),
)


def remove_identity(graph: Graph) -> Graph:
    """A copy of ``graph`` with Identity and Dropout nodes bypassed and removed."""
    return rewrite(graph, RULES).graph
