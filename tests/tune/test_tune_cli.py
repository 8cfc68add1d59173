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
