"""Lowering canonical ops to the tensor IR, and the plan of a region's kernel steps (part of the kit).

- :func:`lower_node` lowers one graph node to a :class:`~hetero.plugin.tir.PrimFunc`
  whose parameters are its inputs then its outputs; :func:`lower_group` lowers a fused
  group (an anchor and its epilogue) to one function; :func:`is_lowerable` says whether an
  op has a lowering. :func:`compute_nd` builds an elementwise compute over n dimensions.
  Lowering simplifies the index arithmetic the loops' ranges decide
  (:func:`simplify_indices`).
- :func:`fuse_epilogues` groups anchors with their elementwise epilogues (a graph pass);
  :func:`kernel_steps` then plans a region as :class:`KernelStep`\\ s in order, one per
  group or lone node, with reshapes of the region's own values as views (:data:`VIEW_OPS`);
  :func:`region_constants` are the weights the steps read.
"""

from __future__ import annotations

from hetero.core.lower import group_outputs, is_lowerable, lower_group, lower_node
from hetero.core.lower.elementwise import compute_nd
from hetero.core.lower.simplify import simplify_indices
from hetero.core.lower.steps import VIEW_OPS, KernelStep, kernel_steps, region_constants
from hetero.core.passes.fuse import fuse_epilogues

__all__ = [
    "VIEW_OPS", "KernelStep", "compute_nd", "fuse_epilogues", "group_outputs", "is_lowerable", "kernel_steps",
    "lower_group", "lower_node", "region_constants", "simplify_indices",
]
