"""What every benchmark shares: median wall time, and onnxruntime sessions set up alike.

Two runtimes timed in one process must not time each other's leftovers: onnxruntime's
worker threads spin after a run, waiting for the next one (about 40 ms of a core after
each run on an AMD EPYC, znver4, with 2 intra-op threads), so a hetero run started right
after an onnxruntime run shares its cores with that spin, and at 2 threads on a 2-core
host ran up to twice as long (SqueezeNet 8.4 ms timed right after onnxruntime, 4.4 ms
alone). No deployment runs the two side by side, so :func:`blockwise_medians` times each
runtime in blocks of back-to-back runs (each keeps its own warm threads within a block,
as it would in its own process) and waits before every block until the process has gone
quiet (:func:`settle`).
"""

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


def settle(quiet_ms: float = 10.0, limit_s: float = 1.0) -> float:
    """Wait until this process's threads have used less than a tenth of a core over
    ``quiet_ms`` (another runtime's spinning workers have gone to sleep), at most
    ``limit_s``; the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        cpu = time.process_time()
        time.sleep(quiet_ms / 1e3)
        if time.process_time() - cpu < quiet_ms / 1e4:
            break
    return time.perf_counter() - start


def blockwise_medians(fns: list[Callable[[], object]], repeat: int, blocks: int = 3) -> list[float]:
    """The median wall time of ``repeat`` calls of each of ``fns``, for comparing
    different runtimes in one process: each is called in ``blocks`` blocks of back-to-back
    calls, the blocks of all of ``fns`` in turn (a change in the machine's load weighs on
    each alike), and every block starts once the process is quiet (:func:`settle`) with one
    untimed warm-up call (thread wake-up, caches)."""
    blocks = max(1, min(blocks, repeat))
    sizes = [repeat // blocks + (k < repeat % blocks) for k in range(blocks)]
    times: list[list[float]] = [[] for _ in fns]
    for size in sizes:
        for fn, seen in zip(fns, times):
            settle()
            fn()
            for _ in range(size):
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
