"""A region as the steps a kernel-generating backend compiles it into.

Every backend that lowers to the tensor IR compiles a region the same way: anchors
grouped with their epilogues (:func:`~hetero.core.passes.fuse.fuse_epilogues`), one step
per group or lone node in order (:func:`~hetero.core.memory.schedule_steps`), each step a
kernel over the graph values it reads and writes, except a reshape of a value the region
itself made or of one of its inputs, which is a view of that value (no kernel, no copy). :func:`kernel_steps`
makes that plan; :func:`region_constants` gives the constants the kernels read and the
graph outputs that no kernel makes (inputs or constants handed straight through).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.tir import PrimFunc
from hetero.core.lower.registry import group_outputs, lower_group, lower_node
from hetero.core.memory import schedule_steps

#: Ops that only rename a C-contiguous array's shape.
VIEW_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})


@dataclass(frozen=True)
class KernelStep:
    """One step: the ``members`` it computes (a fused group, or one node), the graph values
    it reads and writes in the order its lowering takes them as parameters, and, for a
    view, the shape its one output gives its one input."""

    members: tuple[Node, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    view: tuple[int, ...] | None = None

    @property
    def node(self) -> Node:
        """The step's first node (the anchor of a group)."""
        return self.members[0]

    @property
    def label(self) -> str:
        """``name (Op+Op)``: the anchor's name and the ops it computes."""
        return f"{self.node.name} ({'+'.join(n.op for n in self.members)})"

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the nodes it computes."""
        return tuple(n.name for n in self.members)

    def lower(self) -> PrimFunc:
        """The kernel step's tensor-IR function: its group lowered as one (named after the
        anchor), or its one node."""
        members = list(self.members)
        return lower_group(members, self.node.name) if len(members) > 1 else lower_node(self.node)


def kernel_steps(graph: Graph, view_ops: Collection[str] = VIEW_OPS) -> list[KernelStep]:
    """``graph``'s steps in order (``graph`` already grouped by :func:`fuse_epilogues`).

    A lone node of ``view_ops`` is a view when it keeps the dtype and the number of
    elements and its operand is a value an earlier step made that no caller holds (not
    a graph output), or a graph input that the view does not hand back to the caller (a
    run reads its inputs C-contiguous and never writes them); otherwise it is a kernel
    like any other.
    """
    steps: list[KernelStep] = []
    made: set[str] = set()
    outputs_of_graph = {v.name for v in graph.outputs}
    inputs = {v.name for v in graph.inputs}
    for members in schedule_steps(graph):
        node = members[0]
        source = node.inputs[0] if node.inputs else None
        if (len(members) == 1 and node.op in view_ops and source is not None
                and (source.name in made and source.name not in outputs_of_graph
                     or source.name in inputs and node.output.name not in outputs_of_graph)
                and source.dtype == node.output.dtype and source.type.size == node.output.type.size):
            steps.append(KernelStep(members, (source.name,), (node.output.name,), tuple(node.output.shape)))
        else:
            inputs = tuple(dict.fromkeys(v.name for n in members for v in n.inputs
                                         if v is not None and v.producer not in members))
            steps.append(KernelStep(members, inputs, tuple(v.name for v in group_outputs(members))))
        made.update(steps[-1].outputs)
    return steps


def region_constants(graph: Graph, used: Iterable[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The constants among ``used`` (the values the steps read) and the graph's constant
    outputs, by name; and the graph outputs no step makes (an input or a constant handed
    through), each aliased to itself."""
    wanted = set(used)
    constants = {n: v.data for n, v in graph.values.items() if v.data is not None and n in wanted}
    for v in graph.outputs:
        if v.data is not None:
            constants[v.name] = v.data
    aliases = {v.name: v.name for v in graph.outputs if v.producer is None}
    return constants, aliases


__all__ = ["VIEW_OPS", "KernelStep", "kernel_steps", "region_constants"]
