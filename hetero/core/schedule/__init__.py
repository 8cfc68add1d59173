"""Schedule primitives on tensor-IR loop nests, recorded as replayable traces.

:class:`Schedule` transforms a :class:`~hetero.core.ir.tir.PrimFunc` (split, reorder,
fuse, tile, loop kinds, pipeline, annotate, cache stages, compute_at, compute_inline);
its :class:`Trace` replays the same steps on a fresh function, with the tunable
decisions changed if wished, and serialises to JSON.
"""

from hetero.core.schedule.schedule import Schedule
from hetero.core.schedule.trace import BlockRef, BufferRef, Instruction, LoopRef, Trace

__all__ = ["BlockRef", "BufferRef", "Instruction", "LoopRef", "Schedule", "Trace"]
