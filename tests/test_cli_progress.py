"""Progress on a terminal (stages, region i of N, elapsed), and nothing elsewhere."""

from __future__ import annotations

import io
from pathlib import Path

import onnx
from onnx import helper
import pytest

from hetero.cli import main
from hetero.cli.terminal import TerminalProgress
from hetero.core import progress


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _two_op_model(tmp_path: Path) -> Path:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("Tanh", ["r"], ["y"], name="tanh")], "g",
                              [vi("x", onnx.TensorProto.FLOAT, [4, 4])], [vi("y", onnx.TensorProto.FLOAT, [4, 4])])
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_the_renderer_draws_nested_stages_with_counts_and_elapsed_time() -> None:
    stream = FakeTerminal()
    now = [100.0]
    reporter = TerminalProgress(stream, clock=lambda: now[0], interval=0.0, width=200)
    with progress.reporting(reporter):
        progress.step("compile", 1, 3, "region r0 on npu_sim")
        now[0] = 102.5
        progress.step("calibrate", 2, 8)
        assert reporter.line(now[0]) == "   2.5 s  compile 1/3 region r0 on npu_sim > calibrate 2/8"
        progress.end("calibrate")
        with progress.stage("save"):
            assert reporter.line(now[0]).endswith("compile 1/3 region r0 on npu_sim > save")
        progress.end("compile")
    drawn = stream.getvalue()
    assert "\r\x1b[K   2.5 s  compile 1/3 region r0 on npu_sim > calibrate 2/8" in drawn
    assert drawn.endswith("\r\x1b[K")  # the line is erased when the last stage ends


def test_lines_wider_than_the_terminal_are_cut() -> None:
    stream = FakeTerminal()
    reporter = TerminalProgress(stream, clock=lambda: 0.0, width=30)
    reporter.step("compile", 1, 2, "region r0 on a backend with a long name")
    assert len(stream.getvalue().split("\r\x1b[K")[-1]) == 29


def test_without_a_reporter_progress_costs_nothing() -> None:
    progress.step("compile", 1, 2)  # no reporter installed: a no-op
    with progress.stage("optimise"):
        pass


def test_compile_shows_progress_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    model = str(_two_op_model(tmp_path))
    assert main(["compile", model, "-o", str(tmp_path / "a.hetero")]) == 0
    shown = terminal.getvalue()
    for stage in ("import", "optimise", "partition", "compile 1/1 region r0 on llvm_cpu", "save"):
        assert f"  {stage}" in shown, (stage, shown)
    assert shown.endswith("\r\x1b[K")
    terminal.seek(0)
    terminal.truncate()
    assert main(["compile", model, "-o", str(tmp_path / "b.hetero"), "--quiet"]) == 0
    assert terminal.getvalue() == ""


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(_two_op_model(tmp_path)), "-o", str(tmp_path / "a.hetero")]) == 0
    assert capsys.readouterr().err == ""


def test_a_light_model_without_random_weights_warns_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "light:squeezenet", "--targets", "reference"]) == 0
    err = capsys.readouterr().err
    assert err == ("hetero run: warning: light:squeezenet ships constant placeholder weights, so its "
                   "outputs prove nothing; give --random-weights SEED for real numbers\n")
    assert main(["run", "light:squeezenet", "--targets", "reference", "--random-weights", "1"]) == 0
    assert capsys.readouterr().err == ""


class Recorder:
    """A progress reporter that keeps what it is told."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, int, int, str]] = []
        self.ended: list[str] = []

    def step(self, stage: str, index: int, total: int, label: str) -> None:
        self.steps.append((stage, index, total, label))

    def end(self, stage: str) -> None:
        self.ended.append(stage)


def test_core_reports_calibration_compile_kernels_and_simulation(tmp_path: Path) -> None:
    import numpy as np

    import hetero

    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    weight = onnx.numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                               helper.make_node("Relu", ["c"], ["y"])], "conv",
                              [vi("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
                              [vi("y", onnx.TensorProto.FLOAT, [1, 4, 8, 8])], [weight])
    samples = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(3)]
    recorder = Recorder()
    with progress.reporting(recorder):
        exe = hetero.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]),
                             targets=["npu_sim"], quantize=samples)
        exe.run(samples[0])
    assert [s[:3] for s in recorder.steps if s[0] == "calibrate"] == [("calibrate", i, 3) for i in (1, 2, 3)]
    compiles = [s for s in recorder.steps if s[0] == "compile"]
    assert [s[1] for s in compiles] == list(range(1, len(compiles) + 1))
    assert {s[2] for s in compiles} == {len(exe.placements)}
    assert any(s[0] == "compile" and "npu_sim" in s[3] for s in compiles)
    assert any(s[0] == "simulate" for s in recorder.steps)
    kernels = [s for s in recorder.steps if s[0] == "kernel"]  # llvm_cpu's part, the float boundary
    assert kernels and [s[1] for s in kernels][-1] == kernels[-1][2]
    assert {"calibrate", "compile", "simulate", "kernel"} <= set(recorder.ended)


def test_a_warning_erases_the_status_line_first() -> None:
    import warnings

    from hetero.cli.terminal import one_line_warnings

    terminal = FakeTerminal()
    status = TerminalProgress(terminal, clock=lambda: 0.0, width=80)
    with one_line_warnings("run", terminal, status), warnings.catch_warnings():
        warnings.simplefilter("always")
        status.step("compile", 1, 2, "region r0 on npu_sim")
        warnings.warn("npu_sim failed; llvm_cpu compiles it instead", UserWarning, stacklevel=1)
    assert terminal.getvalue().endswith(
        "compile 1/2 region r0 on npu_sim\r\x1b[Khetero run: warning: npu_sim failed; llvm_cpu compiles it instead\n")
