"""External data: each tensor's bytes, read from inside the model's folder and no more.

ONNX lets a tensor keep its bytes in a separate file, named by a ``location``
relative to the model, at an optional ``offset`` and with an optional ``length``.
hetero reads exactly the bytes the tensor's dims and element type need (its element
count was checked against the budget before), from ``offset`` (0 when absent); a
``length`` that says otherwise, a file too short for them, or a location that could
reach outside the model's folder is refused by name before anything is read. A data
file may be much larger than the tensors it holds (one file shared by many, or a
crafted one): only the declared ranges are read.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
import os
import stat

import onnx
from onnx import external_data_helper, helper

from hetero.core.frontend.onnx.loader import Source, all_tensors
from hetero.errors import ModelLoadError, UnsafePathError


@dataclass(frozen=True)
class ExternalRange:
    """Where one tensor's bytes lie: a checked relative ``location``, ``offset``, ``size``."""

    where: str
    location: str
    parts: tuple[str, ...]
    offset: int
    size: int


def load_external_data(source: Source) -> None:
    """Check every external tensor's location and range, then read its bytes into it.

    A location that holds a NUL byte, is absolute, contains ``..`` or resolves
    (through symlinks) outside the model's folder raises :class:`UnsafePathError`; a
    missing file, one that is not a regular file, a malformed ``offset`` or
    ``length``, or a file too short for the tensor raises :class:`ModelLoadError`.
    No tensor is read until every location has been checked.
    """
    external = [
        (label, t) for label, t in all_tensors(source.model.graph)
        if external_data_helper.uses_external_data(t)
    ]
    if not external:
        return
    if source.folder is None:
        raise ModelLoadError(
            f"model {source.name}: {external[0][0]} keeps its data in an external file, "
            "which cannot be located from a ModelProto; pass the model's path to "
            "load_onnx instead, or load it with onnx.load(path) first"
        )
    folder = os.path.realpath(source.folder)
    ranges = [_external_range(f"model {source.name}: {label}", tensor, folder)
              for label, tensor in external]
    for (_, tensor), span in zip(external, ranges):
        tensor.raw_data = _read(folder, span)
        tensor.data_location = onnx.TensorProto.DEFAULT
        del tensor.external_data[:]


def _external_range(where: str, tensor: onnx.TensorProto, folder: str) -> ExternalRange:
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    if not location:
        raise ModelLoadError(f"{where} is marked external but names no file; re-export it")
    parts = _check_location(where, location, folder)
    offset = _nonnegative(where, info, "offset")
    size = _stored_bytes(where, tensor)
    length = _nonnegative(where, info, "length")
    if length is not None and length != size:
        raise ModelLoadError(
            f"{where} declares external data of length {length}, but its dims "
            f"{list(tensor.dims)} and element type need {size} bytes; the file is corrupt: "
            "re-export the model"
        )
    return ExternalRange(where, location, parts, offset or 0, size)


def _check_location(where: str, location: str, folder: str) -> tuple[str, ...]:
    """The location's path components, once it is known to stay inside ``folder``."""
    if "\0" in location:
        # C code (onnx's own loader among it) would stop reading the name at the NUL.
        raise UnsafePathError(
            f"{where} reads external data from {location!r}, which holds a NUL byte that no "
            "file name can contain; the file is corrupt or crafted: re-export the model"
        )
    parts = location.replace("\\", "/").split("/")
    drive = len(parts[0]) == 2 and parts[0][1] == ":"  # C:/... on Windows
    if os.path.isabs(location) or location.startswith(("/", "\\")) or drive:
        raise UnsafePathError(
            f"{where} reads external data from the absolute path {location!r}; only "
            "paths relative to the model's folder are allowed: move the data file next "
            "to the model and store its relative location"
        )
    if ".." in parts:
        raise UnsafePathError(
            f"{where} reads external data from {location!r}, which climbs out of the "
            "model's folder with '..'; move the data file into the model's folder"
        )
    joined = os.path.normpath(os.path.join(folder, location))
    resolved = os.path.realpath(joined)
    if os.path.commonpath([folder, resolved]) != folder:
        raise UnsafePathError(
            f"{where} reads external data from {location!r}, which resolves to "
            f"{resolved} outside the model's folder {folder} (through a symbolic "
            "link); copy the data file into the model's folder"
        )
    if resolved != joined:
        raise UnsafePathError(
            f"{where} reads external data through the symbolic link {location!r}; "
            "replace the link by the data file itself"
        )
    if not os.path.exists(resolved):
        raise ModelLoadError(
            f"{where} reads external data from {location!r}, but {resolved} does not "
            "exist; copy the data file next to the model"
        )
    if not os.path.isfile(resolved):
        raise ModelLoadError(
            f"{where} reads external data from {location!r}, which is not a regular file; "
            "point it at the data file"
        )
    return tuple(p for p in os.path.relpath(joined, folder).split(os.sep) if p not in ("", "."))


