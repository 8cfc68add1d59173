"""One set of node names: every model-taking command reads a model the same way."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

from hetero.cli import build_parser, main

MODEL_COMMANDS = ("inspect", "compile", "run", "partition", "compare")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _placeholder_model(tmp_path: Path) -> Path:
    """x -> Conv(ConstantOfShape weight) -> opset-11 Softmax, every node unnamed.

    Like onnx's light models: --random-weights replaces the ConstantOfShape by an
    initializer, and the Flatten that the opset upgrade puts before the Softmax is named
    after onnx's value counter, so its name depends on whether the weights were replaced.
    """
    vi = helper.make_tensor_value_info
    fill = helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [0.5])
    nodes = [helper.make_node("ConstantOfShape", ["wshape"], ["w"], value=fill),
             helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["c"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "tiny", [vi("x", onnx.TensorProto.FLOAT, [1, 2, 3, 3])],
                              [vi("y", onnx.TensorProto.FLOAT, [1, 4, 3, 3])],
                              [numpy_helper.from_array(np.array([4, 2, 3, 3], np.int64), "wshape")])
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    return path


def test_a_node_name_from_partition_works_as_override_in_run_and_compare(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _placeholder_model(tmp_path)
    code, out, err = run_cli(capsys, "partition", str(path), "--random-weights", "0", "--format", "json")
    assert code == 0, err
    names = [n for region in json.loads(out)["regions"] for n in region["nodes"]]
    flatten = next(n for n in names if n.startswith("Flatten"))
    for command in ("run", "compare"):
        code, out, err = run_cli(capsys, command, str(path), "--random-weights", "0",
                                 "--override", f"{flatten}=llvm_cpu", "--json")
        assert code == 0, f"{command}: {err}"
    # Without the random weights the model is another one, with its own names.
    code, _, err = run_cli(capsys, "run", str(path), "--override", f"{flatten}=llvm_cpu")
    assert code == 2 and f"override '{flatten}'" in err


def _options(command: str) -> set[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # noqa: SLF001
    return {s for action in sub._actions for s in action.option_strings}  # noqa: SLF001


def test_every_model_command_takes_the_same_model_options() -> None:
    shared = {"--input-shape", "--max-elements", "--random-weights", "--no-optimize", "--quantize",
              "--calibrate", "--calibration-data", "--calibration-method", "--quiet"}
    for command in MODEL_COMMANDS:
        assert shared <= _options(command), f"{command} lacks {sorted(shared - _options(command))}"
