"""Epilogue fusion: an anchor op and the elementwise ops that consume it form one group.

Invariant established: every node whose ``group`` is set belongs to a chain that
starts at an anchor (Conv, MatMul, Gemm, a pool or a global pool) and continues
through elementwise ops (bias and residual Add, per-channel Mul, Relu, Clip, ...)
each of which reads the previous member's output at the same shape; every value
produced inside a group except its last one has that next member as its only user
and is not a graph output. A backend lowers a group to one kernel, so the epilogue
is applied as the anchor's result is stored and never round-trips through memory.

Elementwise ops that no anchor took chain the same way among themselves (loop fusion:
a GELU written out, a gate, a long chain of activations), up to
:data:`MAX_ELEMENTWISE_CHAIN` ops a kernel: each is inlined into the next, so that
bounds how deep the kernel's expressions nest.

A group's members are consecutive nodes, placed where its last member was: an
epilogue's other operand (a residual, a mask) may be produced after the anchor in the
original order, and every such operand is ready by the last member's position, which
is where the group's one kernel runs. Moving the earlier members down to it keeps
the order topological, since nothing outside the group reads their outputs. Groups
are annotations and that reordering only: the graph's meaning is unchanged.

>>> fused = fuse_epilogues(graph)  # doctest: +SKIP
>>> groups(fused)                   # {"conv1": [conv1, add1, relu1], ...}  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hetero.core.ir.graph import Graph, Node

#: Ops that start a group: reductions whose epilogue is worth fusing.
ANCHORS = frozenset({"Conv", "MatMul", "Gemm", "MaxPool", "AveragePool",
                     "GlobalAveragePool", "GlobalMaxPool"})
#: Ops that may follow in a group: one output element from the same element of each input.
EPILOGUE = frozenset({
    "Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "LeakyRelu", "Clip", "Sigmoid",
    "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu", "Sqrt", "Exp", "Neg", "Abs",
    "Identity", "Dropout", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh",
    "Acosh", "Atanh", "Sign", "Round", "Mod", "PRelu", "Elu", "Selu", "Celu", "Softplus",
    "Softsign", "Mish", "Swish", "ThresholdedRelu", "Shrink",
})


#: The most elementwise ops a chain without an anchor puts in one kernel: enough to
#: keep a chain of activations in registers, and each IR walk's recursion shallow.
MAX_ELEMENTWISE_CHAIN = 32


@dataclass
class FusionLog:
    """Why each candidate epilogue was or was not fused (shown by partition reports)."""

    fused: list[tuple[str, str]] = field(default_factory=list)
    rejected: list[tuple[str, str, str]] = field(default_factory=list)


def fuse_epilogues(graph: Graph, log: FusionLog | None = None) -> Graph:
    """A copy of ``graph`` with anchors and their elementwise epilogues grouped."""
    g = graph.copy()
    for node in g.nodes:
        node.group = None
    outputs = {id(v) for v in g.outputs}
    for anchor in g.nodes:
        if anchor.op not in ANCHORS or anchor.group is not None:
            continue
        chain = [anchor]
        while True:
            tail = chain[-1]
            reason = _why_not_extend(tail, outputs)
            if reason is None:
                chain.append(tail.output.users[0])
                continue
            if log is not None and reason:
                log.rejected.append((anchor.name, tail.name, reason))
            break
        if len(chain) > 1:
            for node in chain:
                node.group = anchor.name
            if log is not None:
                log.fused.append((anchor.name, ", ".join(n.name for n in chain[1:])))
    for head in g.nodes:  # what no anchor took: elementwise chains of their own
        if head.op not in EPILOGUE or head.group is not None:
            continue
        chain = [head]
        while (len(chain) < MAX_ELEMENTWISE_CHAIN and _why_not_extend(chain[-1], outputs) is None
               and chain[-1].output.users[0].group is None):  # an anchor's epilogue stays its
            chain.append(chain[-1].output.users[0])
        if len(chain) > 1:
            for node in chain:
                node.group = head.name
            if log is not None:
                log.fused.append((head.name, ", ".join(n.name for n in chain[1:])))
    g.nodes = _gathered(g.nodes)
    return g


def _gathered(nodes: list[Node]) -> list[Node]:
    """``nodes`` with each group's members moved together to its last member's place."""
    members = groups_of(nodes)
    order: list[Node] = []
    for node in nodes:
        if node.group is None:
            order.append(node)
        elif members[node.group][-1] is node:
            order.extend(members[node.group])
    return order


def _why_not_extend(tail: Node, outputs: set[int]) -> str | None:
    """None if ``tail``'s single consumer can join the group, else the reason ("" = nothing to say)."""
    if len(tail.outputs) != 1:
        return f"{tail.name} has {len(tail.outputs)} outputs"
    value = tail.output
    if not value.users:
        return ""
    if id(value) in outputs:
        return f"{value.name} is a graph output, so it must be stored"
    if len(value.users) > 1:
        return f"{value.name} has {len(value.users)} users"
    user = value.users[0]
    if user.op not in EPILOGUE:
        return ""
    if user.output.shape != value.shape or user.output.dtype != value.dtype:
        return f"{user.name} ({user.op}) changes the shape or dtype of {value.name}"
    if sum(1 for v in user.inputs if v is value) != 1:
        return f"{user.name} ({user.op}) reads {value.name} twice"
    return None


def groups(graph: Graph) -> dict[str, list[Node]]:
    """The fused groups of ``graph`` by name, each in topological order."""
    return groups_of(graph.nodes)


def groups_of(nodes: list[Node]) -> dict[str, list[Node]]:
    """The fused groups among ``nodes`` by name, each member list in the given order."""
    found: dict[str, list[Node]] = {}
    for node in nodes:
        if node.group is not None:
            found.setdefault(node.group, []).append(node)
    return found
