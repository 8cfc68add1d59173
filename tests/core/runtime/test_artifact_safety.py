"""Files hetero loads native code from: saved executables and compile-cache entries are
signed with the user's key and checked before any byte reaches a backend's loader;
damaged ones are named errors; the cache folder and the key are private."""

from __future__ import annotations

from collections.abc import Callable, Iterator
import hashlib
import io
import json
import os
from pathlib import Path
import stat
import struct
from typing import Any
import zipfile

import numpy as np
import pytest

import hetero
from hetero.core.exec.archive import write_zip
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind
from hetero.core.runtime import executable as executable_module
from hetero.core.runtime.cache import CACHE_ENV, CacheWarning, CompileCache, cache_key
from hetero.core.runtime.executable import MAGIC, load, trust
from hetero.core.runtime.signing import KEY_ENV, check_seal, key_path, seal
from hetero.errors import CacheError, DamagedFileError, HeteroError, ModelLoadError, SignatureError

X = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)


def tiny_graph() -> Graph:
    b = GraphBuilder("tiny")
    h = b.Add(b.input("x", (4, 8)), np.linspace(-1, 1, 8, dtype=np.float32), name="add")
    b.output(b.Relu(h, name="relu"))
    return b.build()


def expected() -> np.ndarray:
    return hetero.run_reference(tiny_graph(), {"x": X})["relu"]


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every artifact handed to llvm_cpu's ``load_artifact`` from now on."""
    backend = get_backend("llvm_cpu")
    original, seen = backend.load_artifact, []

    def spy(artifact: bytes) -> Any:
        seen.append(artifact)
        return original(artifact)

    monkeypatch.setattr(backend, "load_artifact", spy)
    return seen


@pytest.fixture
def other_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], Any]], Any]:
    """Run a function with another user's signing key in force."""
    def under(action: Callable[[], Any]) -> Any:
        mine = os.environ[KEY_ENV]
        monkeypatch.setenv(KEY_ENV, str(tmp_path / "someone-else" / "signing.key"))
        try:
            return action()
        finally:
            monkeypatch.setenv(KEY_ENV, mine)
    return under


@pytest.fixture
def saved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    path = tmp_path / "tiny.hetero"
    hetero.compile(tiny_graph(), targets=["llvm_cpu"]).save(path)
    return path


def payload_of(path: Path) -> bytes:
    return path.read_bytes()[len(MAGIC) + 40:]


