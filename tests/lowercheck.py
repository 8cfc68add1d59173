"""Running a lowered node (or group) on the tensor-IR interpreter, next to its reference result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from opcheck import reference

from hetero.core.ir import Node, Value
from hetero.core.ir.tir import PrimFunc, run_func, verify_func
from hetero.core.lower import lower_node


def run_lowered(func: PrimFunc, nodes: Node | Sequence[Node], inputs: dict[str, np.ndarray | None],
                outputs: Sequence[Value] | None = None) -> list[np.ndarray]:
    """Run ``func``, the lowering of ``nodes``, with graph inputs by name and constants
    from the graph; return its outputs.

    The function's parameters are the group's distinct external inputs in order of
    first use, then ``outputs`` (by default the last node's outputs).
    """
    group = [nodes] if isinstance(nodes, Node) else list(nodes)
    produced = {id(v) for n in group for v in n.outputs}
    outputs = list(group[-1].outputs) if outputs is None else list(outputs)
    arrays: list[np.ndarray] = []
    seen: set[int] = set()
    for v in (v for n in group for v in n.inputs):
        if v is None or id(v) in seen or id(v) in produced:
            continue
        seen.add(id(v))
        arrays.append(v.data if v.data is not None else inputs[v.name])
    arrays += [np.zeros(v.shape, v.dtype) for v in outputs]
    assert len(arrays) == len(func.params)
    results = run_func(func, {b.name: a for b, a in zip(func.params, arrays)})
    return [results[b.name] for b in func.params[-len(outputs):]]


def lowered_and_reference(op: str, inputs: dict[str, np.ndarray | None],
                          constants: tuple[str, ...] = (), **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    """``op``'s first output from its lowering run on the interpreter, and from its reference."""
    expected, node = reference(op, inputs, constants, **attrs)
    func = verify_func(lower_node(node))
    return run_lowered(func, node, inputs)[0], expected
