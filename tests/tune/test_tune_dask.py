"""The tuner on a Dask cluster (a LocalCluster of two worker processes on loopback): the
same search as on local processes, crashes and hangs contained in forked children, and
the errors of a bad executor spec."""

from __future__ import annotations

import json
import os
import socket
import sys

import onnx
import pytest

import hetero
from hetero.cli import main
from hetero.core.compiler import Session
from hetero.core.schedule.tune.executors import executor_factory
from hetero.core.schedule.tune.records import load_records
from hetero.core.schedule.tune.tuner import Budget, extract_tasks, tune
from hetero.errors import OptionError

from tune_backends import TraceTimedBackend, lanes
from tune_nets import conv_net

OPTIONS = {"num_threads": 1, "layout": "nchw"}
#: Generous bounds for a loaded 2-core host: the cluster's start, and a candidate's hang.
CLUSTER_TIMEOUT_S = 120
HANG_TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def cluster():
    """``(dask://address, client)`` of a two-worker LocalCluster, one thread a worker.
    ``allowed-failures`` 0: were a candidate to kill a worker after all, its task fails
    at once instead of being retried on (and killing) the other worker."""
    distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install "
                                      "'hetero[tune]'): the Dask executor cannot be tested")
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                         dashboard_address=None, timeout=CLUSTER_TIMEOUT_S)
    client = distributed.Client(local, set_as_default=False)
    try:
        client.wait_for_workers(2, timeout=CLUSTER_TIMEOUT_S)
        yield local.scheduler_address.replace("tcp://", "dask://"), client
    finally:
        client.close()
        local.close()


def _tasks(backend):
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    return [(backend, t) for _, t in extract_tasks(graph, Session(["llvm_cpu"], options=OPTIONS))]


def _search(results):
    return [[(t.point, t.seconds, t.error) for t in r.trials + r.confirmations] for r in results]


def test_the_same_seed_on_dask_and_on_as_many_local_processes_measures_the_same_points(cluster, tmp_path):
    from distributed import get_task_stream

    address, client = cluster
    tasks = _tasks(TraceTimedBackend())

    def run(spec: str, name: str):
        with executor_factory(spec) as executor:
            assert executor.batch == 2
            return tune(tasks, Budget(trials=14), tmp_path / f"{name}.jsonl", seed=5, executor=executor,
                        repeats=1, confirm_rounds=1)

    with get_task_stream(client=client) as stream:
        on_dask = run(address, "dask")
    on_local = run("local:2", "local")
    assert _search(on_dask) == _search(on_local)
    assert [r.chosen for r in on_dask] == [r.chosen for r in on_local]
    assert sum(len(r.trials) - 1 for r in on_dask) == 14  # the whole budget: the spaces hold more
    assert all(r.chosen is not None for r in on_dask)
    # The records carry the machine the workers report (here the same host as this process).
    assert {json.dumps(r.machine) for r in load_records(tmp_path / "dask.jsonl")} == {
        json.dumps(TraceTimedBackend().tuning_machine())}
    # The candidates ran on the cluster, on both workers.
    ran = [t for t in stream.data if "measure_in_worker" in t["key"]]
    assert len(ran) == sum(len(r.trials) + len(r.confirmations) for r in on_dask)
    assert len({t["worker"] for t in ran}) == 2


def test_a_crash_a_hang_and_an_error_on_a_dask_worker_fail_their_trials_and_the_workers_live_on(cluster, tmp_path):
    address, client = cluster
    before = set(client.scheduler_info()["workers"])
    backend = TraceTimedBackend(crash_at=2, hang_at=4, raise_at=5)
    head = [(b, t) for b, t in _tasks(backend) if t.label.startswith("head")]
    records = tmp_path / "r.jsonl"
    with executor_factory(address) as executor:
        # The head's whole space: its default (10 lanes) and 1, 2, 4, 5 and 8 lanes.
        [result] = tune(head, Budget(trials=5), records, executor=executor, repeats=1, timeout_s=HANG_TIMEOUT_S,
                        confirm_rounds=0)
    by_lanes = {lanes(t.trace): t for t in result.trials}
    assert sorted(by_lanes) == [1, 2, 4, 5, 8, 10]
    assert by_lanes[2].seconds is None and "SIGABRT" in by_lanes[2].error
    assert by_lanes[4].seconds is None and f"ran past the {HANG_TIMEOUT_S:g} s limit" in by_lanes[4].error
    assert by_lanes[5].seconds is None and by_lanes[5].error == "ValueError: no kernel of 5 lanes"
    assert all(by_lanes[w].seconds is not None and by_lanes[w].error is None for w in (1, 8, 10))
    failed = [r for r in load_records(records) if r.seconds is None]
    assert sorted(r.error for r in failed) == sorted(by_lanes[w].error for w in (2, 4, 5))
    assert set(client.scheduler_info()["workers"]) == before  # no worker was lost or restarted


def test_hetero_tune_builds_and_measures_real_kernels_on_dask(cluster, tmp_path, capsys):
    address, _ = cluster
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    records = tmp_path / "r.jsonl"
    assert main(["tune", str(model), "--budget", "2", "--confirm", "0", "--executor", address, "-o", str(records),
                 "-O", "num_threads=1", "-q"]) == 0
    assert "2 Dask worker threads" in capsys.readouterr().err
    stored = load_records(records)
    assert len(stored) == 3 + 2  # every task's default and the two trials
    assert all(r.seconds is not None and r.seconds > 0 for r in stored)


def test_workers_on_different_machines_are_refused(cluster, tmp_path):
    address, _ = cluster
    tasks = _tasks(TraceTimedBackend(machine_per_process=True))
    with executor_factory(address) as executor, \
            pytest.raises(OptionError, match=r"2 different machines for trace_timed \(their process differ\)"):
        tune(tasks, Budget(trials=2), tmp_path / "r.jsonl", executor=executor, repeats=1)
    # Local processes are forked from this one: the machine is this process's.
    with executor_factory("local:2") as executor:
        tune(tasks, Budget(trials=2), tmp_path / "r.jsonl", executor=executor, repeats=1, confirm_rounds=0)
    assert {r.machine["process"] for r in load_records(tmp_path / "r.jsonl")} == {os.getpid()}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_named():
    port = _closed_port()
    with pytest.raises(OptionError, match=f"no Dask scheduler answered at tcp://127.0.0.1:{port}"):
        executor_factory(f"dask://127.0.0.1:{port}", connect_timeout_s=2.0)


def test_a_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    with pytest.raises(OptionError, match=r"pip install 'hetero\[tune\]'"):
        executor_factory("dask://127.0.0.1:8786")


@pytest.mark.parametrize("spec, says", [("local:0", "N >= 1"), ("local:two", "N >= 1"),
                                        ("dask://nohost", "dask://HOST:PORT"),
                                        ("ray://host:1", "local, local:N .* or dask://HOST:PORT")])
def test_a_malformed_spec_is_named_with_the_forms(spec, says):
    with pytest.raises(OptionError, match=says):
        executor_factory(spec)


def test_the_cli_reports_a_malformed_executor(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    assert main(["tune", str(model), "--executor", "ray://x:1", "-o", str(tmp_path / "r.jsonl"), "-q"]) == 2
    assert "executor 'ray://x:1': not an executor" in capsys.readouterr().err
