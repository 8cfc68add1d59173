"""A step part's intermediates in one arena, planned over its steps.

:func:`plan_steps` plans the values a part's kernels write with :mod:`hetero.core.memory`
(:func:`~hetero.core.memory.analyze_step_liveness`: a view shares its source's memory,
so the source lives until the view's last reader; a step's inputs and outputs are live
together, since kernels refuse overlapping arrays) and says, per step, where each kernel
output goes: an offset in the arena, or allocated apart. The part's outputs, and the
values they are views of, are allocated apart: an arena a later run reuses must not be
what the caller holds. :func:`host_arena` is the arena of one run, in host memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.core.memory import MemoryPlan, StepUse, analyze_step_liveness, plan_arena

#: Arena offsets, and the arena's address, are multiples of this: a cache line.
ALIGNMENT = 64

#: Where a kernel output goes: its arena offset (None: allocated apart), its bytes,
#: shape and dtype.
Slot = tuple[int | None, int, tuple[int, ...], np.dtype]


def plan_steps(owner: str, steps: Sequence[Any], outputs: Sequence[str],
               alignment: int = ALIGNMENT) -> tuple[MemoryPlan, list[list[Slot]]]:
    """The arena plan of ``steps``' intermediates (each a :class:`~hetero.core.parts.part.Step`)
    and, per step, the :data:`Slot` of each kernel output; ``owner`` names the part in a
    planning error."""
    types = value_types(steps)
    viewed = {step.outputs[0]: step.inputs[0] for step in steps if step.view is not None}
    apart = set()
    for name in outputs:
        while name in viewed:
            name = viewed[name]
        apart.add(name)
    liveness = analyze_step_liveness(
        owner, [StepUse(s.name, s.inputs, s.outputs, s.view is not None) for s in steps],
        {name: nbytes(*t) for name, t in types.items()})
    plan = plan_arena(liveness, [iv for iv in liveness.intervals if iv.name not in apart],
                      space="host", alignment=alignment)
    offsets = {a.name: a.offset for a in plan.allocations}
    return plan, [[(offsets.get(name), nbytes(*types[name]), *types[name]) for name in step.outputs]
                  if step.view is None else [] for step in steps]


def unplanned_slots(steps: Sequence[Any]) -> list[list[Slot]]:
    """Per step, every kernel output allocated apart: for a device with no host arena."""
    return [[(None, nbytes(shape, dtype), shape, dtype) for shape, dtype in step.output_types]
            if step.view is None else [] for step in steps]


def value_types(steps: Sequence[Any]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype of every value a kernel of ``steps`` writes, by name."""
    return {name: t for step in steps if step.view is None for name, t in zip(step.outputs, step.output_types)}


def nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    """The bytes of an array of ``shape`` and ``dtype``."""
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def host_arena(size: int, alignment: int = ALIGNMENT) -> np.ndarray:
    """``size`` uninitialised bytes of host memory, starting at a multiple of ``alignment``."""
    raw = np.empty((size + alignment,), np.uint8)
    skip = -raw.ctypes.data % alignment
    return raw[skip:skip + size]


__all__ = ["ALIGNMENT", "Slot", "host_arena", "nbytes", "plan_steps", "unplanned_slots", "value_types"]
