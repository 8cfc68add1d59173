"""Transfers at run time: the copies of values between the devices of compiled parts.

The plan is the partition's rule (:func:`~hetero.core.partition.transfers.find_transfers`)
applied to the compiled parts, so the executable's steps are the partition's transfer
nodes: a value produced by a part on one backend and read by a part on another moves
once into the reader's backend, before the first part there that reads it (later parts
of that backend read the copy); graph inputs come from, and graph outputs go back to,
the ``home`` backend's memory (the fallback's: the host), the outputs right after the
part that produced them. Constants never move: each part has its own.

A step names backends; the executable performs it between their parts' devices
(:mod:`hetero.core.exec.device`), and a step between two backends whose parts share
a device moves nothing, since the value is already there.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TransferStep:
    """Copy ``value`` from ``src``'s memory into ``dst``'s (both backend names)."""

    value: str
    src: str
    dst: str

    @property
    def label(self) -> str:
        """How the profile names this transfer: ``transfer VALUE SRC->DST``."""
        return f"transfer {self.value} {self.src}->{self.dst}"


@dataclass(frozen=True)
class TransferPlan:
    """The steps of each part, in execution order: ``into[i]`` before part ``i`` runs,
    ``home[i]`` (its graph outputs back to the home backend) right after it."""

    into: tuple[tuple[TransferStep, ...], ...]
    home: tuple[tuple[TransferStep, ...], ...]


def plan_transfers(parts: Sequence[tuple[str, Sequence[str], Sequence[str]]],
                   graph_outputs: Collection[str], home: str) -> TransferPlan:
    """The transfers of ``parts``, ``(backend, input names, output names)`` in execution
    order, for a graph whose outputs are ``graph_outputs``, its inputs and outputs in
    backend ``home``'s memory.

    A value moves once per destination backend; a name no earlier part produces is a
    graph input and comes from ``home``.
    """
    outputs = set(graph_outputs)
    where: dict[str, str] = {}
    moved: set[tuple[str, str]] = set()
    into: list[tuple[TransferStep, ...]] = []
    back: list[tuple[TransferStep, ...]] = []

    def move(name: str, src: str, dst: str) -> list[TransferStep]:
        if src == dst or (name, dst) in moved:
            return []
        moved.add((name, dst))
        return [TransferStep(name, src, dst)]

    for backend, inputs, produced in parts:
        into.append(tuple(s for name in inputs for s in move(name, where.get(name, home), backend)))
        where.update(dict.fromkeys(produced, backend))
        back.append(tuple(s for name in produced if name in outputs for s in move(name, backend, home)))
    return TransferPlan(tuple(into), tuple(back))
