"""The content-addressed compile cache: a compiled part's artifact, stored under a digest
of everything that decides it.

A key is the SHA-256 of the subgraph (its printed text, its node names, the bytes of
every constant and array attribute), the backend's name and version, hetero's version
and the compile options (sorted JSON). Change any of them and the key changes, so an
entry is never invalidated in place: a stale one is simply never asked for again.

An entry is one file, ``ROOT/ab/abcd....entry``: a fixed header (magic, the key, the
seal of key and artifact under this user's signing key, the artifact's length)
followed by the artifact. It is written to a temporary file in the same folder,
flushed to disk and moved into place with ``os.replace``, so a reader sees the old
entry, the new one or none, never half of one; two processes storing the same key
both succeed and one of them wins.

An artifact is code (a CPU backend's is machine code), so an entry is trusted only as far as
its seal (:mod:`hetero.core.runtime.signing`): reading checks the header against the
key and the seal against the artifact before the artifact reaches the backend's
``load_artifact``. An entry that fails (truncated, tampered with, renamed, signed with
another key, a FIFO or folder in its place) is deleted with a :class:`CacheWarning` and
the part is compiled again: nothing of it ran, and the compile it would have saved is
redone. The folder is made private (0700), and a folder that group or others can
write, or that another user owns, is refused with a :class:`~hetero.errors.CacheError`:
whoever can write it could replace entries or fill it.

>>> cache = CompileCache("~/.cache/hetero")                        # doctest: +SKIP
>>> part = cache.compile(graph, bind(get_backend(name)))           # doctest: +SKIP
>>> cache.usage()                                                  # doctest: +SKIP
CacheUsage(entries=1, nbytes=48213)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
import hashlib
import json
import os
from pathlib import Path
import re
import stat
import struct
import tempfile
from typing import Any
import warnings

import numpy as np

from hetero.core.ir.graph import Graph
from hetero.core.plugin.backend import Backend, CompiledPart
from hetero.core.plugin.target import Target
from hetero.core.runtime.archive import read_regular_file
from hetero.core.runtime.signing import SEAL_SIZE, check_seal, seal
from hetero.errors import CacheError, DamagedFileError

#: The environment variable naming the cache folder when ``compile`` is given none.
CACHE_ENV = "HETERO_CACHE_DIR"

ENTRY_SUFFIX = ".entry"
_MAGIC = b"HETCACH2"
_UNSIGNED = b"HETCACH1"  # entries of hetero before signatures
_PURPOSE = "hetero-cache-entry/1"
# magic, key digest, seal of key and artifact, artifact length
_HEADER = struct.Struct(f">8s32s{SEAL_SIZE}sQ")
_KEY = re.compile(r"^[0-9a-f]{64}$")
_TEMP = re.compile(r"^\.[0-9a-f]{64}\..*\.tmp$")


class CacheWarning(UserWarning):
    """A cache entry was discarded (damaged, or refused by its backend) or could not be stored."""


@dataclass(frozen=True)
class CacheUsage:
    """How much a cache folder holds: its entries and their bytes on disk."""

    entries: int
    nbytes: int

    def __str__(self) -> str:
        size = f"{self.nbytes / 2**20:.1f} MiB" if self.nbytes >= 2**20 else f"{self.nbytes / 2**10:.1f} KiB"
        return f"{self.entries} entr{'y' if self.entries == 1 else 'ies'}, {size}"


def cache_key(subgraph: Graph, backend: Backend, options: Mapping[str, Any]) -> str:
    """The hex SHA-256 that names the compile of ``subgraph`` by ``backend`` with ``options``.

    Raises :class:`hetero.errors.CacheError` naming the option when an option is not
    plain JSON data (numbers, strings, booleans, None, lists and dicts of them):
    anything else has no stable serialisation to key on.
    """
    from hetero import __version__

    digest = hashlib.sha256()

    def feed(data: bytes | str) -> None:
        # Length-prefixed, so no two different field sequences hash the same bytes.
        raw = data.encode() if isinstance(data, str) else data
        digest.update(struct.pack(">Q", len(raw)))
        digest.update(raw)

    feed("hetero-compile-cache/1")
    feed(__version__)
    feed(backend.name)
    feed(backend.version)
    feed(_options_json(options, backend))
    feed(str(subgraph))
    # Node names are not in the printed text, but backends name their kernels after them.
    feed("\n".join(node.name for node in subgraph.nodes))
    for name, array in sorted(subgraph.constants.items()):
        _feed_array(feed, name, array)
    for node in subgraph.nodes:
        for attr, value in sorted(node.attrs.items()):
            if isinstance(value, np.ndarray):
                _feed_array(feed, f"{node.name}.{attr}", value)
    return digest.hexdigest()


def _feed_array(feed: Callable[[bytes | str], None], name: str, array: np.ndarray) -> None:
    feed(f"{name}:{array.dtype.str}:{list(array.shape)}")
    feed(np.ascontiguousarray(array).tobytes())


def _options_json(options: Mapping[str, Any], backend: Backend) -> str:
    def plain(value: Any) -> Any:
        if isinstance(value, np.generic):
            return value.item()
        raise TypeError(type(value).__name__)

    for name in sorted(options):
        try:
            json.dumps(options[name], default=plain, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise CacheError(
                f"compile option {name!r} for backend {backend.name} ({exc}) is not plain JSON "
                "data, so the compile cache cannot key it; pass a JSON value or compile without a cache"
            ) from None
    return json.dumps(dict(options), default=plain, sort_keys=True, allow_nan=False)


def open_cache(cache: str | os.PathLike[str] | None) -> CompileCache | None:
    """The cache at ``cache``; when None, the one named by ``HETERO_CACHE_DIR``, if set.

    A folder that is not private to this user is a CacheError here, before any compile.
    """
    if cache is None:
        cache = os.environ.get(CACHE_ENV) or None
    if cache is None:
        return None
    store = CompileCache(cache)
    store.check_folder()
    return store


class CompileCache:
    """A folder of compiled artifacts, keyed by :func:`cache_key`; created on first store."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"CompileCache({str(self.root)!r})"

    def check_folder(self) -> bool:
        """Whether the cache folder exists; CacheError if it is not private to this user.

        A folder that group or others can write, or that belongs to another user, is
        refused: its entries could be replaced by someone else.
        """
        try:
            info = os.stat(self.root)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise CacheError(f"compile cache {self.root} cannot be examined ({exc}); "
                             "choose another folder") from None
        if not stat.S_ISDIR(info.st_mode):
            raise CacheError(f"compile cache {self.root} is not a folder; remove it or choose another")
        # Windows reports no owner and fixed mode bits; there the folder's ACL decides.
        if os.name != "posix":
            return True
        if info.st_uid != os.getuid():
            raise CacheError(f"compile cache {self.root} belongs to uid {info.st_uid}, not you "
                             f"(uid {os.getuid()}); use a folder of your own")
        if info.st_mode & 0o022:
            raise CacheError(f"compile cache {self.root} can be written by others (mode "
                             f"{stat.S_IMODE(info.st_mode):o}), who could replace what it holds; "
                             f"chmod 700 {self.root}, or choose a private folder")
        return True

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives."""
        return self.root / key[:2] / f"{key}{ENTRY_SUFFIX}"

    def compile(self, subgraph: Graph, target: Target) -> CompiledPart:
        """``target.compile(subgraph)``, answered from the cache when it can be.

        The key holds the target's options (set or default). A hit rebuilds the part
        with the backend's ``load_artifact``; a miss compiles and stores the artifact.
        Options that cannot be keyed compile without the cache, with a
        :class:`CacheWarning` naming the option.
        """
        backend = target.backend
        try:
            key = cache_key(subgraph, backend, dict(target.options))
        except CacheError as exc:
            warnings.warn(str(exc), CacheWarning, stacklevel=2)
            return target.compile(subgraph)
        artifact = self.get(key)
        if artifact is not None:
            try:
                return backend.load_artifact(artifact)
            except Exception as exc:  # noqa: BLE001 - any refusal means: recompile
                self._discard(key, f"backend {backend.name} could not load it ({type(exc).__name__}: {exc})")
        part = target.compile(subgraph)
        self.put(key, part.artifact)
        return part

    def get(self, key: str) -> bytes | None:
        """The artifact stored under ``key`` once its seal is checked, or None (an entry
        that fails is discarded); CacheError if the folder is not private."""
        if not self.check_folder():
            return None
        try:
            data = read_regular_file(self.path(key), "compile cache entry")
        except FileNotFoundError:
            return None
        except DamagedFileError as exc:
            self._discard(key, str(exc))
            return None
        except OSError as exc:
            warnings.warn(f"compile cache entry {self.path(key)} is unreadable ({exc}); "
                          "compiling instead", CacheWarning, stacklevel=2)
            return None
        problem = _check(data, key)
        if problem:
            self._discard(key, problem)
            return None
        return data[_HEADER.size:]

    def put(self, key: str, artifact: bytes | str) -> Path | None:
        """Store ``artifact`` under ``key`` atomically; return its path, or None if it failed.

        A failure to store (read-only or full disk) is a :class:`CacheWarning`, not an
        error: the compile it would have saved has already succeeded. A folder that is
        not private is a CacheError; a new one is made private (0700).
        """
        if not _KEY.match(key):
            raise CacheError(f"compile cache key {key!r} is not a hex SHA-256; make it with cache_key()")
        data = artifact.encode() if isinstance(artifact, str) else bytes(artifact)
        raw_key = bytes.fromhex(key)
        header = _HEADER.pack(_MAGIC, raw_key, seal(_PURPOSE, raw_key, data), len(data))
        path = self.path(key)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            warnings.warn(f"compile cache {self.root}: could not create it ({exc}); "
                          "the compile result is kept in memory only", CacheWarning, stacklevel=2)
            return None
        self.check_folder()
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(header + data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            warnings.warn(f"compile cache {self.root}: could not store entry {key} ({exc}); "
                          "the compile result is kept in memory only", CacheWarning, stacklevel=2)
            return None
        return path

    def usage(self) -> CacheUsage:
        """The number of entries and their total size in bytes."""
        sizes = [p.stat().st_size for p in self._entries()]
        return CacheUsage(len(sizes), sum(sizes))

    def clear(self) -> CacheUsage:
        """Delete every entry (and temporary files left by killed writers); return what went.

        Only files the cache itself names are touched, so pointing a cache at a
        folder that holds other things never deletes those.
        """
        removed = CacheUsage(0, 0)
        for path in list(self._entries()):
            size = path.stat().st_size
            path.unlink(missing_ok=True)
            removed = CacheUsage(removed.entries + 1, removed.nbytes + size)
        for folder in self._folders():
            for tmp in folder.iterdir():
                if _TEMP.match(tmp.name):
                    tmp.unlink(missing_ok=True)
            if not any(folder.iterdir()):
                folder.rmdir()
        return removed

    def _folders(self) -> Iterator[Path]:
        if not self.root.is_dir():
            return
        for folder in self.root.iterdir():
            if folder.is_dir() and re.fullmatch(r"[0-9a-f]{2}", folder.name):
                yield folder

    def _entries(self) -> Iterator[Path]:
        for folder in self._folders():
            for path in folder.glob(f"*{ENTRY_SUFFIX}"):
                if _KEY.match(path.name[: -len(ENTRY_SUFFIX)]):
                    yield path

    def _discard(self, key: str, problem: str) -> None:
        path = self.path(key)
        warnings.warn(f"compile cache entry {path} discarded: {problem}; compiling again",
                      CacheWarning, stacklevel=3)
        path.unlink(missing_ok=True)


def _check(data: bytes, key: str) -> str:
    """Why ``data`` is not a sound entry for ``key``; empty when it is."""
    if len(data) < _HEADER.size:
        return f"truncated ({len(data)} bytes, shorter than its {_HEADER.size}-byte header)"
    magic, stored_key, stamp, length = _HEADER.unpack_from(data)
    if magic == _UNSIGNED:
        return "an unsigned entry of an older hetero"
    if magic != _MAGIC:
        return "not a hetero compile cache entry (bad magic)"
    if stored_key.hex() != key:
        return f"it holds the entry for key {stored_key.hex()}"
    payload = memoryview(data)[_HEADER.size:]
    if len(payload) != length:
        return f"truncated (artifact is {len(payload)} bytes, its header says {length})"
    problem = check_seal(_PURPOSE, stamp, stored_key, bytes(payload))
    return f"refused unread, {problem}" if problem else ""
