"""Counting the work a call does, for tests of how a cost grows, without the clock.

:func:`lines_run` counts the source lines Python executes in hetero's own modules
during a call (a ``sys.settrace`` line tracer; other packages run untraced). The
count is deterministic, so a test can compare it at two sizes of input: an
algorithm linear in its input does about 4x the work on 4x the input, a quadratic
one 16x, whatever the machine's load.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import hetero

_ROOT = os.path.dirname(hetero.__file__)


def lines_run(call: Callable[[], Any]) -> int:
    """How many lines of hetero's code ``call()`` executes."""
    count = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(_ROOT) else None

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count


def growth(call: Callable[[int], Any], n: int, factor: int = 4) -> float:
    """The ratio of :func:`lines_run` of ``call(factor * n)`` to that of ``call(n)``."""
    return lines_run(lambda: call(factor * n)) / lines_run(lambda: call(n))
