"""The two numbers the partitioner decides with: compute time and transfer time.

Both come from the backends' declarations (ARCHITECTURE.md rule 5): compute time
from :meth:`Backend.estimate`, transfer time from the declared memory hierarchies.
"""

from __future__ import annotations

import math

from hetero.core.ir.graph import Graph
from hetero.core.plugin.backend import Backend


def estimate_seconds(backend: Backend, subgraph: Graph) -> float:
    """``backend.estimate(subgraph)``; infinite when the estimate raises or is not a
    finite number of seconds, so that a broken estimate never wins a placement."""
    try:
        seconds = float(backend.estimate(subgraph))
    except Exception:  # noqa: BLE001 - a plugin failure must not stop partitioning
        return math.inf
    return seconds if math.isfinite(seconds) and seconds >= 0 else math.inf


def transfer_seconds(nbytes: int, src: Backend, dst: Backend) -> float:
    """Seconds to move ``nbytes`` from ``src``'s memory to ``dst``'s.

    Data leaves through the source's outermost level and arrives through the
    destination's; the slower of the two bounds the copy, so the cost is the larger
    of the two levels' :meth:`~hetero.core.memory.MemoryLevel.transfer_seconds`.
    Nothing moves between regions of one backend: they share its memory.
    """
    if src.name == dst.name:
        return 0.0
    return max(src.memory.transfer_seconds(nbytes), dst.memory.transfer_seconds(nbytes))
