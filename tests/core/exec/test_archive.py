"""Artifacts do not depend on the clock, and damaged archives are named errors
(:mod:`hetero.core.exec.archive`)."""

from __future__ import annotations

from collections.abc import Callable
import io
import os
import time
import zipfile

import numpy as np
import pytest

import hetero
from hetero.core.exec.archive import (
    FIXED_DATE, npz_bytes, read_member, read_npz, read_regular_file, write_zip,
)
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind
from hetero.errors import DamagedFileError


def tiny_graph() -> Graph:
    b = GraphBuilder("tiny")
    h = b.Add(b.input("x", (4, 8)), np.linspace(-1, 1, 8, dtype=np.float32), name="add")
    b.output(b.Relu(h, name="relu"))
    return b.build()


def at(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Set the wall clock that zipfile and numpy read to ``seconds`` after the epoch."""
    monkeypatch.setattr(time, "time", lambda: seconds)


def twice(monkeypatch: pytest.MonkeyPatch, write: Callable[[], bytes]) -> tuple[bytes, bytes]:
    """``write()`` at two clock readings a day apart."""
    at(monkeypatch, 1_700_000_000.0)
    first = write()
    at(monkeypatch, 1_700_086_400.0)
    return first, write()


def test_the_llvm_cpu_artifact_does_not_depend_on_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = get_backend("llvm_cpu")
    part = bind(backend).compile(tiny_graph())
    first, second = twice(monkeypatch, lambda: part.artifact)
    assert first == second
    with zipfile.ZipFile(io.BytesIO(first)) as zf:
        assert {info.date_time for info in zf.infolist()} == {FIXED_DATE}
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(backend.load_artifact(first).run({"x": x})["relu"], part.run({"x": x})["relu"])


def test_a_saved_executable_does_not_depend_on_the_clock(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:  # noqa: ANN001 - pytest's tmp_path
    b = GraphBuilder("const_out")
    x = b.input("x", (2,))
    b.output(b.Relu(x, name="relu"))
    graph = b.build()
    exe = hetero.compile(graph, targets=["llvm_cpu"])
    exe.constants["folded"] = np.arange(3, dtype=np.int64)  # gives constants.npz a member

    def save() -> bytes:
        path = tmp_path / "e.hetero"
        exe.save(path)
        return path.read_bytes()

    first, second = twice(monkeypatch, save)
    assert first == second


def test_write_zip_and_npz_bytes_are_fixed_and_readable() -> None:
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array(True), "c": np.zeros((0, 2), np.int8)}
    data = npz_bytes(arrays)
    # np.load reads it like numpy's own .npz.
    with np.load(io.BytesIO(data)) as npz:
        assert sorted(npz.files) == ["a", "b", "c"]
        np.testing.assert_array_equal(npz["a"], arrays["a"])
    back = read_npz(data, "test npz")
    assert list(back) == ["a", "b", "c"]
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        np.testing.assert_array_equal(back[name], array)
    archive = write_zip([("m.json", b"{}"), ("k/0.o", b"\x7fELF")])
    with zipfile.ZipFile(io.BytesIO(archive)) as zf:
        assert [i.filename for i in zf.infolist()] == ["m.json", "k/0.o"]
        assert {(i.date_time, i.external_attr >> 16) for i in zf.infolist()} == {(FIXED_DATE, 0o100644)}
        assert read_member(zf, "k/0.o", "test zip") == b"\x7fELF"


def _npy(header_shape: str, payload: bytes, descr: str = "<f4") -> bytes:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {header_shape}, }}".encode()
    header += b" " * (63 - len(header) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload


@pytest.mark.parametrize("member, why", [
    (_npy("(1099511627776,)", b"\0" * 16), "declares"),           # a huge shape over 16 bytes
    (_npy("(4,)", b"\0" * 3), "declares"),                        # truncated data
    (_npy("(2,)", b"\0" * 16, descr="|O"), "object"),             # pickled objects
    (b"not an npy file at all", "not a .npy"),
])
def test_a_damaged_npz_member_is_a_named_error_without_allocating(member: bytes, why: str) -> None:
    data = write_zip([("c0.npy", member)])
    with pytest.raises(DamagedFileError, match=rf"test npz.*c0.*{why}"):
        read_npz(data, "test npz")


def test_a_zip_bomb_entry_is_refused_by_its_declared_size() -> None:
    # Text members are deflated: 4 MiB of one character shrinks to a few KiB.
    with zipfile.ZipFile(io.BytesIO(write_zip([("big", "\0" * (4 * 2**20))]))) as zf:
        assert zf.getinfo("big").compress_size < 2**14
        with pytest.raises(DamagedFileError, match=r"bomb.*'big'.*declares 4194304 bytes.*at most 1048576"):
            read_member(zf, "big", "bomb", limit=2**20)
        with pytest.raises(DamagedFileError, match=r"bomb.*no entry 'other'"):
            read_member(zf, "other", "bomb")


def test_an_entry_lying_about_its_size_is_refused_before_inflating() -> None:
    data = bytearray(write_zip([("small", b"x" * 16)], compress=False))
    # Claim 2 GiB in both the local and the central header; 16 bytes are stored.
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature) + offset
        data[at:at + 4] = (2**31).to_bytes(4, "little")
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        with pytest.raises(DamagedFileError, match=r"lie.*'small' declares 2147483648 bytes from 16 stored"):
            read_member(zf, "small", "lie")


def test_a_fifo_or_a_folder_in_place_of_a_file_is_refused_without_blocking(tmp_path) -> None:  # noqa: ANN001
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # No writer ever opens the FIFO: a blocking open or read would hang here.
    with pytest.raises(DamagedFileError, match=r"fifo is not a regular file \(it is a FIFO\)"):
        read_regular_file(fifo, "test file")
    with pytest.raises(DamagedFileError, match=r"is not a regular file \(it is a folder\)"):
        read_regular_file(tmp_path, "test file")
    (tmp_path / "plain").write_bytes(b"abc")
    assert read_regular_file(tmp_path / "plain", "test file") == b"abc"
    with pytest.raises(DamagedFileError, match=r"plain is 3 bytes, more than the 2"):
        read_regular_file(tmp_path / "plain", "test file", limit=2)


def test_arrays_of_extension_dtypes_keep_their_dtype_through_npz() -> None:
    import ml_dtypes

    arrays = {"scale": np.array([0.5, -3.0], dtype=ml_dtypes.bfloat16),
              "f8": np.array([1.0, 2.0], dtype=ml_dtypes.float8_e4m3fn), "plain": np.arange(3, dtype=np.int8)}
    back = read_npz(npz_bytes(arrays), "test")
    assert set(back) == set(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype
        np.testing.assert_array_equal(back[name].astype(np.float32), array.astype(np.float32))


def test_text_members_are_deflated_and_bytes_members_stored() -> None:
    with zipfile.ZipFile(io.BytesIO(write_zip([("manifest.json", "{}" * 1000), ("weights", b"\1" * 4000)]))) as zf:
        assert zf.getinfo("manifest.json").compress_type == zipfile.ZIP_DEFLATED
        assert zf.getinfo("weights").compress_type == zipfile.ZIP_STORED
        assert zf.read("weights") == b"\1" * 4000
