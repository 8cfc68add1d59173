"""Constant folding.

Invariant established: no node computes only from constants (or, for ops with a
``fold`` hook such as ``Shape``, from input types alone), unless one of its outputs
would exceed the element limit; those nodes stay, and the rewrite log says why.
A DequantizeLinear of an int8 or int32 constant also stays: it marks a quantised
weight or bias of a QDQ graph. An empty tensor (a dimension of 0) holds no data, so a
node whose outputs are all empty is folded whatever its inputs, a Concat drops its
empty operands and a scatter of no updates is its data: no backend then meets a tensor without elements except as the
operand of a node that still computes something from it.
Folding uses each op's reference semantics, so a folded graph computes what the
unfolded one did, bit for bit.
"""

from __future__ import annotations

import numpy as np

from hetero.core.exec.reference import run_node
from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.pattern import Match, Op
from hetero.core.passes.rewrite import Rule, rewrite

#: Elements per folded output above which a node is left alone: folding would hold
#: the tensor in memory a second time, and a broadcast (Expand) could blow it up.
DEFAULT_LIMIT = 2**26


def _empty_outputs(node: Node) -> bool:
    return bool(node.outputs) and all(v.type.size == 0 for v in node.outputs)


def _foldable(node: Node) -> bool:
    # A DequantizeLinear of an int8/int32 constant is how a QDQ graph marks a quantised
    # weight or bias: folding it back to float would erase the quantisation (onnxruntime
    # keeps these nodes too).
    if (node.op == "DequantizeLinear" and node.inputs[0].data is not None
            and node.inputs[0].dtype in (np.int8, np.int32)):
        return False
    if node.opdef.fold is not None or _empty_outputs(node):
        return True
    return all(v is None or v.data is not None for v in node.inputs)


def constant_folding_rules(limit: int = DEFAULT_LIMIT) -> tuple[Rule, ...]:
    """The folding rule with an element ``limit`` per folded output."""

    def check(graph: Graph, m: Match) -> str | None:
        for v in m.root.outputs:
            if v.type.size > limit:
                return (f"output {v.name} would hold {v.type.size} elements, over the folding "
                        f"limit of {limit}; raise the limit to fold it")
        return None

    def replacement(graph: Graph, m: Match) -> list[Value]:
        node = m.root
        opdef = node.opdef
        if _empty_outputs(node):
            arrays = [np.zeros(v.shape, v.dtype) for v in node.outputs]
        elif opdef.fold is not None:
            arrays = opdef.fold(node.input_types(), node.attrs)
        else:
            arrays = run_node(node, [v.data if v is not None else None for v in node.inputs])
        return [graph.add_constant(np.asarray(a).astype(v.dtype, copy=False), name=v.name)
                for v, a in zip(node.outputs, arrays)]

    return (Rule("fold_constants", Op(None, ..., where=_foldable), replacement, check,
                 doc="evaluate a node whose operands are all known, or whose outputs are empty"),
            Rule("drop_empty_concat_operands", Op("Concat", ..., where=_has_empty_operand),
                 _concat_nonempty, doc="Concat ignores operands without elements"),
            Rule("split_off_empty_outputs", Op("Split", ..., where=_some_outputs_empty),
                 _split_nonempty, doc="a Split's empty outputs are constants"),
            *(Rule(f"{op.lower()}_of_nothing", Op(op, ..., where=_no_updates), _scattered_into,
                   doc=f"{op} with no updates is its data") for op in ("ScatterElements", "ScatterND")))


def _no_updates(node: Node) -> bool:
    return node.inputs[2].type.size == 0 and node.inputs[0].type == node.output.type


def _scattered_into(graph: Graph, m: Match) -> Value:
    return m.root.inputs[0]


def _some_outputs_empty(node: Node) -> bool:
    return any(v.type.size == 0 for v in node.outputs) and not _empty_outputs(node)


def _split_nonempty(graph: Graph, m: Match) -> list[Value]:
    node = m.root
    sizes = [s for s in node.attrs["split"] if s > 0]
    split = graph.add_node("Split", [node.inputs[0]], {"axis": node.attrs["axis"], "split": sizes})
    parts = iter(split.outputs)
    return [graph.add_constant(np.zeros(v.shape, v.dtype), name=v.name) if v.type.size == 0
            else next(parts) for v in node.outputs]


def _has_empty_operand(node: Node) -> bool:
    return (node.output.type.size > 0
            and any(v is not None and v.type.size == 0 for v in node.inputs))


def _concat_nonempty(graph: Graph, m: Match) -> Value:
    node = m.root
    kept = [v for v in node.inputs if v is not None and v.type.size > 0]
    return graph.add_node("Concat", kept, dict(node.attrs)).output


def fold_constants(graph: Graph, limit: int = DEFAULT_LIMIT) -> Graph:
    """A copy of ``graph`` with every node computable from constants replaced by constants."""
    return rewrite(graph, constant_folding_rules(limit)).graph
