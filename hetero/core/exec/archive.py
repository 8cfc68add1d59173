"""The zip and ``.npz`` files that hold artifacts and executables: written the same way
every time, read within bounds.

Writing is deterministic: :func:`write_zip` stamps every entry with :data:`FIXED_DATE`
and the permissions of a plain file, in the order given, and :func:`npz_bytes` lays
arrays out as numpy's ``.npz`` does (one ``.npy`` per array) through it, where
``zipfile.ZipFile.writestr(name, ...)`` and ``numpy.savez`` stamp the current time.
Compiling the same subgraph twice therefore gives the same bytes, which the
conformance suite checks and the compile cache relies on.

Reading never trusts what a file says about itself: :func:`read_regular_file` opens
regular files only (a FIFO or a device in a file's place is refused without blocking),
:func:`read_member` reads an entry no larger than a limit (a zip bomb's declared size
is refused before anything is inflated), and :func:`read_npz` checks each ``.npy``
header against the bytes that follow it before it builds an array (no pickles, no
allocation a header merely claims). Every failure is a
:class:`~hetero.errors.DamagedFileError` naming the file and the entry.

>>> data = npz_bytes({"w": np.ones(3, np.float32)})
>>> read_npz(data, "weights.npz")["w"]
array([1., 1., 1.], dtype=float32)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import io
import json
import math
import os
from pathlib import Path
import stat
import struct
from typing import Any
import zipfile
import zlib

import numpy as np

from hetero.core.ir.types import as_dtype
from hetero.errors import DamagedFileError, HeteroError, OutputPathError

#: The date every entry is stamped with: the earliest a zip can record.
FIXED_DATE = (1980, 1, 1, 0, 0, 0)
#: The most a ``manifest.json`` may hold; manifests are text about a graph, not data.
MANIFEST_LIMIT = 256 * 2**20

_FILE_MODE = (stat.S_IFREG | 0o644) << 16
_UNIX = 3
# The most each method hetero writes can inflate one stored byte to (deflate's bound is
# 1032:1), so a size an entry declares beyond that is a lie, refused before inflating.
_INFLATE_RATIO = {zipfile.ZIP_STORED: 1, zipfile.ZIP_DEFLATED: 1032}
# What zipfile and zlib raise for a damaged archive, besides BadZipFile.
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError,
               RuntimeError, OverflowError)


def memory_limit() -> int:
    """This machine's physical memory in bytes: more than that can never be loaded."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 64 * 2**30


def write_zip(members: Iterable[tuple[str, bytes | str]], compress: bool = True) -> bytes:
    """A zip of ``members`` (name, data) in order, each with a fixed date and mode.

    With ``compress``, text members (``str``: manifests, source) are deflated and bytes
    members (weights, machine code) stored: trained weights barely compress, and
    deflating ResNet-50's 100 MB took 3.8 s to save and 0.7-1.0 s to load, longer than
    a cached load may take."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED if compress and isinstance(data, str) else zipfile.ZIP_STORED
            info.create_system = _UNIX
            info.external_attr = _FILE_MODE
            zf.writestr(info, data)
    return buffer.getvalue()


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """``arrays`` as ``.npz`` bytes (``np.load`` reads them), the same bytes every time.

    Object arrays are refused (``ValueError``): they would need pickles to load. An array of
    a dtype numpy knows only by extension (bfloat16, the float8 types: ``.npy`` records them
    as raw bytes) has its dtype's name in a member of its own, ``dtypes.json``, which
    :func:`read_npz` reads back.
    """
    members = []
    extended = {}
    for name, array in arrays.items():
        array = np.asanyarray(array)
        if array.dtype.kind == "V" and array.dtype.names is None:
            extended[name] = array.dtype.name
        npy = io.BytesIO()
        np.lib.format.write_array(npy, array, allow_pickle=False)
        members.append((f"{name}.npy", npy.getvalue()))
    if extended:
        members.append((DTYPES_MEMBER, json.dumps(extended, sort_keys=True)))
    return write_zip(members, compress=False)


#: The ``.npz`` member that names the extension dtypes of its arrays (see :func:`npz_bytes`).
DTYPES_MEMBER = "dtypes.json"


class _ViewFile(io.RawIOBase):
    """A read-only file over a ``memoryview``, so that a zip opened on a view is not
    copied whole (``io.BytesIO`` copies any buffer but ``bytes``)."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self.view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self.view)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        chunk = self.view[self._pos:self._pos + len(buffer)]
        memoryview(buffer).cast("B")[:len(chunk)] = chunk
        self._pos += len(chunk)
        return len(chunk)


