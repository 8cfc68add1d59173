"""Tuning records: an append-only JSON-lines file of measured schedules.

Each line is one trial: the task's key and backend, the trace (its JSON), the median
seconds (None for a failed trial, with the error), the machine it ran on (the
backend's :meth:`~hetero.core.plugin.backend.Backend.tuning_machine`), the hetero
version and the time. Appending never rewrites what is there, so several runs (and
several models) share one file, and a crash loses at most the line being written.

``hetero.compile(..., records=PATH)`` gives each backend the trace per task with the
lowest median time (:func:`best_traces`) as its :data:`TUNED_OPTION` target option; a task with no
record compiles with its default schedule. Records made on another machine are used
only with ``records_any_machine=True``: a schedule tuned for another CPU's caches
and vectors can be slower than the default here.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hetero import _version
from hetero.errors import DamagedFileError, InputError

#: The target option through which a backend receives its tuned traces: a mapping of
#: task key to trace JSON (plain data, so the compile cache keys on it).
TUNED_OPTION = "tuned_schedules"


@dataclass(frozen=True)
class Record:
    """One measured trial."""

    task: str
    backend: str
    trace: str
    seconds: float | None
    machine: Mapping[str, Any]
    hetero: str
    time: float
    label: str = ""
    error: str | None = None

    def to_json(self) -> str:
        """The record as one line of JSON."""
        return json.dumps({**asdict(self), "machine": dict(self.machine)}, sort_keys=True)


def new_record(task: str, backend: str, trace: str, seconds: float | None, machine: Mapping[str, Any],
               label: str = "", error: str | None = None) -> Record:
    """A record of a trial made now, by this hetero."""
    return Record(task, backend, trace, seconds, dict(machine), _version.__version__, time.time(), label, error)


def append_records(path: str | os.PathLike[str], records: Iterable[Record]) -> None:
    """Append ``records`` to the file at ``path`` (created if missing), one line each."""
    with open(path, "a", encoding="utf-8") as out:
        for record in records:
            out.write(record.to_json() + "\n")
            out.flush()


def load_records(path: str | os.PathLike[str]) -> list[Record]:
    """Every record in the file at ``path``; a named error for a missing file or a bad line."""
    source = Path(path)
    if not source.is_file():
        raise InputError(f"tuning records {source}: no such file; give the file `hetero tune -o` wrote")
    found = []
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            found.append(Record(**data))
        except (json.JSONDecodeError, TypeError) as exc:
            raise DamagedFileError(f"tuning records {source}, line {number}: not a record ({exc}); "
                                   "the file is damaged: remove that line") from None
    return found


def same_machine(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two machine identities are equal (every field the backend reports)."""
    return json.dumps(dict(a), sort_keys=True) == json.dumps(dict(b), sort_keys=True)


def best_traces(records: Iterable[Record], backend: str, machine: Mapping[str, Any] | None) -> dict[str, str]:
    """The trace per task of ``backend`` with the lowest median of its successful
    measurements, as :data:`TUNED_OPTION` wants: only records from ``machine`` unless it
    is None (any machine). Only the traces measured most often compete, by their median,
    so that one lucky run on a loaded machine does not pick a schedule."""
    times: dict[str, dict[str, list[float]]] = {}
    for record in records:
        if record.backend != backend or record.seconds is None:
            continue
        if machine is not None and not same_machine(record.machine, machine):
            continue
        times.setdefault(record.task, {}).setdefault(record.trace, []).append(record.seconds)
    return {task: _lowest_median(traces) for task, traces in sorted(times.items())}


def _lowest_median(traces: Mapping[str, list[float]]) -> str:
    """Among the traces measured most often (the confirmed ones: a trace timed once does
    not compete with one timed in several rounds), the one of lowest median."""
    most = max(len(t) for t in traces.values())
    return min((t for t in traces if len(traces[t]) == most), key=lambda t: (statistics.median(traces[t]), t))
