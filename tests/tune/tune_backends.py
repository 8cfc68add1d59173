"""A backend for the tuner's tests whose measurements are pure functions of the trace.

It replays traces as llvm_cpu does (so its spaces are llvm_cpu's), but never builds
them: a candidate's seconds come from a checksum of its trace's JSON, the same in
every process, so two runs of a search are equal exactly when they measure the same
points in the same order. A candidate of ``crash_at`` lanes aborts (as an LLVM
assertion would), one of ``hang_at`` lanes hangs, and one of ``raise_at`` lanes raises.
With ``machine_per_process`` every process reports a machine of its own.
It lives in a module of its own so that the processes of a Dask cluster, which get this
folder on their path, can import it.
"""

from __future__ import annotations

import os
import time
import zlib

import numpy as np

from hetero.core.plugin.backend import Backend
from hetero.plugins.llvm_cpu import tuning


class TraceTimedBackend(Backend):
    """llvm_cpu's replay; a measurement that aborts, hangs, or returns a time made from the trace."""

    name = "trace_timed"
    version = "0"

    def __init__(self, crash_at: int | None = None, hang_at: int | None = None, raise_at: int | None = None,
                 machine_per_process: bool = False) -> None:
        self.crash_at = crash_at
        self.hang_at = hang_at
        self.raise_at = raise_at
        self.machine_per_process = machine_per_process

    def compile(self, subgraph, target):
        raise NotImplementedError

    def load_artifact(self, artifact):
        raise NotImplementedError

    def tuning_replay(self, task, trace):
        tuning.replay(task, trace)

    def tuning_measure(self, task, trace, repeats, seed):
        width = lanes(trace)
        if width is not None and width == self.crash_at:
            os.abort()
        if width is not None and width == self.hang_at:
            time.sleep(3600)
        if width is not None and width == self.raise_at:
            raise ValueError(f"no kernel of {width} lanes")
        return trace_seconds(trace), [np.zeros(3, np.float32)]

    def tuning_machine(self):
        return {"process": os.getpid()} if self.machine_per_process else super().tuning_machine()


def trace_seconds(trace) -> float:
    """Between 1 and 2 microseconds, a checksum of the trace's JSON."""
    return 1e-6 * (1.0 + zlib.crc32(trace.to_json().encode()) % 997 / 997)


def lanes(trace) -> int | None:
    """The trace's pack factor (its vector lanes), None for a trace without a pack."""
    return next((i.decisions["factor"] for i in trace.instructions if i.kind == "pack"), None)
