"""`hetero compile --timings`: a table of the compile's phases, the core's and each backend's."""

from __future__ import annotations

from pathlib import Path
import re

import onnx
from onnx import helper
import pytest

from hetero.cli import main

ROW = re.compile(r"(?P<label>.+?)\s+(?P<seconds>\d+\.\d{3})\s+(?P<share>[\d.]+)%\s*(?P<runs>\d*)")


def _model(tmp_path: Path) -> Path:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
                              "g", [vi("x", onnx.TensorProto.FLOAT, [2, 8])], [vi("y", onnx.TensorProto.FLOAT, [2, 8])])
    path = tmp_path / "tanh_relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def _table(out: str) -> dict[str, re.Match[str]]:
    lines = out[out.index("\ntimings ("):].splitlines()[1:]
    assert lines[1].split() == ["phase", "seconds", "share", "runs"]
    rows = {}
    for line in lines[2:]:
        found = ROW.fullmatch(line)
        assert found, line
        rows[found["label"]] = found
    return rows


def test_timings_prints_each_phase_with_its_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compile", str(_model(tmp_path)), "-o", str(tmp_path / "m.hetero"), "--timings"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = _table(out)
    for label in ("hetero  discover plugins", "hetero  import", "hetero  optimise", "hetero  partition", "hetero  save",
                  "llvm_cpu  lower", "llvm_cpu  schedule", "llvm_cpu  plan arena", "other", "total"):
        assert label in rows, sorted(rows)
    assert rows["total"]["share"] == "100.0"
    assert rows["llvm_cpu  lower"]["runs"] == "1"  # Tanh and Relu chain into one kernel
    # Every phase is exclusive, so the owners' rows and "other" add up to the total.
    parts = [r for label, r in rows.items() if not label.endswith("(all)") and label != "total"]
    assert abs(sum(float(r["seconds"]) for r in parts) - float(rows["total"]["seconds"])) <= 0.001 * len(parts)


def test_without_timings_there_is_no_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["compile", str(_model(tmp_path)), "-o", str(tmp_path / "m.hetero")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "\ntimings (" not in out and "compiled" in out
