"""The content-addressed compile cache: a compiled part's artifact, and a whole model's
executable, stored under digests of everything that decides them.

Two kinds of entry share one folder:

- A *part entry* (``ROOT/ab/abcd....entry``) holds one region's artifact. Its key
  (:func:`cache_key`) is the SHA-256 of the optimised subgraph (its printed text, its node
  names, the bytes of every constant and array attribute), the backend's name and
  version, hetero's version and the compile options (sorted JSON). It serves a region
  whose model changed elsewhere: a partial hit.
- A *model entry* (``ROOT/ab/abcd....model``) holds what a whole compile made: the
  executable's manifest (partition, placements, transfers, fallbacks), its constants and,
  for each part, the key of its part entry. Its key (:func:`model_key`) is taken before
  any pass runs: the imported graph's content, the passes asked for, every target
  (backend, version, options set or default, the machine it compiles for), the
  fallback, the partition settings, hetero's version and sources, and the host's
  platform. A hit runs no pass, no partition and no compile: it loads the parts named.

Change anything a key holds and the key changes, so an entry is never invalidated in
place: a stale one is simply never asked for again. Constants are hashed as trees of
SHA-256s on several threads (:mod:`hetero.core.runtime.digest`): a model's weights are
the bulk of what a key covers.

An entry is one file: a fixed header (magic, the key, the seal, the payload's length),
padded to :data:`ALIGN` bytes, then the payload (a part's artifact; a model's manifest
and constants). It is written to a temporary file in the same folder, flushed to disk
and moved into place with ``os.replace``, so a reader sees the old entry, the new one or
none, never half of one; two processes storing the same key both succeed and one wins.

An artifact is code (a CPU backend's is machine code), so an entry is trusted only as
far as its seal (:mod:`hetero.core.runtime.signing`): the seal covers the key, the
payload's length and the payload (a part's through its tree digest), and reading checks
the header against the key and the seal against the payload before any of it reaches a
parser or a backend's ``load_artifact``. An entry that fails (truncated, tampered with,
renamed, signed with another key, a FIFO or folder in its place, writable by others) is
deleted with a :class:`CacheWarning` and the model or part is compiled again: nothing of
it ran, and the compile it would have saved is redone.

An entry is read by mapping it (read-only) rather than copying it: a backend that takes
views (:attr:`~hetero.core.plugin.backend.Backend.artifact_views`) gets its artifact as
a read-only ``memoryview`` of the mapping, and its weights stay where the file is. The
mapping is of a file that only this user can write, in a folder only this user can
write (both checked): whoever could change it after its seal is checked could as well
read the signing key and sign anything, so mapping opens no door that copying would
close.

The folder is made private (0700), and a folder that group or others can write, or that
another user owns, is refused with a :class:`~hetero.errors.CacheError`: whoever can
write it could replace entries or fill it.

>>> cache = CompileCache("~/.cache/hetero")                        # doctest: +SKIP
>>> part = cache.compile(graph, bind(get_backend(name)))           # doctest: +SKIP
>>> cache.usage()                                                  # doctest: +SKIP
CacheUsage(entries=1, nbytes=48213)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
import functools
import hashlib
import json
import mmap
import os
from pathlib import Path
import platform
import re
import shutil
import stat
import struct
import tempfile
from typing import TYPE_CHECKING, Any
import warnings

import numpy as np

from hetero import _version
from hetero.core import timing
from hetero.core.exec.archive import memory_limit, npz_bytes, read_npz
from hetero.core.ir.graph import Graph
from hetero.core.plugin.backend import Backend, CompiledPart
from hetero.core.plugin.target import Target
from hetero.core.runtime.digest import TreeDigests, tree_digest
from hetero.core.runtime.signing import SEAL_SIZE, check_seal, seal
from hetero.errors import CacheError, DamagedFileError, HeteroError

if TYPE_CHECKING:
    from hetero.core.runtime.executable import Executable

#: The environment variable naming the cache folder when ``compile`` is given none.
CACHE_ENV = "HETERO_CACHE_DIR"

ENTRY_SUFFIX = ".entry"
MODEL_SUFFIX = ".model"
#: Where an entry's payload starts: a multiple of every alignment numpy or a backend asks.
ALIGN = 128
_MAGIC = b"HETCACH3"
_OLDER = {b"HETCACH1": "an unsigned entry of an older hetero",
          b"HETCACH2": "an entry of an older hetero (sealed whole, before tree digests)"}
_MODEL_MAGIC = b"HETMODL1"
_PURPOSE = "hetero-cache-entry/2"
_MODEL_PURPOSE = "hetero-model-entry/1"
# magic, key digest, seal of key, length and payload, payload length
_HEADER = struct.Struct(f">8s32s{SEAL_SIZE}sQ")
_DATA = -(-_HEADER.size // ALIGN) * ALIGN  # where the payload starts
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


Feed = Callable[[bytes | str], None]


def _digest(label: str) -> tuple[Any, Feed]:
    """A SHA-256 and the function that feeds it length-prefixed fields, after ``label``."""
    digest = hashlib.sha256()

    def feed(data: bytes | str) -> None:
        # Length-prefixed, so no two different field sequences hash the same bytes.
        raw = data.encode() if isinstance(data, str) else data
        digest.update(struct.pack(">Q", len(raw)))
        digest.update(raw)

    feed(label)
    return digest, feed


def cache_key(subgraph: Graph, backend: Backend, options: Mapping[str, Any]) -> str:
    """The hex SHA-256 that names the compile of ``subgraph`` by ``backend`` with ``options``.

    Raises :class:`hetero.errors.CacheError` naming the option when an option is not
    plain JSON data (numbers, strings, booleans, None, lists and dicts of them):
    anything else has no stable serialisation to key on.
    """
    digest, feed = _digest("hetero-compile-cache/2")
    feed(_version.__version__)
    feed(backend.name)
    feed(backend.version)
    feed(_options_json(options, f"compile option {{name!r}} for backend {backend.name}"))
    _feed_graph(feed, subgraph)
    return digest.hexdigest()


def model_key(graph: Graph, settings: Mapping[str, Any], arrays: GraphArrays | None = None) -> str:
    """The hex SHA-256 that names a whole compile of ``graph`` (imported, before any
    pass) under ``settings``: the session's targets with their backends' versions,
    options and machines, the fallback, the partition settings and the passes, as the
    compile driver lists them (plain JSON data; CacheError naming the setting if not).
    hetero's version and sources and the host's platform are added here. ``arrays`` is
    ``GraphArrays(graph)`` when the caller started hashing the arrays earlier."""
    digest, feed = _digest("hetero-model-cache/1")
    feed(_version.__version__)
    feed(_source_identity())
    feed(json.dumps([platform.system(), platform.machine()]))
    feed(_options_json(settings, "compile setting {name!r}"))
    _feed_graph(feed, graph, arrays)
    return digest.hexdigest()


@functools.cache
def _source_identity() -> bytes:
    """A digest of the name, size and modification time of every Python file of the
    installed hetero: a model entry is keyed before the passes, the partitioner and the
    bundled backends run, so a change to any of them (a checkout, a development edit)
    must miss even where hetero's version number stays the same. Read once a process
    (about 3 ms for 270 files)."""
    root = Path(_version.__file__).parent
    digest = hashlib.sha256()
    for folder, folders, files in os.walk(root):
        folders.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                info = os.stat(path)
                digest.update(f"{os.path.relpath(path, root)}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return digest.digest()


class GraphArrays:
    """The constants and array attributes of a graph, their tree digests being computed
    on the digest pool from when this is made (:class:`~hetero.core.runtime.digest.TreeDigests`):
    the compile driver makes it before it loads plugins, so the two overlap."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        arrays = sorted(graph.constants.items())
        arrays += [(f"{node.name}.{attr}", value) for node in graph.nodes
                   for attr, value in sorted(node.attrs.items()) if isinstance(value, np.ndarray)]
        for name, array in arrays:
            if array.dtype.hasobject:
                raise CacheError(f"constant {name} of graph {graph.name} holds Python objects ({array.dtype}), "
                                 "which have no bytes to key on; compile it without a cache")
        self.arrays = [(name, np.ascontiguousarray(array)) for name, array in arrays]
        # Bytes of an extension dtype (bfloat16) are hashed as raw bytes.
        self._digests = TreeDigests([a.reshape(-1).view(np.uint8) if a.size else b"" for _, a in self.arrays])

    def feed(self, feed: Feed) -> None:
        """Feed each array's name, dtype, shape and tree digest."""
        for (name, array), digest in zip(self.arrays, self._digests.result()):
            feed(f"{name}:{array.dtype.str}:{list(array.shape)}")
            feed(digest)