def open_zip(data: bytes | memoryview, source: str) -> zipfile.ZipFile:
    """``data`` as a zip to read from; DamagedFileError naming ``source`` if it is none.

    Opened on a ``memoryview``, the zip's stored members can be read as views of it
    (:func:`member_view`), without copies."""
    try:
        if isinstance(data, memoryview):
            return zipfile.ZipFile(_ViewFile(data))
        return zipfile.ZipFile(io.BytesIO(data))
    except _ZIP_ERRORS as exc:
        raise DamagedFileError(f"{source}: not a readable zip archive ({exc}); "
                               "the file is damaged or truncated: recompile it") from None


def read_member(zf: zipfile.ZipFile, name: str, source: str, limit: int | None = None) -> bytes:
    """The bytes of entry ``name``, refused when it declares more than ``limit`` bytes
    (by default this machine's memory) or more than its compressed bytes can inflate
    to, is missing, or does not inflate to its declared size."""
    return bytes(_read_into(zf, name, source, limit))


def member_view(zf: zipfile.ZipFile, name: str, source: str, limit: int | None = None) -> memoryview:
    """Entry ``name`` as a view of the buffer the zip was opened on, when it was opened on
    a ``memoryview`` (:func:`open_zip`) and the entry is stored, not compressed; else its
    bytes as :func:`read_member` reads them.

    A view is checked for bounds (the entry's local header and data lie inside the
    buffer, under the same name and size as the zip's directory says) but not against
    its CRC: views are for buffers whose seal was checked, which covers every byte."""
    if not isinstance(zf.fp, _ViewFile):
        return memoryview(_read_into(zf, name, source, limit))
    view = zf.fp.view
    info = _info(zf, name, source, limit)
    if info.compress_type != zipfile.ZIP_STORED:
        return memoryview(_read_into(zf, name, source, limit))
    start = info.header_offset
    header = bytes(view[start:start + _LOCAL.size])
    if len(header) != _LOCAL.size or header[:4] != b"PK\x03\x04":
        raise DamagedFileError(f"{source}: entry {name!r} has no local header where the directory "
                               "says; the file is damaged: recompile it")
    _, _, flags, method, _, _, _, _, _, name_length, extra_length = _LOCAL.unpack(header)
    data = start + _LOCAL.size + name_length + extra_length
    end = data + info.file_size
    if (flags & 1 or method != zipfile.ZIP_STORED or info.compress_size != info.file_size
            or bytes(view[start + _LOCAL.size:start + _LOCAL.size + name_length]) != info.orig_filename.encode()
            or end > len(view)):
        raise DamagedFileError(f"{source}: entry {name!r} does not match the zip's directory "
                               "(name, method or size), or runs past the end; recompile it")
    return view[data:end]


# The local file header: signature, version, flags, method, time, date, CRC, sizes,
# name and extra lengths.
_LOCAL = struct.Struct("<4sHHHHHIIIHH")


