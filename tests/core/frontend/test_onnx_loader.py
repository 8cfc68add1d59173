"""Reading model files: every broken input fails with ModelLoadError naming the culprit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.errors import ModelLoadError, UnsupportedOpError
from models import tiny_model


def _model() -> onnx.ModelProto:
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="first"),
             helper.make_node("Add", ["h", "bias"], ["y"], name="second")]
    bias = numpy_helper.from_array(np.ones(3, np.float32), "bias")
    return tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3])}, ["y"], [bias])


def test_a_good_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "good.onnx"
    onnx.save(_model(), path)
    graph = hetero.load_onnx(path)
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    np.testing.assert_array_equal(hetero.run_reference(graph, {"x": x})["y"], np.maximum(x, 0) + 1)
    assert [n.name for n in graph.nodes] == ["first", "second"]


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.onnx"
    with pytest.raises(ModelLoadError, match=f"{path}.*does not exist"):
        hetero.load_onnx(path)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a regular file"):
        hetero.load_onnx(tmp_path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty.onnx is empty"):
        hetero.load_onnx(str(path))


@pytest.mark.parametrize("cut", [0.1, 0.5, 0.9])
def test_truncated_file(tmp_path: Path, cut: float) -> None:
    data = _model().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: int(len(data) * cut)])
    with pytest.raises(ModelLoadError, match="cut.onnx"):
        hetero.load_onnx(path)


def test_text_file_is_not_onnx(tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("this is a README, not a model\n")
    with pytest.raises(ModelLoadError, match="notes.onnx is not"):
        hetero.load_onnx(path)


def test_other_protobuf_is_not_a_model(tmp_path: Path) -> None:
    # A serialized GraphProto decodes as a ModelProto with no IR version and no graph.
    path = tmp_path / "graph.pb"
    path.write_bytes(_model().graph.SerializeToString())
    with pytest.raises(ModelLoadError, match="graph.pb is not an ONNX model"):
        hetero.load_onnx(path)


def test_value_used_before_definition_names_node_and_value() -> None:
    model = _model()
    del model.graph.node[0]  # as if the file lost the node computing "h" and still parsed
    with pytest.raises(ModelLoadError, match="'second'.*reads 'h'.*truncated"):
        hetero.load_onnx(model)


def test_undefined_graph_output() -> None:
    model = _model()
    model.graph.output[0].name = "ghost"
    with pytest.raises(ModelLoadError, match="graph output 'ghost'"):
        hetero.load_onnx(model)


def test_checker_failure_becomes_model_load_error() -> None:
    model = _model()
    model.graph.node[1].attribute.append(helper.make_attribute("alpha", 1.0))  # Add has none
    with pytest.raises(ModelLoadError, match="checker.*alpha"):
        hetero.load_onnx(model)


def test_shape_inference_failure_becomes_model_load_error() -> None:
    model = _model()
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.ones(4, np.float32), "bias"))
    with pytest.raises(ModelLoadError, match="shape inference"):
        hetero.load_onnx(model)


def test_the_callers_proto_is_not_modified() -> None:
    model = tiny_model([helper.make_node("Relu", ["x"], ["y"])],
                       {"x": (TensorProto.FLOAT, ["N", 3])}, ["y"], opset=9)
    before = model.SerializeToString()
    hetero.load_onnx(model, {"x": [2, 3]})
    assert model.SerializeToString() == before


def test_unsupported_ops_are_all_listed_at_once() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("StringNormalizer", ["a"], ["b"], name="norm_1"),
        helper.make_node("StringNormalizer", ["b"], ["c"], name="norm_2"),
        helper.make_node("RegexFullMatch", ["c"], ["d"], name="regex"),
        helper.make_node("FusedConv", ["d"], ["e"], name="ms_fused", domain="com.microsoft"),
        helper.make_node("Normalizer", ["e"], ["f"], name="ml_norm", domain="ai.onnx.ml"),
    ]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3])}, ["f"],
                       extra_opsets={"com.microsoft": 1, "ai.onnx.ml": 3})
    with pytest.raises(UnsupportedOpError) as info:
        hetero.load_onnx(model)
    message = str(info.value)
    assert "4 op type(s)" in message
    for expected in ("StringNormalizer (2 nodes, e.g. norm_1)",
                     "RegexFullMatch (1 node, e.g. regex)",
                     "com.microsoft.FusedConv (1 node, e.g. ms_fused)",
                     "ai.onnx.ml.Normalizer (1 node, e.g. ml_norm)", "op_names()"):
        assert expected in message
    assert "Relu" not in message


def test_load_onnx_takes_a_light_name_as_every_cli_command_does() -> None:
    import hetero
    from hetero.core.frontend.light import light_model_path

    graph = hetero.load_onnx("light:squeezenet")
    assert graph.name == hetero.load_onnx(light_model_path("squeezenet")).name
    assert [v.name for v in graph.inputs] == ["data_0"]


def test_an_unknown_light_name_suggests_the_nearest() -> None:
    import hetero
    from hetero.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match=r"no light model 'squeezenett' \(did you mean 'squeezenet'\?\)"):
        hetero.load_onnx("light:squeezenett")
