"""``hetero tune`` writes records and the HTML plot; ``hetero compile --records`` reads them."""

from __future__ import annotations

import json

import onnx

from hetero.cli import main
from hetero.core.schedule.tune.records import load_records

from tune_nets import conv_net


def test_tune_then_compile_with_records(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    records = tmp_path / "r.jsonl"
    code = main(["tune", str(model), "--budget", "3", "--confirm", "1", "-o", str(records), "-O", "num_threads=1",
                 "-q"])
    assert code == 0
    out, err = capsys.readouterr()
    assert "task 1/3" in err and "trial 1/" in err and "GFLOP/s" in err and "left" in err
    stored = load_records(records)
    # Every task's default, the 3 trials, and one confirmation round of each task that searched.
    assert len({r.task for r in stored}) == 3 and len(stored) >= 3 + 3
    assert all(r.machine and r.hetero for r in stored)
    assert json.loads(stored[0].trace)["format"] == 1
    page = (tmp_path / "r.html").read_text()
    assert page.count("<svg") == 3 and "polyline" in page
    assert main(["compile", str(model), "--records", str(records), "-o", str(tmp_path / "net.hetero"),
                 "-O", "num_threads=1", "-q"]) == 0


def test_a_malformed_budget_is_named(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    assert main(["tune", str(model), "--budget", "soon", "-o", str(tmp_path / "r.jsonl"), "-q"]) == 2
    assert "budget 'soon'" in capsys.readouterr().err


def test_the_cost_model_learns_from_the_records_already_in_the_output(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    records = tmp_path / "r.jsonl"
    common = ["tune", str(model), "--budget", "4", "--confirm", "0", "-o", str(records), "-O", "num_threads=1",
              "-q", "--cost-model", "lightgbm"]
    assert main(common) == 0
    err = capsys.readouterr().err
    assert "cost model: lightgbm" in err and "learned from" not in err  # nothing earlier to learn from
    first = len(load_records(records))
    assert main(common + ["--seed", "1"]) == 0
    err = capsys.readouterr().err
    # The second run learns from every distinct schedule the first one measured.
    learned = int(err.split("learned from ")[1].split(" ")[0])
    distinct = {(r.task, r.trace) for r in load_records(records)[:first]}
    assert learned == len(distinct) > 0


def test_cost_model_none_and_a_missing_transfer_file_are_handled(tmp_path, capsys):
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    out = tmp_path / "r.jsonl"
    assert main(["tune", str(model), "--budget", "1", "--confirm", "0", "-o", str(out), "-O", "num_threads=1", "-q",
                 "--cost-model", "none"]) == 0
    assert "cost model: none" in capsys.readouterr().err
    assert main(["tune", str(model), "--budget", "1", "-o", str(out), "-q", "--transfer",
                 str(tmp_path / "missing.jsonl")]) != 0
    assert "missing.jsonl" in capsys.readouterr().err