def _info(zf: zipfile.ZipFile, name: str, source: str, limit: int | None) -> zipfile.ZipInfo:
    """The directory entry of ``name``, refused when it declares more than ``limit``."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise DamagedFileError(f"{source}: no entry {name!r}; the file is incomplete or not what it "
                               "claims to be: recompile it") from None
    cap = memory_limit() if limit is None else limit
    if info.file_size > cap:
        raise DamagedFileError(f"{source}: entry {name!r} declares {info.file_size} bytes, at most {cap} "
                               "expected; refusing to inflate it (damaged, or a zip bomb)")
    return info


def _read_into(zf: zipfile.ZipFile, name: str, source: str, limit: int | None) -> bytearray:
    info = _info(zf, name, source, limit)
    if info.compress_type not in _INFLATE_RATIO:
        raise DamagedFileError(f"{source}: entry {name!r} uses compression method {info.compress_type}, "
                               "which hetero never writes; the file is not hetero's")
    if info.file_size > _INFLATE_RATIO[info.compress_type] * info.compress_size + 64:
        raise DamagedFileError(f"{source}: entry {name!r} declares {info.file_size} bytes from "
                               f"{info.compress_size} stored, more than its compression can give; "
                               "refusing to inflate it (damaged, or a zip bomb)")
    buffer = bytearray(info.file_size)
    try:
        with zf.open(info) as f:
            got = f.readinto(buffer)
            extra = f.read(1)
    except _ZIP_ERRORS as exc:
        raise DamagedFileError(f"{source}: entry {name!r} is damaged ({exc}); recompile it") from None
    if got != info.file_size or extra:
        raise DamagedFileError(f"{source}: entry {name!r} holds {got} bytes, its header says "
                               f"{info.file_size}; recompile it")
    return buffer


def read_npz(data: bytes | memoryview, source: str, limit: int | None = None) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` (ours or ``numpy.savez``'s), by member name without ``.npy``.

    Each member's header must describe exactly the bytes after it, with a plain
    (non-object) dtype; anything else is a DamagedFileError naming the member. From a
    ``memoryview`` the stored members' arrays are views of it (:func:`member_view`).
    """
    arrays: dict[str, np.ndarray] = {}
    extended: dict[str, str] = {}
    with open_zip(data, source) as zf:
        for info in zf.infolist():
            raw = member_view(zf, info.filename, source, limit)
            if info.filename == DTYPES_MEMBER:
                try:
                    extended = {str(k): str(v) for k, v in json.loads(bytes(raw)).items()}
                except (ValueError, AttributeError) as exc:
                    raise DamagedFileError(f"{source}: {DTYPES_MEMBER} is not a JSON object ({exc})") from None
                continue
            name = info.filename.removesuffix(".npy")
            arrays[name] = _npy_array(raw, f"{source}: member {name!r}")
    for name, dtype in extended.items():
        if name in arrays:
            try:
                arrays[name] = arrays[name].view(as_dtype(dtype))
            except (HeteroError, ValueError) as exc:
                raise DamagedFileError(f"{source}: member {name!r} cannot be read as {dtype} ({exc})") from None
    return arrays


def _npy_array(raw: memoryview, where: str) -> np.ndarray:
    # numpy reads at most a 64 KiB header by default (max_header_size 10000): the rest
    # of the member is not copied to parse it.
    f = io.BytesIO(raw[:_NPY_HEADER_READ])
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"version {version} is not 1.0 or 2.0")
    except (ValueError, SyntaxError, TypeError, EOFError) as exc:
        raise DamagedFileError(f"{where} is not a .npy array ({exc}); recompile it") from None
    if dtype.hasobject:
        raise DamagedFileError(f"{where} holds Python objects ({dtype}), which load only by unpickling; "
                               "hetero never writes those: the file is not hetero's")
    count = math.prod(shape)
    offset = f.tell()
    if count * dtype.itemsize != len(raw) - offset:
        raise DamagedFileError(f"{where} declares {dtype}{list(shape)} ({count * dtype.itemsize} bytes) "
                               f"but holds {len(raw) - offset}; the file is damaged: recompile it")
    array = np.frombuffer(raw, dtype, count=count, offset=offset)
    return array.reshape(shape, order="F" if fortran else "C")


_NPY_HEADER_READ = 2**16 + 16


