"""Transfers at run time: copies of values between the memory spaces of backends.

Every backend has its own memory space at run time; a value produced by a part on
one backend and read by a part on another is copied once into the reader's space,
before the first part there that reads it (later parts of that backend read the
copy). For the CPU-memory backends a transfer is a copy into a fresh contiguous
array, which is what a device upload costs on the host side. Graph inputs and
outputs are not transfers here: a compiled part takes and returns host arrays, so
it moves its own inputs and outputs across the host boundary inside ``run``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TransferStep:
    """Copy ``value`` from ``src``'s memory space into ``dst``'s (both backend names)."""

    value: str
    src: str
    dst: str

    @property
    def label(self) -> str:
        """How the profile names this transfer: ``transfer VALUE SRC->DST``."""
        return f"transfer {self.value} {self.src}->{self.dst}"


def plan_transfers(parts: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> list[list[TransferStep]]:
    """The transfers each part needs before it runs.

    ``parts`` are ``(backend, input names, output names)`` in execution order; the
    result has one list per part. A value moves once per destination backend; a
    name no earlier part produces is a graph input or constant and does not move.
    """
    where: dict[str, str] = {}
    moved: set[tuple[str, str]] = set()
    plan: list[list[TransferStep]] = []
    for backend, inputs, outputs in parts:
        steps = []
        for name in inputs:
            src = where.get(name)
            if src is None or src == backend or (name, backend) in moved:
                continue
            moved.add((name, backend))
            steps.append(TransferStep(name, src, backend))
        plan.append(steps)
        for name in outputs:
            where[name] = backend
    return plan


def perform(step: TransferStep, spaces: Mapping[str, MutableMapping[str, np.ndarray]]) -> float:
    """Copy ``step.value`` from ``spaces[step.src]`` into ``spaces[step.dst]``; return seconds."""
    start = time.perf_counter()
    spaces[step.dst][step.value] = np.array(spaces[step.src][step.value], order="C", copy=True)
    return time.perf_counter() - start
