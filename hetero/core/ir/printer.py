"""The text form of a graph: stable, so tests can compare it line by line.

::

    graph mlp(%x: f32[1,4]) -> (%y: f32[1,2]) {
      %w = const f32[4,2]
      %y = MatMul(%x, %w) : f32[1,2]
      return %y
    }

Attributes print sorted by name; constants of at most eight elements print their
values; an absent optional input prints as ``_``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from hetero.core.ir.graph import Graph, Node, Value

_INLINE_ELEMENTS = 8


def format_value(value: Any) -> str:
    """An attribute value or small constant as text."""
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, np.ndarray):
        if value.size <= _INLINE_ELEMENTS:
            return f"{value.dtype.name}{list(value.shape)}{_format_list(value.ravel().tolist())}"
        return f"{value.dtype.name}{list(value.shape)}"
    if isinstance(value, tuple):
        return _format_list(list(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value)
    return str(value)


def _format_list(items: list[Any]) -> str:
    return "[" + ", ".join(repr(i) if isinstance(i, float) else str(i) for i in items) + "]"


def format_node(node: Node) -> str:
    """One node as ``%out = Op(%a, %b) {attrs} : type``."""
    outs = ", ".join(f"%{v.name}" for v in node.outputs)
    ins = ", ".join(f"%{v.name}" if v is not None else "_" for v in node.inputs)
    attrs = ", ".join(f"{k}={format_value(node.attrs[k])}" for k in sorted(node.attrs))
    types = ", ".join(str(v.type) for v in node.outputs)
    text = f"{outs} = {node.op}({ins})"
    if attrs:
        text += f" {{{attrs}}}"
    text = f"{text} : {types}"
    return text if node.group is None else f"{text}  # group {node.group}"


def _format_constant(value: Value) -> str:
    assert value.data is not None
    text = f"%{value.name} = const {value.type}"
    if value.data.size <= _INLINE_ELEMENTS:
        text += " " + _format_list(value.data.ravel().tolist())
    return text


def format_graph(graph: Graph) -> str:
    """The whole graph as text (what ``str(graph)`` returns)."""
    ins = ", ".join(f"%{v.name}: {v.type}" for v in graph.inputs)
    outs = ", ".join(f"%{v.name}: {v.type}" for v in graph.outputs)
    lines = [f"graph {graph.name}({ins}) -> ({outs}) {{"]
    lines += [f"  {_format_constant(v)}" for v in graph.values.values() if v.data is not None]
    lines += [f"  {format_node(n)}" for n in graph.nodes]
    lines.append("  return " + ", ".join(f"%{v.name}" for v in graph.outputs))
    lines.append("}")
    return "\n".join(lines)
