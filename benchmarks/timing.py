"""What every benchmark shares: median wall time, and onnxruntime sessions set up alike."""

from __future__ import annotations

from collections.abc import Callable
import statistics
import time
from typing import Any


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``repeat`` calls of ``fn``, after one warm-up call
    (first-touch page faults, thread-pool start)."""
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """The median wall time of ``repeat`` calls of each of ``fns``, called in turn (one
    call of each a round, after one warm-up round), so that a change in the machine's
    load weighs on each alike: for comparing two compiles of one model."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, seen in zip(fns, times):
            start = time.perf_counter()
            fn()
            seen.append(time.perf_counter() - start)
    return [statistics.median(seen) for seen in times]


def ort_session(model: Any, threads: int) -> Any:
    """An onnxruntime CPU session on ``threads`` threads (``model``: path or ModelProto),
    all graph optimisations on, warnings off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # the light models' unused inputs draw warnings
    source = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
