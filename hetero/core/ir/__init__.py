"""The graph IR: types, values, nodes, graphs, op definitions, builder, verifier, printer.

The pattern language over it (:mod:`hetero.core.ir.pattern`) lives here too, below both
the graph passes that rewrite with it and the plugin contract whose composites are
written in it.
"""

from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph, Node, Value
from hetero.core.ir.opdef import REQUIRED, Attr, OpDef, get_op, op_names, register
from hetero.core.ir.types import TensorType, as_dtype
from hetero.core.ir.verify import problems, verify

__all__ = [
    "REQUIRED", "Attr", "Graph", "GraphBuilder", "Node", "OpDef", "TensorType", "Value",
    "as_dtype", "get_op", "op_names", "problems", "register", "verify",
]
