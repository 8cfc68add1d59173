"""Records: JSON lines round trip, the best per task, and records of other machines."""

from __future__ import annotations

import pytest

from hetero.errors import DamagedFileError
from hetero.core.schedule.tune.records import append_records, best_traces, load_records, new_record

HERE = {"name": "znver5", "cores": 2}
THERE = {"name": "neoverse-v2", "cores": 64}


def test_round_trip_best_lookup_and_machine_filter(tmp_path):
    path = tmp_path / "r.jsonl"
    append_records(path, [new_record("t1", "llvm_cpu", "A", 2.0, HERE), new_record("t1", "llvm_cpu", "B", 1.0, HERE),
                          new_record("t1", "llvm_cpu", "C", None, HERE, error="crashed")])
    append_records(path, [new_record("t1", "llvm_cpu", "D", 0.5, THERE), new_record("t2", "other", "E", 1.0, HERE)])
    # G, confirmed in three rounds (median 1.2), beats F and B, each fastest in one lucky run.
    append_records(path, [new_record("t1", "llvm_cpu", "G", t, HERE) for t in (1.0, 1.2, 5.0)])
    append_records(path, [new_record("t1", "llvm_cpu", "F", 0.1, HERE)])
    records = load_records(path)
    assert [r.trace for r in records] == ["A", "B", "C", "D", "E", "G", "G", "G", "F"]
    assert records[2].seconds is None and records[2].error == "crashed"
    assert records[0].machine == HERE
    assert best_traces(records, "llvm_cpu", HERE) == {"t1": "G"}
    assert best_traces(records[:5], "llvm_cpu", HERE) == {"t1": "B"}  # all timed once: the fastest
    assert best_traces(records[:5], "llvm_cpu", None) == {"t1": "D"}  # any machine: asked for
    assert best_traces(records, "llvm_cpu", THERE) == {"t1": "D"}
    assert best_traces(records, "other", HERE) == {"t2": "E"}


def test_a_damaged_line_is_named(tmp_path):
    path = tmp_path / "r.jsonl"
    append_records(path, [new_record("t1", "llvm_cpu", "A", 2.0, HERE)])
    with open(path, "a") as f:
        f.write("{not json\n")
    with pytest.raises(DamagedFileError, match="line 2"):
        load_records(path)
