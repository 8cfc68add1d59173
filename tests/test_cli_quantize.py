"""`--quantize` on the command line: run, partition, compare and compile with post-training int8."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

from hetero.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _conv_model(tmp_path: Path) -> Path:
    """x[1,3,8,8] -> Conv(4, 3x3, pad 1) -> Relu -> y."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["y"])], "conv",
        [vi("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])], [vi("y", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
        [weight])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


@pytest.mark.slow
def test_run_squeezenet_across_npu_sim_and_llvm_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "run", "light:squeezenet", "--random-weights", "0", "--targets",
                             "npu_sim,llvm_cpu", "--quantize", "--compare", "onnxruntime")
    assert code == 0, err
    # The partition report comes first: the convolutions on the NPU, Softmax on the CPU.
    assert out.startswith("partition of squeezenet")
    # llvm_cpu could take every QConv too (it is the fallback), but the NPU comes first.
    assert "  QConv             26     26/26    26/26     npu_sim 26" in out
    line = next(line for line in out.splitlines() if line.startswith("compare "))
    cosine = float(line.split("cosine ")[1].split(",")[0])
    assert cosine >= 0.99 and "argmax agrees" in line
    assert line.endswith("OK (decided by cosine >= 0.99, as an int8 model is judged)")
    # The error is shown against the output's range, which a reader can judge; an
    # elementwise relative error (1.0 wherever the float output is near zero) is not.
    share = float(line.split("(")[1].split("% of max |ref|")[0])
    assert 0 < share < 50 and "rel err" not in line


def test_partition_shows_the_integer_ops_on_the_npu(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run_cli(capsys, "partition", str(_conv_model(tmp_path)), "--targets", "npu_sim",
                             "--quantize", "--calibrate", "2", "--format", "json")
    assert code == 0, err
    coverage = json.loads(out)["coverage"]
    # Conv and its Relu are one QConv; the float boundary (Q, DQ) is the CPU's.
    assert coverage["QConv"]["placed"] == {"npu_sim": 1} and "Conv" not in coverage
    assert coverage["QuantizeLinear"]["placed"] == {"llvm_cpu": 1}
    # Without --quantize the float Conv stays on the CPU, and npu_sim says why.
    code, text, _ = run_cli(capsys, "partition", str(_conv_model(tmp_path)), "--targets", "npu_sim")
    assert code == 0 and "npu_sim computes int8 only" in text


def test_calibration_data_from_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    model = _conv_model(tmp_path)
    data = tmp_path / "calib.npz"
    np.savez(data, x=np.random.default_rng(1).standard_normal((3, 1, 3, 8, 8)).astype(np.float32))
    code, out, err = run_cli(capsys, "run", str(model), "--targets", "npu_sim,llvm_cpu", "--quantize",
                             "--calibration-data", str(data), "--calibration-method", "percentile",
                             "--compare", "onnxruntime")
    assert code == 0, err
    assert "QConv" in out and "OK (decided by cosine >= 0.99, as an int8 model is judged)" in out


def test_run_writes_the_npu_timeline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page = tmp_path / "timeline.html"
    code, out, err = run_cli(capsys, "run", str(_conv_model(tmp_path)), "--targets", "npu_sim,llvm_cpu",
                             "--quantize", "--calibrate", "2", "--timeline", str(page), "--report")
    assert code == 0, err
    assert f"timeline  region r1: {page}" in out
    html = page.read_text()
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "<td>QConv</td>" in html
    # --report gives the NPU's own section: cycles and utilisation of the last run.
    assert "region r1 on npu_sim" in out
    code, _, err = run_cli(capsys, "run", str(_conv_model(tmp_path)), "--timeline", str(page))
    assert code == 2 and "no part of this executable draws a timeline" in err


@pytest.mark.parametrize("extra, message", [
    (["--calibration-data", "calib.npz"], "give --quantize too"),
    (["--quantize", "--calibration-data", "wrong.npz"], "holds no array for input(s) x; it has z"),
    (["--quantize", "--calibrate", "0"], "calibrate on at least one input"),
])
def test_bad_quantisation_arguments_are_one_line_errors(
        extra: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    np.savez(tmp_path / "calib.npz", x=np.zeros((1, 1, 3, 8, 8), np.float32))
    np.savez(tmp_path / "wrong.npz", z=np.zeros((1, 1, 3, 8, 8), np.float32))
    extra = [str(tmp_path / e) if e.endswith(".npz") else e for e in extra]
    code, _, err = run_cli(capsys, "run", str(_conv_model(tmp_path)), *extra)
    assert code == 2
    assert message in err and "Traceback" not in err


@pytest.mark.slow
def test_compare_charges_no_error_to_the_bit_exact_npu_region(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "compare", "light:squeezenet", "--random-weights", "0",
                             "--targets", "npu_sim", "--quantize", "--calibrate", "2", "--json",
                             "--rtol", "0", "--atol", "0")
    report = json.loads(out)
    npu = [r for r in report["regions"] if r["backend"] == "npu_sim"]
    assert npu and all(r["ok"] and r["max_abs_error"] == 0.0 for r in npu), npu
    # Every node's int8 output, exposed by the simulator, is exact as well.
    assert all(o["max_abs_error"] == 0.0 for r in npu for o in r["intermediates"])
    assert len(npu[0]["intermediates"]) > 20


def test_a_quantised_npu_executable_saves_and_runs_without_recompiling(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    saved = tmp_path / "conv.hetero"
    code, out, err = run_cli(capsys, "compile", str(_conv_model(tmp_path)), "--targets", "npu_sim",
                             "--quantize", "--calibrate", "2", "-o", str(saved))
    assert code == 0, err
    assert "QConv" in out and saved.exists()
    code, out, err = run_cli(capsys, "run", str(saved), "--report")
    assert code == 0, err
    assert "output    y: f32[1,4,8,8]" in out and "region r1 on npu_sim" in out
