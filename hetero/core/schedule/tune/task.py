"""Tuning tasks: the distinct kernels a backend compiles for a model.

A task is one kernel function before scheduling, named by a key the backend derives
from its structure and the options that shape its schedule (the CPU backend: its JIT cache's
structural key of the lowered function and the thread count), so the equal
convolutions of ResNet-50's bottlenecks are one task, and records made on one model
serve another with the same kernels. Its weight, occurrences x the default schedule's
measured seconds, is what the budget is shared by: the time the model spends there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hetero.core.schedule import Trace


@dataclass(frozen=True)
class TuningTask:
    """One distinct kernel: ``key`` (its identity in records), the ``backend`` that builds
    it, a ``label`` for people (``conv1 (Conv+Relu) f32[1,64,56,56]``), how many times
    the model runs it, its floating-point operations per run (for GFLOP/s), its default
    schedule's ``trace``, and ``payload``: what the backend needs to build it in another
    process (picklable; the tuner never looks inside)."""

    key: str
    backend: str
    label: str
    occurrences: int
    flops: float
    default_trace: Trace
    payload: Any = field(repr=False, compare=False, default=None)


def merge_tasks(found: list[TuningTask]) -> list[TuningTask]:
    """``found`` with tasks of equal key made one, their occurrences summed, in order of
    first appearance."""
    merged: dict[str, TuningTask] = {}
    for task in found:
        seen = merged.get(task.key)
        if seen is None:
            merged[task.key] = task
        else:
            merged[task.key] = TuningTask(seen.key, seen.backend, seen.label, seen.occurrences + task.occurrences,
                                          seen.flops, seen.default_trace, seen.payload)
    return list(merged.values())
