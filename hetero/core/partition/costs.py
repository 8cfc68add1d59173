"""The two numbers the partitioner decides with: compute time and transfer time.

Both come from the backends' declarations (ARCHITECTURE.md rule 5): compute time
from :meth:`Backend.estimate`, transfer time from the declared memory hierarchies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hetero.core.ir.graph import Graph
from hetero.core.plugin.target import Target


@dataclass(frozen=True)
class Estimate:
    """A backend's estimate of a subgraph: ``seconds``, or infinity and the ``problem``
    (the error it raised, the value it returned) when it could not make one."""

    seconds: float
    problem: str = ""


def estimate(backend: Target, subgraph: Graph) -> Estimate:
    """``backend.estimate(subgraph)``, contained: a raising estimate, or one that is not a
    finite, non-negative number of seconds, is infinite (so that it never wins a
    placement) and says why, for the partition report (ARCHITECTURE.md rule 6)."""
    try:
        answer = backend.estimate(subgraph)
    except Exception as exc:  # noqa: BLE001 - a plugin failure must not stop partitioning
        return Estimate(math.inf, f"{backend.name}.estimate() raised {type(exc).__name__}: {exc}")
    try:
        seconds = float(answer)
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        return Estimate(math.inf, f"{backend.name}.estimate() returned {answer!r}, not a finite, "
                                  "non-negative number of seconds")
    return Estimate(seconds)


def estimate_seconds(backend: Target, subgraph: Graph) -> float:
    """The seconds of :func:`estimate` (infinite when the backend could not estimate)."""
    return estimate(backend, subgraph).seconds


def transfer_seconds(nbytes: int, src: Target, dst: Target) -> float:
    """Seconds to move ``nbytes`` from ``src``'s memory to ``dst``'s.

    Data leaves through the source's outermost level and arrives through the
    destination's; the slower of the two bounds the copy, so the cost is the larger
    of the two levels' :meth:`~hetero.core.memory.MemoryLevel.transfer_seconds`.
    Nothing moves between regions of one backend: they share its memory.
    """
    if src.name == dst.name:
        return 0.0
    return max(src.memory.transfer_seconds(nbytes), dst.memory.transfer_seconds(nbytes))
