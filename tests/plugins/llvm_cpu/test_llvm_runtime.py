"""The native runtime: its thread pool runs every chunk of a job exactly once, callers on
several threads at once each get all of theirs, idle workers sleep instead of
spinning, and a part's whole run as one native program computes what the per-kernel
path does."""

from __future__ import annotations

import collections
import ctypes
from pathlib import Path
import threading
import time

import numpy as np
import pytest

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.plugins.llvm_cpu.kernel import chunks
from hetero.plugins.llvm_cpu.runtime import native_pool

pool = native_pool()
pytestmark = pytest.mark.skipif(pool is None, reason="the native runtime has no port to this OS/CPU")

ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)


def _recorder() -> tuple[list[tuple[int, int, str]], ENTRY]:
    calls: list[tuple[int, int, str]] = []
    lock = threading.Lock()

    def entry(lo: int, hi: int, _args: int) -> None:
        with lock:
            calls.append((lo, hi, threading.current_thread().name))

    return calls, ENTRY(entry)


def test_parallel_runs_every_chunk_exactly_once() -> None:
    assert pool is not None
    pool.ensure(3)
    calls, entry = _recorder()
    for extent, parts in [(100, 7), (5, 5), (64, 2), (1000, 64)]:
        calls.clear()
        pool.parallel(ctypes.cast(entry, ctypes.c_void_p), None, extent, parts)
        assert sorted((lo, hi) for lo, hi, _ in calls) == chunks(extent, parts)


def test_callers_on_several_threads_each_get_all_their_chunks() -> None:
    assert pool is not None
    pool.ensure(2)
    results: dict[int, collections.Counter] = {}
    errors: list[BaseException] = []

    def caller(k: int) -> None:
        try:
            calls, entry = _recorder()
            for _ in range(50):
                pool.parallel(ctypes.cast(entry, ctypes.c_void_p), None, 40 + k, 8)
            results[k] = collections.Counter((lo, hi) for lo, hi, _ in calls)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for k, counted in results.items():
        assert counted == collections.Counter({c: 50 for c in chunks(40 + k, 8)})


def _state(thread: threading.Thread) -> str:
    stat = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
    return stat[stat.rindex(")") + 2]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc to read thread states")
def test_idle_workers_sleep_instead_of_spinning() -> None:
    assert pool is not None
    pool.ensure(2)
    calls, entry = _recorder()
    pool.parallel(ctypes.cast(entry, ctypes.c_void_p), None, 16, 4)
    # A worker spins for some microseconds of its own CPU time, then sleeps on a futex.
    # Polled, not timed: this fails only if a worker never goes to sleep.
    deadline = time.monotonic() + 30
    while any(_state(t) == "R" for t in pool.workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_state(t) == "S" for t in pool.workers)


def _convnet() -> hetero.Graph:
    rng = np.random.default_rng(3)
    b = GraphBuilder("convnet")
    x = b.input("x", (1, 8, 20, 20))
    w1 = b.constant(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "w1")
    w2 = b.constant(rng.standard_normal((16, 16, 1, 1)).astype(np.float32), "w2")
    y = b.op("Relu", b.op("Conv", x, w1, pads=[1, 1, 1, 1]))
    z = b.op("Add", b.op("Conv", y, w2), y)
    b.output(b.op("Reshape", z, shape=[1, 16 * 20 * 20]))
    return b.build()


def test_a_part_runs_as_one_program_and_matches_the_per_kernel_path() -> None:
    graph = _convnet()
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=2)
    part = exe.placements[0].part
    x = np.random.default_rng(4).standard_normal((1, 8, 20, 20)).astype(np.float32)
    out = graph.outputs[0].name
    ours = exe.run({"x": x})[out]
    per_kernel = part.run_intermediates({"x": x})[out]
    np.testing.assert_array_equal(ours, per_kernel)
    assert [name for name, _ in part.last_profile] == [s.name for s in part.steps if s.kernel is not None]
    assert all(seconds >= 0 for _, seconds in part.last_profile)


def test_runs_from_several_threads_at_once_each_get_their_own_answer() -> None:
    graph = _convnet()
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=2)
    out = graph.outputs[0].name
    rng = np.random.default_rng(5)
    inputs = [rng.standard_normal((1, 8, 20, 20)).astype(np.float32) for _ in range(4)]
    expected = [exe.run({"x": x})[out] for x in inputs]
    got: dict[int, list[np.ndarray]] = collections.defaultdict(list)

    def runner(k: int) -> None:
        for _ in range(20):
            got[k].append(exe.run({"x": inputs[k]})[out])

    threads = [threading.Thread(target=runner, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        assert len(got[k]) == 20
        for out in got[k]:
            np.testing.assert_array_equal(out, expected[k])


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_starts_its_own_workers() -> None:
    import os

    assert pool is not None
    pool.ensure(2)
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # the child: run a parallel job on fresh workers, report, exit
        code = 1
        try:
            calls, entry = _recorder()
            pool.ensure(2)
            pool.parallel(ctypes.cast(entry, ctypes.c_void_p), None, 30, 6)
            ok = sorted((lo, hi) for lo, hi, _ in calls) == chunks(30, 6) and all(
                t.is_alive() for t in pool.workers) and len(pool.workers) == 1
            os.write(writer, b"ok" if ok else b"bad")
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    _, status = os.waitpid(child, 0)
    assert os.read(reader, 8) == b"ok" and status == 0
