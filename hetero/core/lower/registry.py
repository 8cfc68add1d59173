"""Lowering graph nodes to tensor-IR functions.

Each canonical op registers one lowering with :func:`lowers`: a function from the
input tensors (placeholders or earlier stages; ``None`` for an absent optional
input), the node's attributes and its output types to the output tensors, written
as compute definitions (:mod:`hetero.core.ir.tir.compute`). The op's meaning stays
its ``reference`` in :mod:`hetero.core.ir.ops`; a lowering says how to compute the
same numbers with loops.

:func:`lower_node` turns one node into a :class:`PrimFunc`; :func:`lower_group`
turns an anchor and its elementwise epilogue into one function, the epilogue applied
as the anchor's result is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import re
from typing import Any

from hetero.core.ir.graph import Node, Value
from hetero.core.ir.tir.compute import Reduce, Tensor, lower, placeholder, stages
from hetero.core.ir.tir.expr import Load
from hetero.core.ir.tir.stmt import PrimFunc
from hetero.core.ir.tir.visit import exprs_of
from hetero.core.ir.types import TensorType
from hetero.core.lower.simplify import simplify_indices
from hetero.core.lower.narrow import lower_widened
from hetero.errors import HeteroError, did_you_mean

#: ``(inputs, attrs, out_types, names) -> outputs``: ``names`` holds one unique
#: identifier per output for the stage that computes it; internal stages take names
#: derived from ``names[0]`` (``f"{names[0]}_max"``).
Lowering = Callable[[list[Tensor | None], dict[str, Any], list[TensorType], list[str]], list[Tensor]]

_LOWERINGS: dict[str, Lowering] = {}


def lowers(*ops: str) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of ``ops``."""

    def register(fn: Lowering) -> Lowering:
        for op in ops:
            if op in _LOWERINGS:
                raise ValueError(f"op {op} has two lowerings")
            _LOWERINGS[op] = fn
        return fn

    return register


def _load_lowerings() -> None:
    import hetero.core.lower  # noqa: F401  (the families register on import)


def is_lowerable(op: str) -> bool:
    """Whether ``op`` has a lowering to the tensor IR."""
    _load_lowerings()
    return op in _LOWERINGS


def lowering(op: str) -> Lowering:
    _load_lowerings()
    try:
        return _LOWERINGS[op]
    except KeyError:
        raise HeteroError(f"op {op} has no tensor-IR lowering{did_you_mean(op, _LOWERINGS)}") from None


def identifier(name: str, taken: set[str]) -> str:
    """``name`` as a C-like identifier not in ``taken`` (which it joins)."""
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        ident = "v_" + ident
    base, k = ident, 0
    while ident in taken:
        k += 1
        ident = f"{base}_{k}"
    taken.add(ident)
    return ident


def lower_node(node: Node) -> PrimFunc:
    """One node as one function: parameters are its present inputs, then its outputs."""
    return lower_group([node], node.name)


def group_outputs(nodes: Sequence[Node]) -> list[Value]:
    """The values a group hands on, in the order :func:`lower_group` makes them parameters by
    default: the last node's outputs, then every other member's output that a node outside
    the group reads."""
    members = {id(n) for n in nodes}
    return list(nodes[-1].outputs) + [
        v for n in nodes[:-1] for v in n.outputs if any(id(u) not in members for u in v.users)
    ]


def lower_group(nodes: Sequence[Node], name: str, outputs: Sequence[Value] | None = None) -> PrimFunc:
    """``nodes`` (in topological order) as one function.

    Values produced inside the group and read only inside it are inlined into their
    consumers, so an anchor (Conv, MatMul, ...) and its elementwise epilogue become
    one loop nest. ``outputs`` defaults to the last node's outputs plus any value
    that a node outside the group reads. Parameters: the group's external inputs in
    order of first use, then its outputs.
    """
    if outputs is None:
        outputs = group_outputs(nodes)
    taken: set[str] = set()
    tensors: dict[int, Tensor] = {}
    params: list[Tensor] = []
    for node in nodes:
        args: list[Tensor | None] = []
        for v in node.inputs:
            if v is None:
                args.append(None)
                continue
            if id(v) not in tensors:
                tensors[id(v)] = placeholder(v.shape, v.dtype, identifier(v.name, taken))
                params.append(tensors[id(v)])
            args.append(tensors[id(v)])
        names = [identifier(v.name, taken) for v in node.outputs]
        results = lower_widened(node.op, lowering(node.op), args, node.attrs,
                                [v.type for v in node.outputs], names)
        for v, t in zip(node.outputs, results):
            if t.shape != v.shape or t.dtype != v.dtype:
                raise HeteroError(
                    f"lowering of {node.op} gave {t.dtype}{list(t.shape)} for {v.name}, "
                    f"the graph says {v.type}"
                )
            tensors[id(v)] = t
    outs = [tensors[id(v)] for v in outputs]
    internal = {id(tensors[id(v)]) for node in nodes for v in node.outputs}
    order = stages(outs)
    consumers: dict[int, list[Tensor]] = {}
    for t in order:
        for p in t.inputs:
            consumers.setdefault(id(p), []).append(t)
    # Consumers first, so each stage knows where its consumers' bodies end up. A
    # reduction inlined into a stage that reduces would land inside that stage's
    # reduction, which the accumulator hoisting cannot express; one read more than
    # once where it lands (Gelu reads x twice) would be computed twice. Such a stage
    # stays a buffer.
    for t in reversed(order):
        if id(t) in internal and t not in outs and not t.is_placeholder:
            t.inline = not (_reduces(t) and (any(_reduces(s) for s in _landing(t, consumers))
                                             or _copies(t, consumers) > 1))
    for v, t in zip(outputs, outs):
        if t.is_placeholder:
            raise HeteroError(f"group {name}: output {v.name} is one of its inputs unchanged")
    return simplify_indices(lower(identifier(name, set()), params, outs))


def _copies(t: Tensor, consumers: dict[int, list[Tensor]]) -> int:
    """How many times ``t``'s body would appear in materialised stages if inlined."""
    total = 0
    for c in {id(c): c for c in consumers.get(id(t), [])}.values():
        reads = sum(1 for e in exprs_of(c.body) if isinstance(e, Load) and e.buffer is t.buffer)
        total += reads * (_copies(c, consumers) if c.inline else 1)
    return total


def _landing(t: Tensor, consumers: dict[int, list[Tensor]]) -> list[Tensor]:
    """The materialised stages that ``t``'s body ends up in (through inlined consumers)."""
    return [s for c in consumers.get(id(t), [])
            for s in (_landing(c, consumers) if c.inline else [c])]


def _reduces(t: Tensor) -> bool:
    return t.body is not None and any(isinstance(e, Reduce) for e in exprs_of(t.body))
