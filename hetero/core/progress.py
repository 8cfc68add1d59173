"""Progress of long steps (compiling, calibrating, simulating, comparing), for a front end to show.

Core code and plugins announce what they are doing; they never print. A front end
(the command line shows it on a terminal) installs a :class:`Reporter` for the
duration of a call with :func:`reporting`; with none installed every call here costs
one context-variable read and does nothing.

>>> progress.step("compile", 2, 5, "region r1 on my_npu")    # doctest: +SKIP
>>> with progress.stage("optimise"):                          # doctest: +SKIP
...     graph = optimize(graph)

The reporter is context-local (a :class:`contextvars.ContextVar`), so threads and
tasks that did not install one stay silent. A :func:`stage` is also a phase of
:mod:`hetero.core.timing`, so ``--timings`` reports it without a second wrapper.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from hetero.core import timing


class Reporter(Protocol):
    """What a front end implements to show progress."""

    def step(self, stage: str, index: int, total: int, label: str) -> None:
        """Item ``index`` (1-based) of ``total`` of ``stage`` begins; ``total`` is 0 for a
        stage without counted items. ``label`` names the item ("region r1 on my_npu")."""

    def end(self, stage: str) -> None:
        """``stage`` is over."""


_REPORTER: ContextVar[Reporter | None] = ContextVar("hetero_progress", default=None)


def step(stage: str, index: int = 0, total: int = 0, label: str = "") -> None:
    """Announce that item ``index`` of ``total`` of ``stage`` begins (no-op without a reporter)."""
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter.step(stage, index, total, label)


def end(stage: str) -> None:
    """Announce that ``stage`` is over (no-op without a reporter)."""
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter.end(stage)


def reporter() -> Reporter | None:
    """The reporter installed here (None: none), for a front end that writes lines of
    its own and must keep them clear of what the reporter draws (a status line)."""
    return _REPORTER.get()


@contextmanager
def stage(name: str, label: str = "") -> Iterator[None]:
    """A stage without counted items: announced on entry, ended on exit, and timed as the
    core's phase ``name``."""
    step(name, 0, 0, label)
    try:
        with timing.phase(name):
            yield
    finally:
        end(name)


@contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Send the progress of everything run inside to ``reporter`` (None: to nobody)."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)
