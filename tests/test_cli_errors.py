"""CLI errors in the user's terms: one line on stderr and exit 2, flags named as the
command line spells them; saved executables run like models."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys
import warnings

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

import hetero
from hetero.cli import main
from hetero.cli.terminal import one_line_warnings


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(code: int, err: str) -> str:
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def _relu_model(tmp_path: Path, shape: list[int | str] | None = None) -> Path:
    shape = shape or [2, 3]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [vi("x", onnx.TensorProto.FLOAT, shape)], [vi("y", onnx.TensorProto.FLOAT, shape)])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_a_missing_or_unreadable_input_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(_relu_model(tmp_path))
    err = _one_line_error(*run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'none.npy'}")[::2])
    assert f"--input x={tmp_path / 'none.npy'}: no such file" in err
    (tmp_path / "junk.npy").write_text("not an array")
    err = _one_line_error(*run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'junk.npy'}")[::2])
    assert f"--input x={tmp_path / 'junk.npy'}: is not a .npy or .npz file" in err and "np.save" in err
    assert "pickle" not in err
    np.save(tmp_path / "cut.npy", np.ones((2, 3), np.float32))
    (tmp_path / "cut.npy").write_bytes((tmp_path / "cut.npy").read_bytes()[:-8])
    err = _one_line_error(*run_cli(capsys, "run", model, "--input", f"x={tmp_path / 'cut.npy'}")[::2])
    assert "--input x=" in err and "cannot read it as a .npy array" in err


def test_random_inputs_keep_to_the_element_budget_before_any_is_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "g",
                              [vi("a", onnx.TensorProto.FLOAT, [600]), vi("b", onnx.TensorProto.FLOAT, [600])],
                              [vi("y", onnx.TensorProto.FLOAT, [600])])
    path = tmp_path / "add.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    err = _one_line_error(*run_cli(capsys, "run", str(path), "--max-elements", "1000")[::2])
    assert "random inputs for a, b would take 1200 elements, above the budget of 1000 (--max-elements)" in err


def test_random_inputs_are_made_in_the_inputs_dtype() -> None:
    from hetero.cli.common import _random_array

    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float16, np.int8, np.int64, np.bool_):
        assert _random_array(rng, (3, 4), np.dtype(dtype)).dtype == dtype


def test_an_unwritable_output_is_refused_before_compiling(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled before checking -o")

    monkeypatch.setattr(hetero, "compile", no_compile)
    model = str(_relu_model(tmp_path))
    target = tmp_path / "no" / "such" / "folder" / "relu.hetero"
    err = _one_line_error(*run_cli(capsys, "compile", model, "-o", str(target))[::2])
    assert f"-o/--output {target}" in err and "does not exist" in err
    err = _one_line_error(*run_cli(capsys, "compile", model, "-o", str(tmp_path))[::2])
    assert "is a folder" in err
    err = _one_line_error(*run_cli(capsys, "partition", model, "--output", str(target))[::2])
    assert f"--output {target}" in err


def test_a_closed_pipe_ends_quietly_with_exit_0() -> None:
    # The reader is gone before the listing is written.
    child = subprocess.Popen([sys.executable, "-m", "hetero.cli", "plugins"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    err = child.stderr.read()
    assert child.wait() == 0
    assert err == ""


def test_a_reader_that_stops_after_one_line_gets_the_same_exit() -> None:
    # `hetero plugins | head -1`: the reader leaves after its first line, before or after
    # the listing is all written; the exit is the same either way.
    child = subprocess.Popen([sys.executable, "-m", "hetero.cli", "plugins"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stderr is not None
    assert child.stdout.readline()
    child.stdout.close()
    err = child.stderr.read()
    assert child.wait() == 0
    assert err == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"hetero {hetero.__version__}"


def test_errors_name_the_command_lines_flags_not_python_keywords(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(_relu_model(tmp_path, ["n", 3]))
    err = _one_line_error(*run_cli(capsys, "run", model)[::2])
    assert "--input-shape x=D,D,..." in err and "input_shapes" not in err
    err = _one_line_error(*run_cli(capsys, "run", model, "--input-shape", "x=4,3", "--max-elements", "5")[::2])
    assert "--max-elements 12" in err and "max_elements" not in err
    err = _one_line_error(*run_cli(capsys, "partition", model, "--input-shape", "z=4,3")[::2])
    assert "--input-shape names 'z'" in err
    # Python callers still read the keyword.
    with pytest.raises(hetero.errors.TensorTooLargeError, match=r"load_onnx\(\.\.\., max_elements=12\)"):
        hetero.load_onnx(model, {"x": [4, 3]}, max_elements=5)


def test_inspect_of_a_model_with_unsupported_ops_still_counts(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    vi = helper.make_tensor_value_info
    # Random ops: hetero has no kernel and onnx no function body for them.
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("RandomUniformLike", ["a"], ["b"], name="noise"),
             helper.make_node("MatMul", ["b", "w"], ["m"], name="mm"),
             helper.make_node("RandomNormalLike", ["m"], ["y"], name="jitter")]
    weight = numpy_helper.from_array(np.ones((4, 5), np.float32), "w")
    graph = helper.make_graph(nodes, "trig", [vi("x", onnx.TensorProto.FLOAT, [2, 4])],
                              [vi("y", onnx.TensorProto.FLOAT, [2, 5])], [weight])
    path = tmp_path / "trig.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    code, out, _ = run_cli(capsys, "inspect", str(path), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["op_histogram"] == {"MatMul": 1, "RandomNormalLike": 1, "RandomUniformLike": 1, "Relu": 1}
    assert report["parameters"] == 20
    assert report["flops_by_op"]["MatMul"] == 2 * 2 * 4 * 5
    assert report["unsupported_nodes"] == {"RandomNormalLike": ["jitter"], "RandomUniformLike": ["noise"]}
    code, out, _ = run_cli(capsys, "inspect", str(path))
    assert code == 1
    assert "parameters  20" in out and "FLOPs" in out and "RandomUniformLike: noise" in out and "MatMul" in out


def test_a_saved_executable_honours_run_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = str(_relu_model(tmp_path))
    saved = str(tmp_path / "relu.hetero")
    assert run_cli(capsys, "compile", model, "-o", saved)[0] == 0
    code, out, err = run_cli(capsys, "run", saved, "--repeat", "3", "--json", "--compare", "onnxruntime",
                             "--source", model)
    assert code == 0, err
    report = json.loads(out)
    assert report["run_s"] >= 0 and report["compare"]["ok"] is True
    assert report["outputs"] == {"y": "f32[2,3]"}
    code, out, _ = run_cli(capsys, "run", saved)
    assert code == 0 and any(line.startswith("run       ") and " s on llvm_cpu" in line for line in out.splitlines())
    # What a saved executable cannot do is refused by name.
    err = _one_line_error(*run_cli(capsys, "run", saved, "--compare", "onnxruntime")[::2])
    assert "--source MODEL" in err
    err = _one_line_error(*run_cli(capsys, "run", saved, "--targets", "npu_sim", "--quantize")[::2])
    assert "--targets, --quantize" in err and "compiled already" in err
    err = _one_line_error(*run_cli(capsys, "run", saved, "--timeline", str(tmp_path / "t.html"))[::2])
    assert "--timeline" in err and "npu_sim" in err


def test_warnings_print_as_one_line_without_source(capsys: pytest.CaptureFixture[str]) -> None:
    with one_line_warnings("run"), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("backend x failed to compile region r0:\n  KeyError 'y'; llvm_cpu compiles it instead",
                      UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err == ("hetero run: warning: backend x failed to compile region r0: KeyError 'y'; "
                   "llvm_cpu compiles it instead\n")
    assert os.path.basename(__file__) not in err


def test_conformance_refuses_an_unwritable_report_before_running(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing" / "matrix.json"
    err = _one_line_error(*run_cli(capsys, "conformance", "llvm_cpu", "--json", str(target))[::2])
    assert f"--json {target}: the folder" in err


def test_o_onto_a_fifo_or_device_is_refused_before_compiling(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.core.exec.archive import output_problem, write_atomically
    from hetero.errors import OutputPathError

    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled before checking -o")

    monkeypatch.setattr(hetero, "compile", no_compile)
    model = str(_relu_model(tmp_path))
    fifo = tmp_path / "pipe.hetero"
    os.mkfifo(fifo)
    err = _one_line_error(*run_cli(capsys, "compile", model, "-o", str(fifo))[::2])
    assert f"-o/--output {fifo}: is a FIFO, not a regular file; hetero replaces only regular files" in err
    assert fifo.exists() and not fifo.is_file()
    with pytest.raises(OutputPathError, match="is a FIFO"):
        write_atomically(fifo, b"data")
    assert not fifo.is_file()
    # A device node: only checked, never written (root could replace it).
    assert output_problem("/dev/null") == ("is a device, not a regular file; hetero replaces only regular files: "
                                           "name another path")


def test_o_under_proc_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc on this system")
    model = str(_relu_model(tmp_path))
    err = _one_line_error(*run_cli(capsys, "compile", model, "-o", "/proc/self/relu.hetero")[::2])
    assert "-o/--output /proc/self/relu.hetero: cannot write a file in /proc/" in err


def test_compile_without_o_says_where_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    model = str(_relu_model(tmp_path))
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "compile", model, "--targets", "llvm_cpu")
    assert code == 0, err
    assert f"saved     {tmp_path / 'relu.hetero'} (" in out
    assert "no -o/--output was given, so it is named after the model, in the current folder" in out


def test_the_repository_ignores_saved_executables() -> None:
    ignored = (Path(__file__).resolve().parent.parent / ".gitignore").read_text().split()
    assert "*.hetero" in ignored


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_answer_without_importing_the_compiler(flag: str) -> None:
    # Counted in modules, not seconds: onnx (and ml_dtypes through it) and the compile
    # driver are what made these take over a second.
    code = ("import sys\nfrom hetero.cli import main\ntry:\n    main([%r])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted(m for m in ('onnx', 'ml_dtypes', 'numpy', 'hetero.core.compiler', 'llvmlite') "
            "if m in sys.modules)\nprint('heavy:', heavy)" % flag)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-1] == "heavy: []"