def _nonnegative(where: str, info: dict[str, str], key: str) -> int | None:
    text = info.get(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ModelLoadError(
            f"{where} has the external-data {key} {text!r}, which is not a byte count; the "
            "file is corrupt: re-export the model"
        )
    return value


#: Element types stored packed, below a byte per element.
_PACKED_BITS = {
    getattr(onnx.TensorProto, name): bits
    for name, bits in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2),
                       ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6))
    if hasattr(onnx.TensorProto, name)
}


def _stored_bytes(where: str, tensor: onnx.TensorProto) -> int:
    """How many bytes the tensor's raw data takes, from its dims and element type."""
    if tensor.data_type == onnx.TensorProto.STRING:
        raise ModelLoadError(
            f"{where} is a STRING tensor kept in an external file, which ONNX does not "
            "allow; re-export the model"
        )
    count = math.prod(tensor.dims)
    bits = _PACKED_BITS.get(tensor.data_type)
    if bits is not None:
        return (count * bits + 7) // 8
    return count * helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def _read(folder: str, span: ExternalRange) -> bytes:
    """The span's bytes, opened without following links, from a regular file only."""
    try:
        fd = _open_inside(folder, span.parts)
    except OSError as exc:
        raise ModelLoadError(
            f"{span.where} reads external data from {span.location!r}, which cannot be "
            f"opened ({os.strerror(exc.errno) if exc.errno else exc}); it may have been "
            "replaced while the model loaded: check the model's folder"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ModelLoadError(
                f"{span.where} reads external data from {span.location!r}, which is not a "
                "regular file; point it at the data file"
            )
        if span.offset + span.size > info.st_size:
            raise ModelLoadError(
                f"{span.where} needs {span.size} bytes from offset {span.offset} of "
                f"{span.location!r}, but the file holds {info.st_size} bytes; it is truncated "
                "or belongs to another model: copy the model's data file again"
            )
        chunks = []
        done = 0
        while done < span.size:
            chunk = os.pread(fd, span.size - done, span.offset + done)
            if not chunk:
                raise ModelLoadError(
                    f"{span.where}: {span.location!r} ended after {span.offset + done} bytes "
                    "while it was read; it changed while the model loaded: load it again"
                )
            chunks.append(chunk)
            done += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _open_inside(folder: str, parts: tuple[str, ...]) -> int:
    """A read-only descriptor of ``folder/parts...``, no component followed as a link.

    Walking from the folder with ``dir_fd`` means a link swapped in after the checks
    cannot redirect the read; ``O_NONBLOCK`` keeps a FIFO swapped in from blocking.
    """
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    if os.open not in os.supports_dir_fd:
        return os.open(os.path.join(folder, *parts), flags | getattr(os, "O_NONBLOCK", 0))
    directory = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for part in parts[:-1]:
            inner = os.open(part, flags | getattr(os, "O_DIRECTORY", 0), dir_fd=directory)
            os.close(directory)
            directory = inner
        return os.open(parts[-1], flags | getattr(os, "O_NONBLOCK", 0), dir_fd=directory)
    finally:
        os.close(directory)