def _feed_graph(feed: Feed, graph: Graph, arrays: GraphArrays | None = None) -> None:
    """Everything of ``graph`` a compile reads: its text, node names and array bytes."""
    if arrays is None or arrays.graph is not graph:
        arrays = GraphArrays(graph)
    feed(str(graph))
    # Node names are not in the printed text, but backends name their kernels after them.
    feed("\n".join(node.name for node in graph.nodes))
    arrays.feed(feed)


def _options_json(options: Mapping[str, Any], what: str) -> str:
    def plain(value: Any) -> Any:
        if isinstance(value, np.generic):
            return value.item()
        raise TypeError(type(value).__name__)

    for name in sorted(options):
        try:
            json.dumps(options[name], default=plain, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise CacheError(
                f"{what.format(name=name)} ({exc}) is not plain JSON data, so the compile cache "
                "cannot key it; pass a JSON value or compile without a cache"
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


def private_folder(name: str, folder: str | os.PathLike[str] | None = None) -> Path:
    """A backend's own folder of native code built on this machine (a C compiler's
    libraries, say): ``folder`` when given, else ``name`` under ``$HETERO_CACHE_DIR`` or
    ``$XDG_CACHE_HOME/hetero`` (``~/.cache/hetero``). Made private (0700) and refused as
    the compile cache refuses its own (:meth:`CompileCache.check_folder`): what is
    loaded from it runs as this process."""
    if folder is None:
        root = os.environ.get(CACHE_ENV) or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "hetero")
        folder = Path(root) / name
    folder = Path(folder).expanduser()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    CompileCache(folder).check_folder()
    return folder


class _Unusable(Exception):
    """A model entry names a part entry that is gone or was discarded."""


class CompileCache:
    """A folder of compiled artifacts and models, keyed by :func:`cache_key` and
    :func:`model_key`; created on first store."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def __repr__(self) -> str:
        return f"CompileCache({str(self.root)!r})"

    def check_folder(self, folder: Path | None = None) -> bool:
        """Whether the cache folder (or ``folder``, one of its sub-folders) exists;
        CacheError if it is not private to this user.

        A folder that group or others can write, or that belongs to another user, is
        refused, at every level: its entries could be replaced by someone else.
        """
        folder = self.root if folder is None else folder
        try:
            info = os.stat(folder)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise CacheError(f"compile cache {folder} cannot be examined ({exc}); "
                             "choose another folder") from None
        if not stat.S_ISDIR(info.st_mode):
            raise CacheError(f"compile cache {folder} is not a folder; remove it or choose another")
        # Windows reports no owner and fixed mode bits; there the folder's ACL decides.
        if os.name != "posix":
            return True
        if info.st_uid != os.getuid():
            raise CacheError(f"compile cache {folder} belongs to uid {info.st_uid}, not you "
                             f"(uid {os.getuid()}); use a folder of your own")
        if info.st_mode & 0o022:
            raise CacheError(f"compile cache {folder} can be written by others (mode "
                             f"{stat.S_IMODE(info.st_mode):o}), who could replace what it holds; "
                             f"chmod 700 {folder}, or choose a private folder")
        return True

    def path(self, key: str, suffix: str = ENTRY_SUFFIX) -> Path:
        """Where the entry for ``key`` lives (a model's with ``suffix=MODEL_SUFFIX``)."""
        return self.root / key[:2] / f"{key}{suffix}"

    def compile(self, subgraph: Graph, target: Target) -> CompiledPart:
        """``target.compile(subgraph)``, answered from the cache when it can be.

        The key holds the target's options (set or default). A hit rebuilds the part
        with the backend's ``load_artifact``; a miss compiles and stores the artifact.
        Options that cannot be keyed compile without the cache, with a
        :class:`CacheWarning` naming the option.
        """
        return self.compile_keyed(subgraph, target)[0]

    def compile_keyed(self, subgraph: Graph, target: Target) -> tuple[CompiledPart, str | None]:
        """:meth:`compile`, and the key of the entry that now holds the part (None when
        it could not be keyed or stored)."""
        backend = target.backend
        try:
            key = cache_key(subgraph, backend, dict(target.options))
        except CacheError as exc:
            warnings.warn(str(exc), CacheWarning, stacklevel=3)
            return target.compile(subgraph), None
        part = self.load_part(key, backend)
        if part is not None:
            return part, key
        part = target.compile(subgraph)
        return part, key if self.put(key, part.artifact) is not None else None

    def load_part(self, key: str, backend: Backend) -> CompiledPart | None:
        """The part stored under ``key``, rebuilt by ``backend`` (given a view of the
        entry when it takes views), or None: missing, or discarded (damaged, or refused
        by the backend)."""
        artifact = self.get(key)
        if artifact is None:
            return None
        try:
            return backend.load_artifact(artifact if backend.artifact_views else bytes(artifact))
        except Exception as exc:  # noqa: BLE001 - any refusal means: recompile
            self._discard(key, f"backend {backend.name} could not load it ({type(exc).__name__}: {exc})")
            return None

    def get(self, key: str) -> memoryview | None:
        """The artifact stored under ``key`` once its seal is checked, as a view of the
        entry, or None (an entry that fails is discarded); CacheError if the folder is
        not private."""
        return self._read(key, ENTRY_SUFFIX, _MAGIC, _PURPOSE)

    def put(self, key: str, artifact: bytes | str) -> Path | None:
        """Store ``artifact`` under ``key`` atomically; return its path, or None if it failed.

        A failure to store (read-only or full disk) is a :class:`CacheWarning`, not an
        error: the compile it would have saved has already succeeded. A folder that is
        not private is a CacheError; a new one is made private (0700).
        """
        data = artifact.encode() if isinstance(artifact, str) else bytes(artifact)
        return self._write(key, ENTRY_SUFFIX, _MAGIC, _PURPOSE, data)

    def load_model(self, key: str) -> Executable | None:
        """The executable the model entry ``key`` describes, its parts loaded from their
        entries, or None: missing, discarded, or naming a part entry that is gone."""
        from hetero.core.runtime.executable import FORMAT, FORMAT_VERSION, rebuild

        payload = self._read(key, MODEL_SUFFIX, _MODEL_MAGIC, _MODEL_PURPOSE)
        if payload is None:
            return None
        source = str(self.path(key, MODEL_SUFFIX))
        try:
            (length,) = struct.unpack_from(">Q", payload)
            if length > len(payload) - 8:
                raise DamagedFileError(f"{source}: its manifest runs past its end")
            manifest = json.loads(bytes(payload[8:8 + length]))
            if manifest["format"] != FORMAT or manifest["format_version"] != FORMAT_VERSION:
                raise DamagedFileError(f"format {manifest['format']} v{manifest['format_version']} is not "
                                       f"{FORMAT} v{FORMAT_VERSION}")
            constants = read_npz(bytes(payload[8 + length:]), f"{source}: constants")

            def load_part(entry: Mapping[str, Any], backend: Backend) -> CompiledPart:
                part = self.load_part(str(entry["artifact"]), backend)
                if part is None:
                    raise _Unusable
                return part

            return rebuild(manifest, constants, load_part, source)
        except _Unusable:
            return None
        except (HeteroError, KeyError, IndexError, TypeError, ValueError, struct.error) as exc:
            self._discard(key, f"its manifest cannot be used ({type(exc).__name__}: {exc})", MODEL_SUFFIX)
            return None

    def put_model(self, key: str, executable: Executable, parts: list[str]) -> Path | None:
        """Store ``executable`` under ``key``, its parts named by the keys ``parts`` of
        the part entries that hold them; the path, or None if it failed (a warning)."""
        manifest = json.dumps(executable.manifest(parts)).encode()
        constants = npz_bytes({f"c{i}": a for i, a in enumerate(executable.constants.values())})
        return self._write(key, MODEL_SUFFIX, _MODEL_MAGIC, _MODEL_PURPOSE,
                           struct.pack(">Q", len(manifest)) + manifest + constants)

    def _read(self, key: str, suffix: str, magic: bytes, purpose: str) -> memoryview | None:
        if not _KEY.match(key):
            raise CacheError(f"compile cache key {key!r} is not a hex SHA-256; make it with cache_key()")
        path = self.path(key, suffix)
        if not self.check_folder() or not self.check_folder(path.parent):
            return None
        try:
            with timing.phase("cache entry map"):
                data = _map_entry(path, key, magic)
        except FileNotFoundError:
            return None
        except DamagedFileError as exc:
            self._discard(key, str(exc), suffix)
            return None
        except OSError as exc:
            warnings.warn(f"compile cache entry {path} is unreadable ({exc}); "
                          "compiling instead", CacheWarning, stacklevel=3)
            return None
        with timing.phase("cache seal check"):
            problem = _check(data, key, magic, purpose)
        if problem:
            self._discard(key, problem, suffix)
            return None
        return data[_DATA:]

    def _write(self, key: str, suffix: str, magic: bytes, purpose: str, data: bytes) -> Path | None:
        if not _KEY.match(key):
            raise CacheError(f"compile cache key {key!r} is not a hex SHA-256; make it with cache_key()")
        raw_key = bytes.fromhex(key)
        header = _HEADER.pack(magic, raw_key, _seal_of(purpose, raw_key, data), len(data))
        path = self.path(key, suffix)
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            warnings.warn(f"compile cache {self.root}: could not create it ({exc}); "
                          "the compile result is kept in memory only", CacheWarning, stacklevel=3)
            return None
        self.check_folder()
        try:
            path.parent.mkdir(mode=0o700, exist_ok=True)
            self.check_folder(path.parent)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(header.ljust(_DATA, b"\0"))
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            warnings.warn(f"compile cache {self.root}: could not store entry {key} ({exc}); "
                          "the compile result is kept in memory only", CacheWarning, stacklevel=3)
            return None
        return path

    def usage(self) -> CacheUsage:
        """The number of entries (parts and models) and their total size in bytes."""
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
            for suffix in (ENTRY_SUFFIX, MODEL_SUFFIX):
                for path in folder.glob(f"*{suffix}"):
                    if _KEY.match(path.name[: -len(suffix)]):
                        yield path

    def _discard(self, key: str, problem: str, suffix: str = ENTRY_SUFFIX) -> None:
        path = self.path(key, suffix)
        warnings.warn(f"compile cache entry {path} discarded: {problem}; compiling again",
                      CacheWarning, stacklevel=4)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # in a private folder of ours, named as an entry: not the user's
            else:
                path.unlink(missing_ok=True)
        except OSError as exc:
            warnings.warn(f"compile cache entry {path} could not be removed ({exc}); remove it by hand",
                          CacheWarning, stacklevel=4)


def _seal_of(purpose: str, raw_key: bytes, data: Any) -> bytes:
    return seal(purpose, raw_key, struct.pack(">Q", len(data)), tree_digest(data))


def _map_entry(path: Path, key: str, magic: bytes) -> memoryview:
    """The entry file at ``path``, mapped read-only: DamagedFileError unless it is a
    regular file of this user's that no one else can write, no larger than memory, whose
    header (read before anything is mapped) has ``magic``, ``key`` and the file's size."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "FIFO" if stat.S_ISFIFO(info.st_mode) else "folder" if stat.S_ISDIR(info.st_mode) \
                else "special file"
            raise DamagedFileError(f"not a regular file (it is a {kind})")
        if os.name == "posix" and info.st_uid != os.getuid():
            raise DamagedFileError(f"it belongs to uid {info.st_uid}, not you")
        if os.name == "posix" and info.st_mode & 0o022:
            raise DamagedFileError(f"others can write it (mode {stat.S_IMODE(info.st_mode):o})")
        if info.st_size > memory_limit():
            raise DamagedFileError(f"it is {info.st_size} bytes, more than this machine's memory")
        if info.st_size < _DATA:
            raise DamagedFileError(f"truncated ({info.st_size} bytes, shorter than its {_DATA}-byte header)")
        problem = _header_problem(os.pread(fd, _HEADER.size, 0), key, magic, info.st_size - _DATA)
        if problem:
            raise DamagedFileError(problem)
        # Read-only: a private writable mapping that is populated up front is copied page
        # by page (the kernel breaks copy-on-write), which is what mapping avoids.
        if os.name == "posix":
            mapped = mmap.mmap(fd, info.st_size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                               prot=mmap.PROT_READ)
        else:
            mapped = mmap.mmap(fd, info.st_size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    return memoryview(mapped)


def _header_problem(header: bytes, key: str, magic: bytes, payload_bytes: int) -> str:
    """Why an entry whose header is ``header`` and whose payload is ``payload_bytes``
    long is not one for ``key``; empty when its header fits."""
    found, stored_key, _, length = _HEADER.unpack_from(header)
    if found in _OLDER and magic == _MAGIC:
        return _OLDER[found]
    if found != magic:
        return "not a hetero compile cache entry of this kind (bad magic)"
    if stored_key.hex() != key:
        return f"it holds the entry for key {stored_key.hex()}"
    if payload_bytes != length:
        return (f"{'truncated' if payload_bytes < length else 'longer than it should be'} "
                f"(payload is {payload_bytes} bytes, its header says {length})")
    return ""


def _check(data: memoryview, key: str, magic: bytes, purpose: str) -> str:
    """Why ``data`` is not a sound entry for ``key``; empty when it is."""
    payload = data[_DATA:]
    problem = _header_problem(data, key, magic, len(payload))
    if problem:
        return problem
    _, stored_key, stamp, length = _HEADER.unpack_from(data)
    problem = check_seal(purpose, stamp, stored_key, struct.pack(">Q", length), tree_digest(payload))
    return f"refused unread, {problem}" if problem else ""
