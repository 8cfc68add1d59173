"""How the command line talks to a person: the progress line, warnings, and errors in CLI terms.

- :class:`TerminalProgress` draws :mod:`hetero.core.progress` as one status line on
  stderr ("  3.2 s  compile 2/5 region r1 on npu_sim"), rewritten in place and erased
  when the command is done. :func:`progress_reporter` installs it only when stderr is
  a terminal and ``--quiet`` is not given, so pipes, files and tests see nothing.
- :func:`one_line_warnings` prints each warning as one line, without the Python
  source line that :func:`warnings.showwarning` adds.
- :func:`cli_message` words a :class:`~hetero.errors.HeteroError` with the command
  line's flags where the error names a Python keyword (``--input-shape`` for
  ``input_shapes=``).
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from hetero.errors import HeteroError, Keyword


class TerminalProgress:
    """A :class:`hetero.core.progress.Reporter` that keeps one status line on a terminal.

    The line names every stage in progress, outermost first, with its item count and
    the time since the command began; it is redrawn at most every ``interval`` seconds
    (a stage's first and last items always), and :meth:`close` erases it.
    """

    def __init__(self, stream: TextIO, clock: Callable[[], float] = time.monotonic,
                 interval: float = 0.1, width: int | None = None) -> None:
        self.stream = stream
        self.clock = clock
        self.interval = interval
        self.width = width
        self.start = clock()
        self._stages: dict[str, tuple[int, int, str]] = {}
        self._drawn = False
        self._last = float("-inf")

    def step(self, stage: str, index: int, total: int, label: str) -> None:
        """Show item ``index`` of ``total`` of ``stage`` as begun."""
        new = stage not in self._stages
        self._stages[stage] = (index, total, label)
        now = self.clock()
        if new or index <= 1 or index == total or now - self._last >= self.interval:
            self._draw(now)

    def end(self, stage: str) -> None:
        """Drop ``stage`` from the line."""
        if self._stages.pop(stage, None) is not None:
            self._draw(self.clock()) if self._stages else self.close()

    def note(self, text: str) -> None:
        """Write ``text`` as a line of its own above the status line, which stays."""
        self.close()
        self.stream.write(text + "\n")
        if self._stages:
            self._draw(self.clock())
        else:
            self.stream.flush()

    def close(self) -> None:
        """Erase the status line."""
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def line(self, now: float) -> str:
        """The status line's text at time ``now``."""
        parts = []
        for stage, (index, total, label) in self._stages.items():
            count = f" {index}/{total}" if total else ""
            parts.append(f"{stage}{count}" + (f" {label}" if label else ""))
        return f"{now - self.start:6.1f} s  " + " > ".join(parts)

    def _draw(self, now: float) -> None:
        width = self.width or shutil.get_terminal_size((80, 24)).columns
        # A line wider than the terminal wraps, and "\r" would then redraw only its tail.
        self.stream.write("\r\x1b[K" + self.line(now)[: max(width - 1, 10)])
        self.stream.flush()
        self._drawn = True
        self._last = now


@contextmanager
def progress_reporter(quiet: bool, stream: TextIO | None = None) -> Iterator[TerminalProgress | None]:
    """Install a :class:`TerminalProgress` on ``stream`` (default stderr) for the block,
    unless ``quiet`` or the stream is not a terminal."""
    from hetero.core import progress

    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    reporter = None if quiet or not (isatty and isatty()) else TerminalProgress(stream)
    with progress.reporting(reporter):
        try:
            yield reporter
        finally:
            if reporter is not None:
                reporter.close()


@contextmanager
def one_line_warnings(command: str, stream: TextIO | None = None,
                      status: TerminalProgress | None = None) -> Iterator[None]:
    """Print warnings raised inside as ``hetero COMMAND: warning: MESSAGE``, one line each
    (erasing the ``status`` line first, which the next progress step redraws)."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        out = file or stream or sys.stderr
        text = " ".join(str(message).split())
        if status is not None:
            status.close()
        try:
            out.write(f"hetero {command}: warning: {text}\n")
        except OSError:
            pass  # like warnings' own printer: a closed stream loses the warning, not the run

    saved = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = saved


#: How the command line spells each keyword an error may name (see hetero.errors.Keyword).
FLAGS: dict[str, Callable[[Keyword], str]] = {
    "input_shapes": lambda k: f"--input-shape {k.key or 'NAME'}=D,D,..." if k.key or k.value
    else "--input-shape",
    "input_values": lambda k: f"--input-value {k.key or 'NAME'}=V,V,...",
    "max_elements": lambda k: f"--max-elements {k.value}" if k.value else "--max-elements",
    "strict": lambda k: "--strict",
    "quantize": lambda k: "--quantize",
    "calibration_method": lambda k: f"--calibration-method {k.value}" if k.value else "--calibration-method",
    "overrides": lambda k: f"--override {k.key}={k.value}" if k.key and k.value else "--override",
    "policy": lambda k: f"--policy {k.value}" if k.value else "--policy",
    "targets": lambda k: "--targets",
    "trust": lambda k: f"`hetero trust {shlex.quote(k.value or 'FILE')}`",
}


def cli_spelling(keyword: Keyword) -> str:
    """``keyword`` as the command line's flag; its Python spelling when the CLI has none."""
    spell = FLAGS.get(keyword.name)
    return spell(keyword) if spell is not None else keyword.python()


def cli_message(exc: HeteroError) -> str:
    """The message of ``exc`` with the command line's flags for the keywords it names."""
    return exc.render(cli_spelling)

