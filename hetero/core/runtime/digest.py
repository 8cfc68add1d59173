"""SHA-256 of large buffers, computed in parallel: a two-level tree of SHA-256s.

A model's weights are a hundred megabytes, and a compile-cache lookup hashes them twice
(once for the key, once to check the entry's seal). One SHA-256 is sequential, so a
buffer is cut into :data:`CHUNK` byte chunks, each chunk hashed on its own (on a pool of
threads: ``hashlib`` releases the GIL while it hashes a large buffer), and the digest of
the buffer is the SHA-256 of a label, the chunk size, the length and the chunks' digests
in order. Finding two buffers with one tree digest means finding a SHA-256 collision, as
for a plain digest; the tree digest is a different number from a plain SHA-256 of the
same bytes, which is why it is labelled.

>>> len(tree_digest(bytes(5 * CHUNK)))
32
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
import functools
import hashlib
import os
import struct
from typing import Any

#: Bytes per leaf of the tree: large enough that a task's overhead is nothing beside
#: its hashing (about 1 ms a chunk), small enough that two threads share a buffer evenly.
CHUNK = 2 * 2**20
_LABEL = b"hetero-sha256-tree/1"
# Below this a buffer is hashed on the calling thread: handing it to the pool costs more.
_INLINE = 256 * 2**10


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)),
                              thread_name_prefix="hetero-digest")


# A forked child (a backend's compile workers, the tuner's measurements) has none of the
# parent's pool threads: it makes a pool of its own if it hashes.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_pool.cache_clear)


class TreeDigests:
    """The tree digests of ``buffers`` (bytes-like, C-contiguous), being computed: the
    chunks of all of them are handed to the pool when this is made, so the caller can do
    other work (import plugins, say) while they are hashed; :meth:`result` waits.

    The buffers must not change until :meth:`result` returns."""

    def __init__(self, buffers: Sequence[Any]) -> None:
        self._views = [memoryview(b).cast("B") for b in buffers]
        self._leaves: list[list[bytes | None]] = [[None] * max(1, -(-len(v) // CHUNK)) for v in self._views]
        self._tasks = []
        for i, view in enumerate(self._views):
            if len(view) <= _INLINE:
                self._leaves[i][0] = hashlib.sha256(view).digest()
                continue
            for j in range(len(self._leaves[i])):
                self._tasks.append((i, j, view[j * CHUNK:(j + 1) * CHUNK]))
        self._done = _pool().map(lambda task: hashlib.sha256(task[2]).digest(), self._tasks) if self._tasks else ()
        self._result: list[bytes] | None = None

    def result(self) -> list[bytes]:
        """The 32-byte digest of each buffer, in order."""
        if self._result is None:
            for (i, j, _), leaf in zip(self._tasks, self._done):
                self._leaves[i][j] = leaf
            digests = []
            for view, row in zip(self._views, self._leaves):
                root = hashlib.sha256(_LABEL)
                root.update(struct.pack(">QQ", CHUNK, len(view)))
                for leaf in row:
                    root.update(leaf)  # type: ignore[arg-type]
                digests.append(root.digest())
            self._result = digests
        return self._result


def tree_digests(buffers: Sequence[Any]) -> list[bytes]:
    """The 32-byte tree digest of each of ``buffers`` (bytes-like, C-contiguous), all of
    their chunks hashed at once on the pool."""
    return TreeDigests(buffers).result()


def tree_digest(buffer: Any) -> bytes:
    """The 32-byte tree digest of one bytes-like ``buffer``."""
    return tree_digests([buffer])[0]
