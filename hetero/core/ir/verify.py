"""The graph verifier: every rule of the IR, checked and named.

:func:`verify` raises :class:`hetero.errors.VerificationError` naming the node and
the rule it breaks; :func:`problems` returns all of them. Tests run it after every
pass.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from hetero.core.ir.graph import Graph, complete_attrs, infer_node
from hetero.core.ir.opdef import get_op
from hetero.core.ir.types import TensorType
from hetero.errors import HeteroError, VerificationError


def problems(graph: Graph) -> list[str]:
    """Every broken rule of ``graph``, one message each; empty if it is well formed."""
    found: list[str] = []
    defined: set[int] = set()
    for v in graph.inputs:
        if v.data is not None:
            found.append(f"input {v.name}: a graph input must not carry constant data")
        if graph.values.get(v.name) is not v:
            found.append(f"input {v.name}: not registered in the graph's values")
        defined.add(id(v))
    for name, v in graph.values.items():
        if v.name != name:
            found.append(f"value {name}: registered under another name ({v.name})")
        if v.data is not None:
            if TensorType.of(v.data) != v.type:
                found.append(f"constant {name}: type {v.type} does not match its data "
                             f"{TensorType.of(v.data)}")
            defined.add(id(v))
    node_names: set[str] = set()
    # How often each node is listed among each value's users, counted once for the graph:
    # counting per node would walk a shared constant's users once per user (quadratic).
    listed = Counter((id(v), id(u)) for v in graph.values.values() for u in v.users)
    for node in graph.nodes:
        where = f"node {node.name} ({node.op})"
        if node.name in node_names:
            found.append(f"{where}: node name used twice")
        node_names.add(node.name)
        try:
            opdef = get_op(node.op)
        except HeteroError as exc:
            found.append(f"{where}: {exc}")
            continue
        for v in node.inputs:
            if v is None:
                continue
            if id(v) not in defined:
                rule = ("used before it is defined (nodes out of topological order)"
                        if graph.values.get(v.name) is v else "is not a value of this graph")
                found.append(f"{where}: input {v.name} {rule}")
            elif listed[id(v), id(node)] != sum(1 for i in node.inputs if i is v):
                found.append(f"{where}: input {v.name} does not list this node among its users")
        for v in node.outputs:
            if v.producer is not node:
                found.append(f"{where}: output {v.name} names another producer")
            if graph.values.get(v.name) is not v:
                found.append(f"{where}: output {v.name} is not registered in the graph's values")
            if id(v) in defined:
                found.append(f"{where}: output {v.name} is defined twice")
            defined.add(id(v))
        try:
            attrs = complete_attrs(opdef, node.inputs, opdef.normalize_attrs(node.attrs, where), where)
            if not attrs_equal(attrs, node.attrs):
                found.append(f"{where}: attributes are not in canonical form")
            inferred = infer_node(opdef, node.inputs, node.attrs, where)
        except HeteroError as exc:
            found.append(str(exc))
            continue
        recorded = [v.type for v in node.outputs]
        if inferred != recorded:
            found.append(f"{where}: output types {[str(t) for t in recorded]} differ from the "
                         f"inferred {[str(t) for t in inferred]}")
    found += _group_problems(graph)
    for v in graph.outputs:
        if id(v) not in defined:
            found.append(f"output {v.name}: not defined by any input, constant or node")
    if not graph.outputs:
        found.append(f"graph {graph.name}: has no outputs")
    return found


def _group_problems(graph: Graph) -> list[str]:
    """A fused group is a chain of consecutive nodes: each member after the first reads
    the previous one's output, which nothing else reads and which is not a graph output.
    Being consecutive in topological order, the group finds every operand it reads from
    outside ready when its first member starts, so one kernel can compute it all."""
    found: list[str] = []
    members: dict[str, list] = {}
    position: dict[str, list[int]] = {}
    for i, node in enumerate(graph.nodes):
        if node.group is not None:
            members.setdefault(node.group, []).append(node)
            position.setdefault(node.group, []).append(i)
    outputs = {id(v) for v in graph.outputs}
    for name, chain in members.items():
        first, last = position[name][0], position[name][-1]
        if last - first + 1 != len(chain):
            stray = next(n for n in graph.nodes[first:last] if n.group != name)
            found.append(f"group {name}: its members are not consecutive (node {stray.name} "
                         f"({stray.op}) runs between them), so the group's kernel would run "
                         f"before or after an operand it reads")
        for prev, node in zip(chain, chain[1:]):
            link = prev.outputs[0] if len(prev.outputs) == 1 else None
            if link is None or link not in node.inputs:
                found.append(f"node {node.name} ({node.op}): in group {name} but does not read "
                             f"the previous member {prev.name}")
            elif len(link.users) != 1 or id(link) in outputs:
                found.append(f"node {prev.name} ({prev.op}): its output {link.name} leaves group "
                             f"{name} before the group's end")
    return found


def attrs_equal(a: dict, b: dict) -> bool:
    """Attribute dicts compared by value (arrays element-wise, with their dtype)."""
    if a.keys() != b.keys():
        return False
    for key, x in a.items():
        y = b[key]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
                    and x.dtype == y.dtype and np.array_equal(x, y)):
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def verify(graph: Graph) -> Graph:
    """Raise VerificationError on the first broken rule; return ``graph`` if it is sound."""
    found = problems(graph)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise VerificationError(f"graph {graph.name}: {found[0]}{more}")
    return graph
