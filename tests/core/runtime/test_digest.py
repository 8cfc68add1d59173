"""Tree digests: the definition (label, chunk size, length, chunk digests in order), at
every size around a chunk boundary, several buffers at once, and in a forked child."""

from __future__ import annotations

import hashlib
import os
import struct
import sys

import numpy as np
import pytest

from hetero.core.runtime.digest import CHUNK, TreeDigests, tree_digest, tree_digests


def by_definition(data: bytes) -> bytes:
    leaves = [hashlib.sha256(data[i:i + CHUNK]).digest() for i in range(0, len(data), CHUNK)] or \
        [hashlib.sha256(b"").digest()]
    return hashlib.sha256(b"hetero-sha256-tree/1" + struct.pack(">QQ", CHUNK, len(data)) + b"".join(leaves)).digest()


@pytest.mark.parametrize("size", [0, 1, 2**18, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7])
def test_a_tree_digest_is_its_definition(size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert tree_digest(data) == by_definition(data)
    assert size < CHUNK or tree_digest(data) != hashlib.sha256(data).digest()


def test_several_buffers_at_once_keep_their_order_and_take_views() -> None:
    arrays = [np.arange(n, dtype=np.float32) for n in (0, 5, CHUNK // 2, CHUNK)]
    pending = TreeDigests([a.view(np.uint8) for a in arrays])
    assert pending.result() == [by_definition(a.tobytes()) for a in arrays]
    assert tree_digests([memoryview(arrays[3].tobytes())]) == [by_definition(arrays[3].tobytes())]


def test_one_changed_byte_changes_the_digest() -> None:
    data = bytearray(2 * CHUNK + 3)
    before = tree_digest(data)
    data[CHUNK + 1] = 1
    assert tree_digest(data) != before


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")
def test_a_forked_child_hashes_with_a_pool_of_its_own() -> None:
    data = os.urandom(4 * CHUNK)
    expected = tree_digest(data)  # the parent's pool now has threads
    pid = os.fork()
    if pid == 0:
        os._exit(0 if tree_digest(data) == expected else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
