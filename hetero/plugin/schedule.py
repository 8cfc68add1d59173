"""Schedules on tensor-IR loop nests, their traces, and tuning (part of the kit).

- :class:`Schedule` transforms a :class:`~hetero.plugin.tir.PrimFunc` (split, reorder,
  fuse, tile, loop kinds, pipeline, annotate, cache stages, compute_at, compute_inline,
  rfactor); blocks and loops are named by :class:`BlockRef` and :class:`LoopRef`. Its
  :class:`Trace` of :class:`Instruction`\\ s replays the same steps on a fresh function
  with the tunable decisions changed, and serialises to JSON.
- Reading a loop tree: :func:`find_block`, :func:`block_names`, :func:`node_at`,
  :func:`children`, :func:`owned_loops`, :func:`enclosing_loops`, :func:`unique_name`;
  :func:`affine` and :func:`read_region` for a block's access patterns;
  :func:`find_accumulation` for a reduction's combiner.
- Tuning, for a backend that implements the ``tuning_*`` hooks: :class:`TuningTask`,
  :func:`merge_tasks`, the compile option that carries tuned traces
  (:data:`TUNED_OPTION`) and the reasons a candidate is rejected (:data:`REJECTIONS`).
"""

from __future__ import annotations

from hetero.core.schedule import BlockRef, BufferRef, Instruction, LoopRef, Schedule, Trace
from hetero.core.schedule.region import affine, read_region
from hetero.core.schedule.rfactor import find_accumulation
from hetero.core.schedule.tree import (
    block_names, children, enclosing_loops, find_block, node_at, owned_loops, unique_name,
)
from hetero.core.schedule.tune.records import TUNED_OPTION
from hetero.core.schedule.tune.space import REJECTIONS
from hetero.core.schedule.tune.task import TuningTask, merge_tasks

__all__ = [
    "REJECTIONS", "TUNED_OPTION", "BlockRef", "BufferRef", "Instruction", "LoopRef", "Schedule", "Trace",
    "TuningTask", "affine", "block_names", "children", "enclosing_loops", "find_accumulation", "find_block",
    "merge_tasks", "node_at", "owned_loops", "read_region", "unique_name",
]
