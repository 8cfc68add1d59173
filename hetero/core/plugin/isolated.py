"""Plugin discovery with each plugin imported in a child process, under a time limit.

Python cannot interrupt an import in-process: a plugin whose import (or whose
``hetero_backends`` hook) never returns blocks :func:`~hetero.core.plugin.load_plugins`,
and with it every hetero command that looks a backend up. :func:`isolated_listing`
is the diagnosis for that case (``hetero plugins --isolated``): every selected plugin
is imported, registered, called and validated by
:func:`~hetero.core.plugin.manager.load_in_process` in a fresh Python process of its
own, one after the other, and a child that has not reported within ``timeout``
seconds is stopped and its plugin listed as broken, while the others are listed as
usual. A child that crashes (a segmentation fault in a native extension) is reported
the same way. The selection variables, the order and the name rules are those of
in-process discovery (:func:`~hetero.core.plugin.manager.discover`).

``timeout`` bounds each phase of each child on its own: the child's start-up (the
interpreter and hetero's core) and then the plugin's import and hook, so a slow
start-up is never charged to the plugin. The listing holds each backend's
declarations as data (:class:`~hetero.core.plugin.listing.PluginListing`); nothing
of a plugin is imported into the calling process.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
import importlib
import importlib.metadata as metadata
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, TextIO

from hetero.core.plugin.listing import PluginListing, declarations
from hetero.core.plugin.manager import (
    DENY_ENV, ENTRY_POINT_GROUP, PluginRecord, discover, load_in_process,
)
from hetero.errors import PluginError

#: Seconds each phase of a child may take by default (``hetero plugins --timeout``).
DEFAULT_TIMEOUT = 30.0

_READY = "ready"
_CHILD = "from hetero.core.plugin.isolated import child_main; child_main()"
#: The end of a failed child's stderr kept in its record, in characters.
_STDERR_TAIL = 4000


def isolated_listing(timeout: float = DEFAULT_TIMEOUT) -> PluginListing:
    """The installed plugins, each imported in a child process given ``timeout`` seconds.

    A plugin whose child does not report in time is stopped and listed as broken
    (``"import did not finish within 30 s..."``); so is one whose child crashes.
    Warns with :class:`~hetero.core.plugin.PluginWarning` for each broken plugin,
    as in-process discovery does.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise PluginError(f"timeout must be a positive number of seconds, got {timeout!r}")
    found = discover(lambda ep, record: _load_in_child(ep, record, float(timeout)))
    return PluginListing(found.provided, found.records, found.provided_by, found.selection_problems)


def _load_in_child(
    ep: metadata.EntryPoint, record: PluginRecord, timeout: float
) -> tuple[PluginRecord, dict[str, dict[str, Any]]]:
    """Run :func:`child_main` for ``ep``; the record it reports, or a broken one."""
    dist = ep.dist.name if ep.dist is not None else ""
    request = json.dumps({"name": ep.name, "value": ep.value, "dist": dist, "path": sys.path})
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, request], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=stderr, text=True, encoding="utf-8", errors="replace",
            start_new_session=True,  # its own process group: stopping it stops what it started
        )
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
        phase = "start"
        try:
            deadline = time.monotonic() + timeout
            # Lines before the child's own (a sitecustomize that prints) are not ours.
            line = _next(lines, deadline)
            while line is not None and line != _READY:
                line = _next(lines, deadline)
            phase = "import"
            result = None if line is None else _next(lines, time.monotonic() + timeout)
            if result is None:
                return _ended(record, child, stderr, timeout)
        except TimeoutError:
            _stop(child)
            return _broken(record, _late_message(ep.name, timeout, phase))
        finally:
            # Also after a result: a plugin's non-daemon thread must not keep it alive.
            if child.poll() is None:
                _stop(child)
            child.wait()
    try:
        reported = json.loads(result)
    except ValueError:
        return _broken(record, f"the isolated child reported {result[:200]!r}, which is not its result")
    record = replace(record, backends=tuple(reported["backends"]), error=reported["error"],
                     traceback=reported["traceback"],
                     adapted=tuple((name, message) for name, message in reported["adapted"]))
    return record, {d["name"]: d for d in reported["declarations"]}


def child_main() -> None:
    """The child's side: read the request (its argument), load the plugin, write the result.

    The result is one JSON line on the child's original stdout; whatever the plugin
    prints goes to stderr instead, so it cannot garble the result.
    """
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    request = json.loads(sys.argv[1])
    sys.path[:] = request["path"]
    importlib.invalidate_caches()
    ep = _find(request)
    _send(channel, _READY)
    if ep is None:
        result = {"backends": [], "declarations": [], "traceback": "", "adapted": [],
                  "error": "its entry point was no longer installed when the isolated child looked"}
    else:
        record, provided = load_in_process(ep, PluginRecord(ep.name, ep.value, "", ""))
        result = {"backends": list(record.backends), "error": record.error,
                  "traceback": record.traceback, "adapted": list(record.adapted),
                  "declarations": [declarations(b) for b in provided.values()]}
    _send(channel, json.dumps(result, default=str))
    channel.close()


def _find(request: dict[str, Any]) -> metadata.EntryPoint | None:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else ""
        if (ep.name, ep.value, dist) == (request["name"], request["value"], request["dist"]):
            return ep
    return None


def _send(channel: TextIO, line: str) -> None:
    channel.write(line + "\n")
    channel.flush()


def _read_lines(stream: TextIO | None, lines: queue.Queue[str | None]) -> None:
    """Hand each line of ``stream`` to ``lines``; None at its end."""
    assert stream is not None
    with contextlib.closing(stream):
        for line in stream:
            lines.put(line.rstrip("\n"))
    lines.put(None)


def _next(lines: queue.Queue[str | None], deadline: float) -> str | None:
    """The child's next line; None when it closed its output; TimeoutError after ``deadline``."""
    try:
        return lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        raise TimeoutError from None


def _late_message(name: str, timeout: float, phase: str) -> str:
    if phase == "start":
        return (
            f"the isolated child process did not start within {timeout:g} s "
            "(before importing the plugin); try a longer timeout on a loaded machine"
        )
    return (
        f"import did not finish within {timeout:g} s (its hetero_backends hook included), "
        "so the isolated child was stopped; in-process it would block every hetero command "
        f"that loads plugins: set {DENY_ENV}={name} until it is fixed"
    )


def _ended(
    record: PluginRecord, child: subprocess.Popen[str], stderr: TextIO, timeout: float
) -> tuple[PluginRecord, dict[str, dict[str, Any]]]:
    """The record of a child that closed its output without reporting (a crash, an exit)."""
    try:
        code = child.wait(timeout)
    except subprocess.TimeoutExpired:  # it closed its output but lives on
        _stop(child)
        code = child.wait()
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with status {code}"
    stderr.seek(0)
    tail = stderr.read()[-_STDERR_TAIL:]
    return _broken(record, f"the isolated child importing it {how} before reporting", tail)


def _broken(
    record: PluginRecord, error: str, trace: str = ""
) -> tuple[PluginRecord, dict[str, dict[str, Any]]]:
    return replace(record, error=error, traceback=trace), {}


def _stop(child: subprocess.Popen[str]) -> None:
    """Kill ``child`` and the processes it started (its own process group)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        child.kill()
