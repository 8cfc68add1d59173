"""Signatures on the files hetero loads native code from: saved executables and
compile-cache entries.

A compiled part is code: a CPU backend's artifact is machine code that runs as soon as the
part does, so loading a file someone else wrote is running their program. hetero
therefore loads a part only from a file that this user's hetero wrote, and proves it
with a keyed signature: HMAC-SHA256, under a per-user secret key, over the file's
content and what the content is for (``purpose``: an executable's signature is never
accepted for a cache entry, nor the other way round). Checking the signature is the
first thing done with the bytes read; nothing reaches a parser or a backend's
``load_artifact`` before it.

The key lives outside any cache, in ``$HETERO_SIGNING_KEY_FILE`` when that is set, else
``$XDG_CONFIG_HOME/hetero/signing.key`` (``~/.config/hetero/signing.key``). It is made
on first use (32 random bytes, hex, mode 0600 in a 0700 folder) and refused when anyone
else can read or write it, or it belongs to another user. Sharing executables between
users or machines means sharing the key: point ``HETERO_SIGNING_KEY_FILE`` at one file
that exactly the people who trust each other can read.

A seal is 40 bytes: the key's id (8 bytes that tell "signed with another key" from
"changed since signed") and the 32-byte HMAC.

>>> stamp = seal("hetero-executable/1", payload)                    # doctest: +SKIP
>>> check_seal("hetero-executable/1", stamp, payload)               # doctest: +SKIP
''
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
import secrets
import stat
import struct
import tempfile

from hetero.errors import SignatureError

#: The environment variable that names the signing key file (tests and CI set it).
KEY_ENV = "HETERO_SIGNING_KEY_FILE"
#: Bytes in a seal: the key id, then the HMAC-SHA256.
SEAL_SIZE = 40

_MIN_KEY = 16
_MAX_KEY = 4096


def key_path() -> Path:
    """Where this user's signing key is: ``$HETERO_SIGNING_KEY_FILE``, else in the config home."""
    named = os.environ.get(KEY_ENV)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config) / "hetero" / "signing.key"


def signing_key() -> bytes:
    """This user's key, made on first use; SignatureError if it is unsafe or unreadable."""
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        _create_key(path)
    try:
        return _read_key(path)
    except OSError as exc:
        raise SignatureError(f"signing key {path} cannot be read ({exc}); set {KEY_ENV} to a "
                             "key file you own") from None


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise  # the caller makes a new key
    except OSError as exc:
        raise SignatureError(f"signing key {path} cannot be opened ({exc}); fix its permissions "
                             f"or set {KEY_ENV} to a key file you own") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SignatureError(f"signing key {path} is not a regular file; remove it (a new key is "
                                 f"made on next use) or set {KEY_ENV} to a key file")
        # Windows reports no owner and fixed mode bits; there the folder's ACL decides.
        posix = os.name == "posix"
        if posix and info.st_uid != os.getuid():
            raise SignatureError(f"signing key {path} belongs to uid {info.st_uid}, not you "
                                 f"(uid {os.getuid()}); set {KEY_ENV} to a key file of your own")
        if posix and info.st_mode & 0o077:
            raise SignatureError(f"signing key {path} is open to others (mode {stat.S_IMODE(info.st_mode):o}): "
                                 f"whoever can read it can sign code you would run; chmod 600 {path}")
        key = os.read(fd, _MAX_KEY + 1)
    finally:
        os.close(fd)
    if not _MIN_KEY <= len(key) <= _MAX_KEY:
        raise SignatureError(f"signing key {path} holds {len(key)} bytes, not {_MIN_KEY} to {_MAX_KEY}; "
                             "remove it to have a new one made (files signed with it must then be recompiled)")
    return key


def _create_key(path: Path) -> None:
    """Write a new random key to ``path`` (0600), unless another process just did."""
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".signing.", suffix=".tmp", dir=path.parent)  # mode 0600
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        # A hard link publishes the whole key at once, and never over a key already made.
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as exc:
        raise SignatureError(f"cannot create the signing key {path} ({exc}); set {KEY_ENV} to a "
                             "writable place or create the key there yourself (mode 0600)") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(b"hetero-signing-key-id\0" + key).digest()[:8]


def _mac(key: bytes, purpose: str, parts: tuple[bytes, ...]) -> bytes:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in (purpose.encode(), *parts):
        # Length-prefixed, so no two different sequences of parts sign the same bytes.
        mac.update(struct.pack(">Q", len(part)))
        mac.update(part)
    return mac.digest()


def seal(purpose: str, *parts: bytes) -> bytes:
    """The :data:`SEAL_SIZE`-byte seal of ``parts`` for ``purpose`` under this user's key."""
    key = signing_key()
    return _key_id(key) + _mac(key, purpose, parts)


def check_seal(purpose: str, stamp: bytes, *parts: bytes) -> str:
    """Why ``stamp`` is not this user's seal of ``parts`` for ``purpose``; empty when it is."""
    key = signing_key()
    if len(stamp) != SEAL_SIZE:
        return "its signature is truncated"
    if not hmac.compare_digest(stamp[:8], _key_id(key)):
        return (f"it is signed with another key than yours ({key_path()}): another user's or "
                "machine's, or a key since replaced")
    if not hmac.compare_digest(stamp[8:], _mac(key, purpose, parts)):
        return "its content does not match its signature (tampered with or damaged since it was signed)"
    return ""