def read_regular_file(path: str | os.PathLike[str], what: str, limit: int | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file no larger than ``limit``.

    The file is opened without blocking and checked before it is read, so a FIFO,
    a device or a folder in its place is a DamagedFileError naming it (``what`` says
    what it should have been), not a hang. OSErrors (missing, unreadable) propagate.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DamagedFileError(f"{path} is not a regular file (it is a {_kind(info.st_mode)}); "
                                   f"a {what} is a plain file: replace it")
        cap = memory_limit() if limit is None else limit
        if info.st_size > cap:
            raise DamagedFileError(f"{path} is {info.st_size} bytes, more than the {cap} a {what} may "
                                   "be on this machine; it is damaged or not a file hetero wrote")
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 2**26))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) != info.st_size:
        raise DamagedFileError(f"{path} shrank while it was read ({len(data)} of {info.st_size} bytes); "
                               "another process is writing it: try again")
    return data


def _kind(mode: int) -> str:
    kinds = {stat.S_ISFIFO: "FIFO", stat.S_ISDIR: "folder", stat.S_ISCHR: "character device",
             stat.S_ISBLK: "block device", stat.S_ISSOCK: "socket"}
    return next((name for test, name in kinds.items() if test(mode)), "special file")


def output_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be written as :func:`write_atomically` writes it, or None.

    Only a regular file (or nothing) is replaced: a folder, a FIFO, a device or a socket
    at ``path`` is refused, whoever runs hetero (root may replace ``/dev/full``; hetero
    will not). The folder must exist and take a new file, which is tried (a pseudo file
    system such as ``/proc`` says no only then)."""
    target = Path(path)
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return f"cannot be examined ({exc.strerror})"
    if info is not None:
        if stat.S_ISDIR(info.st_mode):
            return "is a folder; name a file in it"
        if not stat.S_ISREG(info.st_mode):
            kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode)
                    or stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "special")
            return f"is {kind}, not a regular file; hetero replaces only regular files: name another path"
        if not os.access(target, os.W_OK):
            return "cannot write it (permission denied)"
    folder = target.resolve().parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist"
    probe = folder / f".{target.name}.{os.getpid()}.probe"
    try:
        with open(probe, "xb"):
            pass
    except OSError as exc:
        return f"cannot write a file in {folder} ({exc.strerror or exc})"
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    return None


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file beside it, so that a reader
    sees the old file or the new one, never half of one. A path that names a link is
    written where the link points; one that names something other than a regular file
    is an :class:`OutputPathError` (:func:`output_problem`)."""
    problem = output_problem(path)
    if problem is not None:
        raise OutputPathError(f"{os.fspath(path)}: {problem}")
    target = Path(path).resolve()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_manifest(zf: zipfile.ZipFile, source: str) -> dict:
    """The JSON ``manifest.json`` of a part's artifact; DamagedFileError naming ``source``."""
    try:
        manifest = json.loads(read_member(zf, "manifest.json", source, MANIFEST_LIMIT))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedFileError(f"{source}: manifest.json is not JSON ({exc}); recompile the model") from None
    if not isinstance(manifest, dict):
        raise DamagedFileError(f"{source}: manifest.json is not a JSON object; recompile the model")
    return manifest


def constants_member(constants: Mapping[str, np.ndarray]) -> tuple[str, bytes]:
    """A part's constants as its artifact's ``constants.npz`` member, in order (the manifest
    lists their names: :func:`read_constants` reads them back by it)."""
    return "constants.npz", npz_bytes({f"arr_{i}": a for i, a in enumerate(constants.values())})


def read_constants(zf: zipfile.ZipFile, source: str, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The constants :func:`constants_member` wrote, by the ``names`` the manifest lists;
    views of the zip's buffer when it was opened on a ``memoryview``."""
    arrays = read_npz(member_view(zf, "constants.npz", source), f"{source}: constants.npz")
    return {name: arrays[f"arr_{i}"] for i, name in enumerate(names)}

