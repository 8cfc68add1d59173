"""`hetero inspect` and `hetero run` on real models, and their errors without tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import helper
import pytest

from hetero.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _relu_model(tmp_path: Path, shape: list[int | str] | None = None) -> Path:
    """A one-Relu model of ``shape`` (a str is a dynamic dim) saved in ``tmp_path``."""
    shape = shape or [2, 3]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [vi("x", onnx.TensorProto.FLOAT, shape)],
                              [vi("y", onnx.TensorProto.FLOAT, shape)])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_inspect_reports_ops_parameters_and_flops(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "inspect", "light:squeezenet", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["op_histogram"]["Conv"] == 26
    assert report["inputs"] == {"data_0": "f32[1,3,224,224]"}
    # The light model is SqueezeNet 1.1: 1,235,496 parameters (the published count of its
    # 26 convolutions' weights and biases).
    assert report["parameters"] == 1_235_496
    # About 0.35 GMACs of convolution; FLOPs count each MAC as two.
    assert 0.6e9 < report["flops"] < 0.8e9
    assert report["flops_by_op"]["Conv"] > 0.95 * report["flops"]


def test_inspect_text_form(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "inspect", "light:bvlc_alexnet")
    assert code == 0
    assert "unsupported none" in out and "LRN" in out and "FLOPs" in out


def test_inspect_lists_every_unsupported_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        # Random ops: hetero has no kernel and onnx no function body for them.
        helper.make_node("RandomUniformLike", ["a"], ["b"], name="noise"),
        helper.make_node("RandomNormalLike", ["b"], ["c"], name="jitter"),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "g", [vi("x", onnx.TensorProto.FLOAT, [2])],
                              [vi("c", onnx.TensorProto.FLOAT, [2])])
    path = tmp_path / "random.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    code, out, _ = run_cli(capsys, "inspect", str(path))
    assert code == 1
    assert "RandomUniformLike" in out and "noise" in out and "RandomNormalLike" in out and "jitter" in out


def test_run_matches_onnxruntime(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", "light:squeezenet", "--random-weights", "3",
                           "--compare", "onnxruntime", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["compare"]["ok"] is True
    assert report["optimized_nodes"] <= report["nodes"]
    (result,) = report["compare"]["outputs"].values()
    assert result["argmax_agrees"]


def test_run_reads_inputs_from_npy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _relu_model(tmp_path, ["n", 3])
    np.save(tmp_path / "x.npy", np.array([[-1, 2, -3]], np.float32))
    code, out, _ = run_cli(capsys, "run", str(path), "--input-shape", "x=1,3",
                           "--input", f"x={tmp_path / 'x.npy'}", "--compare", "onnxruntime")
    assert code == 0, out
    assert "OK" in out


def test_dynamic_shape_without_input_shape_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _relu_model(tmp_path, ["n", 3])
    code, out, err = run_cli(capsys, "run", str(path))
    assert code == 2
    # The command line's flag, not load_onnx's keyword.
    assert "--input-shape x=" in err and "input_shapes" not in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["inspect", "no/such/model.onnx"], "no/such/model.onnx"),
    (["inspect", "light:resnet5"], "did you mean 'resnet50'"),
    (["run", "light:squeezenet", "--input-shape", "oops"], "NAME=D,D"),
])
def test_bad_arguments_give_one_line_errors(argv: list[str], message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_compile_saves_an_executable_that_run_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "relu.hetero"
    code, out, err = run_cli(capsys, "compile", str(_relu_model(tmp_path)), "-o", str(saved),
                             "--dump", str(tmp_path / "dump"))
    assert code == 0, err
    assert "1 kernels" in out and saved.exists()
    assert list((tmp_path / "dump" / "llvm_cpu" / "code").glob("*.ll"))
    code, out, _ = run_cli(capsys, "run", str(saved), "--report")
    assert code == 0
    assert "output    y: f32[2,3]" in out and "y (Relu)" in out


def test_run_on_the_reference_executor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "run", str(_relu_model(tmp_path)), "--targets", "reference",
                           "--compare", "onnxruntime")
    assert code == 0 and "reference executor" in out and "OK" in out


def test_aot_needs_a_dump_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "compile", str(_relu_model(tmp_path)), "--aot", "aarch64-unknown-linux-gnu")
    assert code == 2 and "--dump" in err


def test_compile_across_targets_prints_the_partition_and_strict_refuses(
        site, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    from toyplugin import plugin_source

    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu", ops=("Relu",))})
    site.load()
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                               helper.make_node("Tanh", ["r"], ["y"], name="tanh")], "g",
                              [vi("x", onnx.TensorProto.FLOAT, [64, 64])],
                              [vi("y", onnx.TensorProto.FLOAT, [64, 64])])
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    code, out, err = run_cli(capsys, "compile", str(path), "--targets", "toy_cpu",
                             "-o", str(tmp_path / "two.hetero"), "--policy", "priority")
    assert code == 0, err
    assert "toy_cpu" in out and "llvm_cpu" in out and "tanh" in out and "compiled" in out
    code, _, err = run_cli(capsys, "compile", str(path), "--targets", "toy_cpu", "--strict",
                           "-o", str(tmp_path / "strict.hetero"))
    assert code == 2 and "tanh (Tanh): toy_cpu does not implement Tanh" in err


def _reduce_sum_model(tmp_path: Path) -> Path:
    """ReduceSum(x, axes) whose axes are a graph input."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)], "g",
        [vi("x", onnx.TensorProto.FLOAT, [3, 4]), vi("axes", onnx.TensorProto.INT64, [1])],
        [vi("y", onnx.TensorProto.FLOAT, ["d"])])
    path = tmp_path / "reduce.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_run_binds_an_operand_input_given_by_input_value(capsys, tmp_path: Path) -> None:
    path = _reduce_sum_model(tmp_path)
    code, out, err = run_cli(capsys, "run", str(path), "--input-value", "axes=1",
                             "--compare", "onnxruntime", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["compare"]["outputs"]["y"]["ok"]
    assert report["outputs"]["y"] == "f32[3]"


def test_run_names_the_input_value_flag_for_an_operand_input(capsys, tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "run", str(_reduce_sum_model(tmp_path)))
    assert code == 2
    assert "its axes input 'axes' is computed from the model's input(s) 'axes'" in err
    assert "--input-value axes=V,V,..." in err and "Traceback" not in err


def test_run_compiles_a_data_dependent_model_in_stages(capsys, tmp_path: Path) -> None:
    # NonZero's count follows the data: the model runs as prefix, host node and tail.
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["nz"]),
         helper.make_node("Transpose", ["nz"], ["idx"]), helper.make_node("GatherND", ["r", "idx"], ["y"])],
        "g", [vi("x", onnx.TensorProto.FLOAT, [3, 4])], [vi("y", onnx.TensorProto.FLOAT, ["n"])])
    path = tmp_path / "nonzero.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    code, out, err = run_cli(capsys, "run", str(path), "--compare", "onnxruntime", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert "in stages" in report["executor"]
    assert report["compare"]["outputs"]["y"]["ok"]
