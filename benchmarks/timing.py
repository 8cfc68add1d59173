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
