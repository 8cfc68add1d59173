"""Where compile time goes: named phases, timed by the code that runs them, summed for a front end.

Core code and backends wrap their phases in :func:`phase` (a backend passes its own
name as ``owner``, so the core never needs to know it); a front end (``hetero compile
--timings``) collects them for the duration of a call with :func:`recording` and prints
:meth:`PhaseTimes.table`. With no recorder installed a phase costs one
context-variable read, so phases may wrap work done thousands of times.

Times are exclusive: a phase nested in another is subtracted from the outer one, so
the rows of a table add up to the wall time recorded and each share says what that
phase alone cost.

>>> with timing.recording() as times:                            # doctest: +SKIP
...     exe = hetero.compile(graph, targets=targets)
>>> print(times.table())                                         # doctest: +SKIP

The recorder is context-local (a :class:`contextvars.ContextVar`): threads that did
not install one record nothing, and the work of another process is reported by its
parent with :func:`add`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
import time

#: The owner of the core's own phases (import, optimise, partition, ...).
CORE = "hetero"


@dataclass
class PhaseTimes:
    """Seconds and counts per ``(owner, phase)``, exclusive of nested phases, in the order
    phases first ran; :attr:`wall` is the recording's wall time once it is over."""

    seconds: dict[tuple[str, str], float] = field(default_factory=dict)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    wall: float = 0.0
    _open: list[float] = field(default_factory=list, repr=False)

    def add(self, owner: str, name: str, seconds: float, count: int = 1) -> None:
        """Count ``seconds`` of ``owner``'s ``name`` (``count`` times run)."""
        key = (owner, name)
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
        self.counts[key] = self.counts.get(key, 0) + count

    def owners(self) -> list[str]:
        """Every owner with a phase, in the order each first ran."""
        return list(dict.fromkeys(owner for owner, _ in self.seconds))

    def total(self, owner: str | None = None) -> float:
        """The seconds of every phase (of ``owner``'s only, when given)."""
        return sum(s for (o, _), s in self.seconds.items() if owner is None or o == owner)

    def table(self) -> str:
        """The phases as a text table: seconds, share of the wall time and how often each
        ran, grouped by owner with a subtotal each; time in no phase is ``other``."""
        wall = self.wall or self.total()
        width = max([len(f"{o}  {n}") for o, n in self.seconds] + [len("phase")]) + 2
        lines = [f"{'phase':<{width}}{'seconds':>9}{'share':>8}{'runs':>7}"]

        def row(label: str, seconds: float, runs: str = "") -> str:
            share = seconds / wall if wall > 0 else 0.0
            return f"{label:<{width}}{seconds:>9.3f}{share:>8.1%}{runs:>7}"

        for owner in self.owners():
            phases = [(name, s) for (o, name), s in self.seconds.items() if o == owner]
            for name, seconds in phases:
                lines.append(row(f"{owner}  {name}", seconds, str(self.counts[(owner, name)])))
            if len(phases) > 1:
                lines.append(row(f"{owner}  (all)", self.total(owner)))
        lines.append(row("other", max(wall - self.total(), 0.0)))
        lines.append(row("total", wall))
        return "\n".join(lines)


_RECORDER: ContextVar[PhaseTimes | None] = ContextVar("hetero_timing", default=None)


@contextmanager
def phase(name: str, owner: str = CORE) -> Iterator[None]:
    """Time the enclosed work as ``owner``'s phase ``name`` (nothing without a recorder)."""
    times = _RECORDER.get()
    if times is None:
        yield
        return
    key = (owner, name)
    # Held from the start, so that a table lists phases in the order they began.
    times.seconds.setdefault(key, 0.0)
    times.counts.setdefault(key, 0)
    times._open.append(0.0)
    start = time.perf_counter()
    try:
        yield
    finally:
        spent = time.perf_counter() - start
        nested = times._open.pop()
        times.add(owner, name, spent - nested)
        if times._open:
            times._open[-1] += spent


def add(name: str, seconds: float, owner: str = CORE, count: int = 1) -> None:
    """Count ``seconds`` spent elsewhere (a worker process, say) as ``owner``'s ``name``.

    They are not subtracted from an enclosing phase: the caller decides whether its own
    wall time already covers them (it waited) or not."""
    times = _RECORDER.get()
    if times is not None:
        times.add(owner, name, seconds, count)


@contextmanager
def recording() -> Iterator[PhaseTimes]:
    """Record every phase run inside; the yielded :class:`PhaseTimes` is complete on exit."""
    times = PhaseTimes()
    token = _RECORDER.set(times)
    start = time.perf_counter()
    try:
        yield times
    finally:
        times.wall = time.perf_counter() - start
        _RECORDER.reset(token)
