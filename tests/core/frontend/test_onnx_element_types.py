"""Element types: an undefined or unknown one is refused by name, before anything reads it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.errors import ModelLoadError
from models import tiny_model

#: Not a TensorProto.DataType value (onnx 1.23 stops at 26).
UNKNOWN = 99


def _add_model(x_type: int = TensorProto.FLOAT, y_type: int = TensorProto.FLOAT,
               w_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """y = x + w, with the given element types written into the declarations."""
    w = numpy_helper.from_array(np.ones(3, np.float32), "w")
    w.data_type = w_type
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", x_type, [3])],
        [helper.make_tensor_value_info("y", y_type, [3])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("elem_type, says", [(TensorProto.UNDEFINED, "no element type"),
                                             (UNKNOWN, "element type 99, which is not")])
@pytest.mark.parametrize("where, label", [("x_type", "input 'x'"), ("y_type", "output 'y'"),
                                          ("w_type", "initializer 'w'")])
def test_undefined_or_unknown_element_type_is_named(
        where: str, label: str, elem_type: int, says: str) -> None:
    with pytest.raises(ModelLoadError, match=f"model g: {label} has {says}") as info:
        hetero.load_onnx(_add_model(**{where: elem_type}))
    assert "re-export" in str(info.value)


def test_constant_node_with_an_unknown_element_type_is_named() -> None:
    value = numpy_helper.from_array(np.ones(2, np.float32), "v")
    value.data_type = UNKNOWN
    model = tiny_model([helper.make_node("Constant", [], ["c"], name="const", value=value)],
                       {}, ["c"])
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.FLOAT
    with pytest.raises(ModelLoadError, match=r"attribute 'value' of node 'const' \(Constant\) "
                                             "has element type 99"):
        hetero.load_onnx(model)


def test_external_tensor_type_is_checked_before_its_data_is_read(tmp_path: Path) -> None:
    model = _add_model()
    path = tmp_path / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    stored = onnx.load(path, load_external_data=False)
    stored.graph.initializer[0].data_type = UNKNOWN
    path.write_bytes(stored.SerializeToString())
    (tmp_path / "w.bin").unlink()  # reading the data would fail differently
    with pytest.raises(ModelLoadError, match="initializer 'w' has element type 99"):
        hetero.load_onnx(path)