def members(payload: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(payload)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def signed(payload: bytes) -> bytes:
    return MAGIC + seal("hetero-executable/1", payload) + payload


# -- executables -------------------------------------------------------------------


def test_a_saved_executable_is_signed_and_loads(saved: Path, loads: list[bytes]) -> None:
    data = saved.read_bytes()
    assert data.startswith(MAGIC)
    assert check_seal("hetero-executable/1", data[8:48], data[48:]) == ""
    np.testing.assert_array_equal(load(saved).run({"x": X})["relu"], expected())
    assert len(loads) == 1


def test_a_crafted_executable_never_reaches_a_loader(
    saved: Path, tmp_path: Path, loads: list[bytes], monkeypatch: pytest.MonkeyPatch,
    other_key: Callable[[Callable[[], Any]], Any],
) -> None:
    parsed: list[bytes] = []
    monkeypatch.setattr(executable_module, "open_zip", lambda data, source: parsed.append(data))
    forged = members(payload_of(saved))
    forged["parts/0.bin"] = b"\x7fELF" + b"\xcc" * 64  # "machine code" of the attacker's
    forged_zip = write_zip(forged.items())
    crafted = {
        "no signature (a plain zip)": forged_zip,
        "signed with another user's key": other_key(lambda: signed(forged_zip)),
        "a genuine seal over other content": saved.read_bytes()[:48] + forged_zip,
        "a zeroed seal": MAGIC + bytes(40) + forged_zip,
    }
    for what, data in crafted.items():
        path = tmp_path / "crafted.hetero"
        path.write_bytes(data)
        with pytest.raises(SignatureError, match=r"crafted.hetero: .*signed with your key.*recompile") as err:
            load(path)
        assert "trust(" in str(err.value), what
    assert loads == [] and parsed == []


def test_signature_messages_say_what_is_wrong(
    saved: Path, other_key: Callable[[Callable[[], Any]], Any],
) -> None:
    payload = payload_of(saved)
    saved.write_bytes(payload)
    with pytest.raises(SignatureError, match="carries no signature"):
        load(saved)
    saved.write_bytes(other_key(lambda: signed(payload)))
    with pytest.raises(SignatureError, match="signed with another key than yours"):
        load(saved)
    flipped = bytearray(signed(payload))
    flipped[-10] ^= 0x40
    saved.write_bytes(bytes(flipped))
    with pytest.raises(SignatureError, match="does not match its signature"):
        load(saved)


def test_trust_signs_an_executable_from_an_older_hetero(saved: Path, loads: list[bytes]) -> None:
    saved.write_bytes(payload_of(saved))  # unsigned, as hetero wrote them before signatures
    with pytest.raises(SignatureError):
        load(saved)
    assert loads == []
    trust(saved)
    np.testing.assert_array_equal(load(saved).run({"x": X})["relu"], expected())
    trust(saved)  # signing a signed file again is harmless
    np.testing.assert_array_equal(load(saved).run({"x": X})["relu"], expected())


def _cuts(n: int) -> list[int]:
    return [0, 1, 7, 8, 30, 47, 48, 60, n // 2, n - 22, n - 1]


def test_every_flipped_byte_and_truncation_is_a_named_error(saved: Path, loads: list[bytes]) -> None:
    good = saved.read_bytes()
    damaged = []
    for at in range(0, len(good), max(1, len(good) // 97)):
        flipped = bytearray(good)
        flipped[at] ^= 0xFF
        damaged.append(bytes(flipped))
    damaged += [good[:cut] for cut in _cuts(len(good))]
    for data in damaged:
        saved.write_bytes(data)
        with pytest.raises((SignatureError, ModelLoadError), match=str(saved.name)):
            load(saved)
    assert loads == []


def test_a_fifo_a_folder_or_nothing_in_place_of_the_file_is_a_named_error(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.hetero"
    os.mkfifo(fifo)
    # No writer ever opens it: a blocking open would hang here.
    with pytest.raises(DamagedFileError, match=r"fifo.hetero is not a regular file \(it is a FIFO\)"):
        load(fifo)
    folder = tmp_path / "dir.hetero"
    folder.mkdir()
    with pytest.raises(DamagedFileError, match=r"dir.hetero is not a regular file \(it is a folder\)"):
        load(folder)
    with pytest.raises(ModelLoadError, match=r"missing.hetero: not a saved hetero executable"):
        load(tmp_path / "missing.hetero")


def _without(name: str) -> Callable[[dict[str, bytes]], None]:
    return lambda m: m.pop(name)


def _manifest(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, bytes]], None]:
    def edit(m: dict[str, bytes]) -> None:
        manifest = json.loads(m["manifest.json"])
        change(manifest)
        m["manifest.json"] = json.dumps(manifest).encode()
    return edit


def _bomb(m: dict[str, bytes]) -> None:
    m["parts/0.bin"] = b"\0" * (64 * 2**20)


@pytest.mark.parametrize("damage, message", [
    (_without("manifest.json"), r"no entry 'manifest.json'"),
    (_without("constants.npz"), r"no entry 'constants.npz'"),
    (_without("parts/0.bin"), r"no entry 'parts/0.bin'"),
    (lambda m: m.update({"manifest.json": b"{not json"}), r"manifest.json is not JSON"),
    (_manifest(lambda d: d.pop("parts")), r"manifest.json is incomplete or malformed \(KeyError: 'parts'\)"),
    (_manifest(lambda d: d["parts"][0].pop("artifact")), r"incomplete or malformed \(KeyError: 'artifact'\)"),
    (_manifest(lambda d: d.update(inputs=[["x", "not a shape", "float32"]])), r"incomplete or malformed"),
    (_manifest(lambda d: d.update(constants=["a", "b"])), r"constants.npz lacks c0"),
    (lambda m: m.update({"constants.npz": b"PK junk"}), r"constants.npz: not a readable zip archive"),
    (lambda m: m.update({"parts/0.bin": b"junk"}), r"llvm_cpu artifact: not a readable zip archive"),
])
def test_a_validly_signed_but_damaged_executable_is_a_named_error(
    saved: Path, damage: Callable[[dict[str, bytes]], None], message: str,
) -> None:
    content = members(payload_of(saved))
    damage(content)
    saved.write_bytes(signed(write_zip(content.items())))
    with pytest.raises(ModelLoadError, match=message):
        load(saved)


def test_a_signed_zip_bomb_is_refused_before_it_is_inflated(
    saved: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    content = members(payload_of(saved))
    _bomb(content)
    # Deflated by hand: write_zip stores bytes members as they are.
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in content.items():
            zf.writestr(name, data)
    saved.write_bytes(signed(bomb.getvalue()))
    # This machine "has" 16 MiB: an entry declaring 64 MiB is refused by its header.
    monkeypatch.setattr("hetero.core.exec.archive.memory_limit", lambda: 16 * 2**20)
    with pytest.raises(DamagedFileError, match=r"'parts/0.bin' declares 67108864 bytes, at most 16777216"):
        load(saved)


def test_an_executable_of_an_older_hetero_still_loads_once_trusted(saved: Path) -> None:
    """Written with numpy.savez and without the output types: what format 1 files hold."""
    content = members(payload_of(saved))
    manifest = json.loads(content["manifest.json"])
    for part in manifest["parts"]:
        del part["output_types"]
    content["manifest.json"] = json.dumps(manifest).encode()
    npz = io.BytesIO()
    np.savez(npz)
    content["constants.npz"] = npz.getvalue()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in content.items():
            zf.writestr(name, data)
    saved.write_bytes(buffer.getvalue())
    trust(saved)
    exe = load(saved)
    assert exe.placements[0].output_types == ()
    np.testing.assert_array_equal(exe.run({"x": X})["relu"], expected())


# -- the compile cache -------------------------------------------------------------


def _entry(cache: CompileCache) -> Path:
    (entry,) = cache.root.glob("*/*.entry")
    return entry


@pytest.fixture
def cached(tmp_path: Path) -> tuple[CompileCache, str]:
    cache = CompileCache(tmp_path / "cache")
    target = bind(get_backend("llvm_cpu"))
    cache.compile(tiny_graph(), target)
    return cache, cache_key(tiny_graph(), target.backend, dict(target.options))


def _recompiles_without_loading(cache: CompileCache, loads: list[bytes], reason: str) -> None:
    with pytest.warns(CacheWarning, match=rf"\.entry discarded: .*{reason}"):
        part = cache.compile(tiny_graph(), bind(get_backend("llvm_cpu")))
    assert loads == []
    np.testing.assert_array_equal(part.run({"x": X})["relu"], expected())


def test_a_folder_in_place_of_an_entry_is_discarded_as_damaged(
    cached: tuple[CompileCache, str], loads: list[bytes],
) -> None:
    cache, _ = cached
    entry = _entry(cache)
    entry.unlink()
    entry.mkdir()
    (entry / "inside").write_text("x")
    _recompiles_without_loading(cache, loads, r"not a regular file \(it is a folder\)")
    assert entry.is_file()


def test_an_inflated_entry_is_refused_from_its_header_before_it_is_mapped(
    cached: tuple[CompileCache, str], loads: list[bytes], monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hetero.core.runtime.cache as cache_module

    cache, _ = cached
    with open(_entry(cache), "r+b") as f:
        f.truncate(os.path.getsize(_entry(cache)) + 64 * 2**20)  # sparse: no disk, no memory

    def no_map(*args: object, **kwargs: object) -> None:
        raise AssertionError("mapped before the header was checked")

    monkeypatch.setattr(cache_module.mmap, "mmap", no_map)
    _recompiles_without_loading(cache, loads, r"longer than it should be \(payload is \d+ bytes, its header says")


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_sub_folder_others_can_write_is_refused_as_the_top_is(
    cached: tuple[CompileCache, str], loads: list[bytes], mode: int,
) -> None:
    cache, _ = cached
    _entry(cache).parent.chmod(mode)
    with pytest.raises(CacheError, match=rf"compile cache .*/[0-9a-f]{{2}} can be written by others "
                                         rf"\(mode {mode:o}\).*chmod 700"):
        cache.compile(tiny_graph(), bind(get_backend("llvm_cpu")))
    assert loads == []


def test_junk_with_a_recomputed_digest_never_reaches_the_loader(
    cached: tuple[CompileCache, str], loads: list[bytes],
) -> None:
    cache, key = cached
    junk = b"\x7fELF" + os.urandom(256)
    # What an entry was before signatures: magic, key, the SHA-256 of the artifact, its length.
    header = struct.pack(">8s32s32sQ", b"HETCACH1", bytes.fromhex(key), hashlib.sha256(junk).digest(), len(junk))
    _entry(cache).write_bytes(header + junk)
    _recompiles_without_loading(cache, loads, "unsigned entry of an older hetero")


def test_an_entry_signed_with_another_key_never_reaches_the_loader(
    cached: tuple[CompileCache, str], loads: list[bytes], other_key: Callable[[Callable[[], Any]], Any],
) -> None:
    cache, key = cached
    other_key(lambda: cache.put(key, b"\x7fELF junk"))
    _recompiles_without_loading(cache, loads, "refused unread, it is signed with another key")


def test_a_genuine_seal_over_other_bytes_never_reaches_the_loader(
    cached: tuple[CompileCache, str], loads: list[bytes],
) -> None:
    cache, _ = cached
    entry = _entry(cache)
    data = entry.read_bytes()
    header_size = 8 + 32 + 40 + 8
    junk = os.urandom(len(data) - header_size)
    entry.write_bytes(data[:header_size] + junk)
    _recompiles_without_loading(cache, loads, "does not match its signature")


def test_a_fifo_in_place_of_an_entry_is_discarded_without_blocking(
    cached: tuple[CompileCache, str], loads: list[bytes],
) -> None:
    cache, _ = cached
    entry = _entry(cache)
    entry.unlink()
    os.mkfifo(entry)
    _recompiles_without_loading(cache, loads, r"not a regular file \(it is a FIFO\)")
    assert stat.S_ISREG(entry.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_the_cache_folder_is_made_private(tmp_path: Path, umask_022: None) -> None:
    cache = CompileCache(tmp_path / "new" / "cache")
    cache.compile(tiny_graph(), bind(get_backend("llvm_cpu")))
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(_entry(cache).parent.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702])
def test_a_cache_folder_others_can_write_is_refused(
    tmp_path: Path, loads: list[bytes], mode: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    folder = tmp_path / "shared"
    hetero.compile(tiny_graph(), targets=["llvm_cpu"], cache=folder)
    folder.chmod(mode)
    with pytest.raises(CacheError, match=rf"compile cache .*shared can be written by others \(mode {mode:o}\).*chmod 700"):
        hetero.compile(tiny_graph(), targets=["llvm_cpu"], cache=folder)
    assert loads == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_cache_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, 4321, 4321)
    with pytest.raises(CacheError, match=r"theirs belongs to uid 4321, not you"):
        CompileCache(folder).compile(tiny_graph(), bind(get_backend("llvm_cpu")))


# -- the signing key ---------------------------------------------------------------


def test_the_key_is_made_private_on_first_use_outside_any_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022: None,
) -> None:
    monkeypatch.delenv(KEY_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    path = key_path()
    assert path == tmp_path / "config" / "hetero" / "signing.key"
    first = seal("test", b"data")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(path.read_bytes()) >= 32 and seal("test", b"data") == first
    assert seal("other purpose", b"data") != first and seal("test", b"dat", b"a") != first
    assert sorted(p.name for p in path.parent.iterdir()) == ["signing.key"]


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_key_others_can_read_or_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: int) -> None:
    path = tmp_path / "key"
    path.write_bytes(os.urandom(32))
    path.chmod(mode)
    monkeypatch.setenv(KEY_ENV, str(path))
    with pytest.raises(SignatureError, match=rf"signing key .*key is open to others \(mode {mode:o}\).*chmod 600"):
        seal("test", b"data")


def test_a_short_key_or_a_folder_as_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "key"
    path.write_bytes(b"short")
    path.chmod(0o600)
    monkeypatch.setenv(KEY_ENV, str(path))
    with pytest.raises(SignatureError, match=r"holds 5 bytes, not 16 to 4096"):
        seal("test", b"data")
    monkeypatch.setenv(KEY_ENV, str(tmp_path))
    with pytest.raises(HeteroError, match=r"is not a regular file"):
        seal("test", b"data")


# -- the bundled backends' loaders -------------------------------------------------


def _bundled_artifacts() -> Iterator[tuple[str, bytes]]:
    from plugins.npu_sim.npu_programs import int8_net

    yield "llvm_cpu", bind(get_backend("llvm_cpu")).compile(tiny_graph()).artifact
    yield "npu_sim", bind(get_backend("npu_sim"), {"npu_preset": "tiny-64k"}).compile(int8_net(3, 8, 11, seed=7)).artifact


def test_a_bundled_loader_names_a_damaged_artifact() -> None:
    """What reaches load_artifact is signed, but an old or damaged part must still fail by name.

    Bytes are flipped and cut everywhere; in llvm_cpu's machine code the zip's CRC
    catches a flip before the code is loaded (only the signature can vouch for code
    that is consistent but malicious).
    """
    for name, good in _bundled_artifacts():
        backend = get_backend(name)
        damaged = [good[:cut] for cut in _cuts(len(good))]
        for at in range(0, len(good), max(1, len(good) // 60)):
            flipped = bytearray(good)
            flipped[at] ^= 0x5A
            damaged.append(bytes(flipped))
        for data in damaged:
            try:
                backend.load_artifact(data)
            except HeteroError:
                pass


def test_the_command_line_names_hetero_trust_and_it_signs(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hetero.cli import main

    saved.write_bytes(payload_of(saved))  # unsigned
    assert main(["run", str(saved), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"`hetero trust {saved}`" in err
    assert "hetero.trust(" not in err
    with pytest.raises(SignatureError, match=r"hetero\.trust\('"):
        load(saved)  # Python callers are told the Python spelling
    assert main(["trust", str(saved)]) == 0
    assert capsys.readouterr().out == f"signed {saved}\n"
    np.testing.assert_array_equal(load(saved).run({"x": X})["relu"], expected())
