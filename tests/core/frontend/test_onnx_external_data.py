"""External data: loaded when it lies inside the model's folder, refused otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.errors import ModelLoadError, TensorTooLargeError, UnsafePathError
from models import tiny_model

WEIGHT = np.arange(12, dtype=np.float32).reshape(3, 4)


def _save_external(folder: Path) -> Path:
    """model.onnx in ``folder``, its weight "w" in weights.bin beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    model = tiny_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                       {"x": (TensorProto.FLOAT, [2, 3])}, ["y"],
                       [numpy_helper.from_array(WEIGHT, "w")])
    path = folder / "model.onnx"
    onnx.save(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    return path


def _relocate(path: Path, location: str) -> None:
    """Point the weight's external data at ``location`` without touching the data."""
    model = onnx.load(path, load_external_data=False)
    for entry in model.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = location
    path.write_bytes(model.SerializeToString())


def test_external_data_inside_the_folder_loads(tmp_path: Path) -> None:
    graph = hetero.load_onnx(_save_external(tmp_path / "m"))
    np.testing.assert_array_equal(graph.values["w"].data, WEIGHT)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_allclose(hetero.run_reference(graph, {"x": x})["y"], x @ WEIGHT)


def test_symlink_inside_the_folder_is_refused_clearly(tmp_path: Path) -> None:
    # onnx's own loader refuses every link; hetero says which tensor and which link.
    path = _save_external(tmp_path / "m")
    os.symlink(tmp_path / "m" / "weights.bin", tmp_path / "m" / "alias.bin")
    _relocate(path, "alias.bin")
    with pytest.raises(UnsafePathError, match="initializer 'w'.*symbolic link 'alias.bin'"):
        hetero.load_onnx(path)


def test_parent_directory_is_refused(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").rename(tmp_path / "weights.bin")
    _relocate(path, "../weights.bin")
    with pytest.raises(UnsafePathError, match=r"initializer 'w'.*'\.\./weights\.bin'.*'\.\.'"):
        hetero.load_onnx(path)


def test_dotdot_in_the_middle_is_refused(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    _relocate(path, "sub/../weights.bin")
    with pytest.raises(UnsafePathError, match="sub/../weights.bin"):
        hetero.load_onnx(path)


def test_absolute_path_is_refused(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    absolute = str(tmp_path / "m" / "weights.bin")
    _relocate(path, absolute)
    with pytest.raises(UnsafePathError, match=f"initializer 'w'.*absolute path '{absolute}'"):
        hetero.load_onnx(path)


def test_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").rename(tmp_path / "secret.bin")
    os.symlink(tmp_path / "secret.bin", tmp_path / "m" / "weights.bin")
    with pytest.raises(UnsafePathError, match="initializer 'w'.*'weights.bin'.*outside"):
        hetero.load_onnx(path)


def test_missing_external_file(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    (tmp_path / "m" / "weights.bin").unlink()
    missing = "initializer 'w'.*'weights.bin'.*does not exist"
    with pytest.raises(ModelLoadError, match=missing) as info:
        hetero.load_onnx(path)
    assert not isinstance(info.value, UnsafePathError)


def test_proto_with_unloaded_external_data_asks_for_the_path(tmp_path: Path) -> None:
    model = onnx.load(_save_external(tmp_path / "m"), load_external_data=False)
    with pytest.raises(ModelLoadError, match="initializer 'w'.*pass the model's path"):
        hetero.load_onnx(model)


def test_external_tensor_over_budget_is_refused_before_reading(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    model = onnx.load(path, load_external_data=False)
    model.graph.initializer[0].dims[:] = [100_000, 100_000]  # the file holds 12 floats
    path.write_bytes(model.SerializeToString())
    with pytest.raises(TensorTooLargeError, match=r"initializer 'w'.*\[100000, 100000\]"):
        hetero.load_onnx(path)
