"""External data: loaded when it lies inside the model's folder, refused otherwise."""

from __future__ import annotations

import os
import tracemalloc
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


def test_external_data_in_a_subfolder_loads(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    (tmp_path / "m" / "data" / "w").mkdir(parents=True)
    (tmp_path / "m" / "weights.bin").rename(tmp_path / "m" / "data" / "w" / "weights.bin")
    _relocate(path, "data/./w/weights.bin")
    np.testing.assert_array_equal(hetero.load_onnx(path).values["w"].data, WEIGHT)


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


def _set_entries(path: Path, **entries: str | None) -> None:
    """Set (or, given None, remove) the weight's external-data entries, data untouched."""
    model = onnx.load(path, load_external_data=False)
    tensor = model.graph.initializer[0]
    kept = {e.key: e.value for e in tensor.external_data}
    kept.update(entries)
    del tensor.external_data[:]
    for key, value in kept.items():
        if value is not None:
            tensor.external_data.add(key=key, value=value)
    path.write_bytes(model.SerializeToString())


def _peak_bytes_of_loading(path: Path) -> tuple[hetero.Graph, int]:
    """The graph, and the most memory Python objects held while loading it."""
    tracemalloc.start()
    try:
        graph = hetero.load_onnx(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return graph, peak


#: A data file this large costs no disk as a sparse file, and 4 GiB of memory if read whole.
SPARSE = 4 * 2**30


def test_nul_byte_in_location_is_refused_clearly(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    _relocate(path, "weights.bin\0.txt")
    with pytest.raises(UnsafePathError,
                       match=r"initializer 'w'.*'weights\.bin\\x00\.txt'.*NUL byte"):
        hetero.load_onnx(path)


def test_large_data_file_is_read_only_for_the_tensor(tmp_path: Path) -> None:
    # No offset or length: the tensor's own size (12 float32) says how much to read.
    path = _save_external(tmp_path / "m")
    _set_entries(path, offset=None, length=None)
    os.truncate(tmp_path / "m" / "weights.bin", SPARSE)
    graph, peak = _peak_bytes_of_loading(path)
    np.testing.assert_array_equal(graph.values["w"].data, WEIGHT)
    assert peak < 32 * 2**20


def test_offset_and_length_select_the_tensor_in_a_large_file(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    data = tmp_path / "m" / "weights.bin"
    offset = 3 * 2**30
    with open(data, "r+b") as f:
        f.seek(offset)
        f.write(WEIGHT.tobytes())
    os.truncate(data, SPARSE)
    _set_entries(path, offset=str(offset), length=str(WEIGHT.nbytes))
    graph, peak = _peak_bytes_of_loading(path)
    np.testing.assert_array_equal(graph.values["w"].data, WEIGHT)
    assert peak < 32 * 2**20


def test_length_other_than_the_tensors_size_is_refused_unread(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    os.truncate(tmp_path / "m" / "weights.bin", SPARSE)
    _set_entries(path, offset="0", length=str(SPARSE))
    tracemalloc.start()
    try:
        with pytest.raises(ModelLoadError, match=r"initializer 'w'.*length 4294967296.*48 bytes"):
            hetero.load_onnx(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20


def test_data_file_shorter_than_the_tensor_is_refused(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    _set_entries(path, offset="8", length=None)
    os.truncate(tmp_path / "m" / "weights.bin", 40)
    with pytest.raises(ModelLoadError,
                       match=r"initializer 'w'.*needs 48 bytes from offset 8 of 'weights\.bin'"
                             r".*holds 40 bytes"):
        hetero.load_onnx(path)


def test_offset_past_the_end_of_the_file_is_refused(tmp_path: Path) -> None:
    path = _save_external(tmp_path / "m")
    _set_entries(path, offset="1000")
    with pytest.raises(ModelLoadError, match=r"initializer 'w'.*offset 1000.*holds 48 bytes"):
        hetero.load_onnx(path)


@pytest.mark.parametrize("field, value", [("offset", "-5"), ("offset", "abc"),
                                          ("length", "1e3")])
def test_malformed_offset_or_length_is_named(tmp_path: Path, field: str, value: str) -> None:
    path = _save_external(tmp_path / "m")
    _set_entries(path, **{field: value})
    with pytest.raises(ModelLoadError, match=f"initializer 'w'.*{field} '{value}'.*re-export"):
        hetero.load_onnx(path)


def test_data_path_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    # A FIFO would block a reader forever; a folder is no data either.
    path = _save_external(tmp_path / "m")
    os.mkfifo(tmp_path / "m" / "pipe")
    for location in ("pipe", "."):
        _relocate(path, location)
        with pytest.raises(ModelLoadError, match=f"initializer 'w'.*'{location}'.*not a regular"):
            hetero.load_onnx(path)
