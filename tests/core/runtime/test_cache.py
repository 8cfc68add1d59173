"""The compile cache: keys, hits without compiling, damaged entries, atomic writes, and
its use by ``hetero.compile``."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
import sys
from typing import TYPE_CHECKING, Any
import warnings

import numpy as np
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin import Backend
from hetero.core.plugin.backend import CompiledPart
from hetero.core.plugin.manager import get_backend
from hetero.core.runtime.cache import (
    CACHE_ENV, CacheWarning, CompileCache, cache_key, open_cache,
)
from hetero.errors import CacheError
from hetero.core.plugin.target import Target, bind
from toyplugin import ToyBackend, ToyPart, plugin_source

if TYPE_CHECKING:
    from conftest import Site

X = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)


def small_graph(bias: float = 0.0) -> Graph:
    b = GraphBuilder("small")
    x = b.input("x", (2, 3))
    h = b.Add(x, np.arange(3, dtype=np.float32) + np.float32(bias), name="add")
    b.output(b.Relu(b.Neg(h, name="neg"), name="relu"))
    return b.build()


class CountingToy(ToyBackend):
    """A ToyBackend that counts its compiles."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.compiles = 0

    def compile(self, subgraph: Graph, target: Target) -> ToyPart:
        self.compiles += 1
        return super().compile(subgraph, target)


def expected(graph: Graph) -> np.ndarray:
    return hetero.run_reference(graph, {"x": X})["relu"]


def only_entry(cache: CompileCache) -> Path:
    entries = sorted(cache.root.glob("*/*.entry"))
    assert len(entries) == 1, entries
    return entries[0]


def test_a_miss_compiles_and_stores(tmp_path: Path) -> None:
    cache, backend, g = CompileCache(tmp_path / "c"), CountingToy(), small_graph()
    part = cache.compile(g, bind(backend, {}))
    assert backend.compiles == 1
    np.testing.assert_array_equal(part.run({"x": X})["relu"], expected(g))
    entry = only_entry(cache)
    assert entry == cache.path(cache_key(g, backend, dict(bind(backend).options)))
    assert cache.usage().entries == 1 and cache.usage().nbytes == entry.stat().st_size


def test_a_hit_loads_the_artifact_without_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g, backend = small_graph(), CountingToy()
    CompileCache(tmp_path).compile(g, bind(backend, {"num_threads": 2}))

    def refuse(*args: Any) -> None:
        raise AssertionError("compile called on a cache hit")

    monkeypatch.setattr(backend, "compile", refuse)
    part = CompileCache(tmp_path).compile(small_graph(), bind(backend, {"num_threads": 2}))
    assert isinstance(part, ToyPart)
    np.testing.assert_array_equal(part.run({"x": X})["relu"], expected(g))


def test_the_key_is_stable_for_the_same_compile() -> None:
    backend = ToyBackend()
    assert cache_key(small_graph(), backend, {"a": 1, "b": [1, 2]}) == cache_key(
        small_graph(), ToyBackend(), {"b": (1, 2), "a": np.int64(1)}
    )


def test_options_constants_and_versions_change_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    base = cache_key(small_graph(), ToyBackend(), {"num_threads": 1})
    variants = {
        "options": cache_key(small_graph(), ToyBackend(), {"num_threads": 2}),
        "constant": cache_key(small_graph(bias=1e-6), ToyBackend(), {"num_threads": 1}),
        "backend version": cache_key(small_graph(), ToyBackend(version="1.1"), {"num_threads": 1}),
        "backend name": cache_key(small_graph(), ToyBackend(name="toy_two"), {"num_threads": 1}),
    }
    monkeypatch.setattr(hetero._version, "__version__", "99.0")
    variants["hetero version"] = cache_key(small_graph(), ToyBackend(), {"num_threads": 1})
    assert all(key != base for key in variants.values()), variants
    assert len(set(variants.values())) == len(variants)


def test_a_constant_too_large_to_print_still_changes_the_key() -> None:
    def graph(last: float) -> Graph:
        b = GraphBuilder("big")
        w = np.zeros(64, np.float32)
        w[-1] = last
        b.output(b.Add(b.input("x", (64,)), w, name="add"))
        return b.build()

    assert str(graph(0.0)) == str(graph(1.0))
    assert cache_key(graph(0.0), ToyBackend(), {}) != cache_key(graph(1.0), ToyBackend(), {})


def test_an_option_that_is_not_json_is_named_and_compiles_uncached(tmp_path: Path) -> None:
    with pytest.raises(CacheError, match="option 'hook'.*toy_cpu.*JSON"):
        cache_key(small_graph(), ToyBackend(), {"hook": object()})
    cache, backend = CompileCache(tmp_path), CountingToy()
    with pytest.warns(CacheWarning, match="option 'hook'"):
        cache.compile(small_graph(), bind(backend, {"hook": object()}))
    assert backend.compiles == 1 and cache.usage().entries == 0


@pytest.mark.parametrize("damage, reason", [
    (lambda data: data[:-1] + bytes([data[-1] ^ 0x01]), "tampered"),
    (lambda data: data[: len(data) // 2], "truncated"),
    (lambda data: data[:20], "truncated"),
    (lambda data: b"", "truncated"),
    (lambda data: b"GARBAGE!" + data[8:], "bad magic"),
])
def test_a_damaged_entry_is_warned_about_discarded_and_recompiled(
    tmp_path: Path, damage: Any, reason: str
) -> None:
    cache, backend, g = CompileCache(tmp_path), CountingToy(), small_graph()
    cache.compile(g, bind(backend, {}))
    entry = only_entry(cache)
    good = entry.read_bytes()
    entry.write_bytes(damage(good))
    with pytest.warns(CacheWarning, match=rf"{entry.name} discarded: .*{reason}"):
        part = cache.compile(g, bind(backend, {}))
    assert backend.compiles == 2
    np.testing.assert_array_equal(part.run({"x": X})["relu"], expected(g))
    assert entry.read_bytes() == good


def test_an_entry_moved_to_another_key_is_not_trusted(tmp_path: Path) -> None:
    cache, backend = CompileCache(tmp_path), CountingToy()
    cache.compile(small_graph(), bind(backend, {}))
    other = cache_key(small_graph(bias=1.0), backend, {})
    cache.path(other).parent.mkdir(parents=True, exist_ok=True)
    only_entry(cache).replace(cache.path(other))
    with pytest.warns(CacheWarning, match="holds the entry for key"):
        assert cache.get(other) is None
    assert not cache.path(other).exists()


def test_an_artifact_the_backend_refuses_is_discarded_and_recompiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, backend, g = CompileCache(tmp_path), CountingToy(), small_graph()
    cache.compile(g, bind(backend, {}))

    def refuse(artifact: bytes) -> ToyPart:
        raise ValueError("format 2 expected")

    monkeypatch.setattr(backend, "load_artifact", refuse)
    with pytest.warns(CacheWarning, match="toy_cpu could not load it.*format 2 expected"):
        cache.compile(g, bind(backend, {}))
    assert backend.compiles == 2 and cache.usage().entries == 1


def test_writes_leave_no_temporary_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = CompileCache(tmp_path)
    key = cache_key(small_graph(), ToyBackend(), {})
    for artifact in (b"first", b"second"):
        cache.put(key, artifact)
    assert [p.name for p in cache.path(key).parent.iterdir()] == [cache.path(key).name]
    assert cache.get(key) == b"second"

    def full_disk(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", full_disk)
    with pytest.warns(CacheWarning, match="could not store entry.*No space left"):
        assert cache.put(cache_key(small_graph(1.0), ToyBackend(), {}), b"third") is None
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [cache.path(key).name]


def _store_many(root: str, key: str, artifact: bytes) -> None:
    cache = CompileCache(root)
    for _ in range(100):
        cache.put(key, artifact)


@pytest.mark.skipif(sys.platform == "win32", reason="needs fork for a quick second process")
def test_two_processes_storing_one_key_leave_a_sound_entry(tmp_path: Path) -> None:
    key = cache_key(small_graph(), ToyBackend(), {})
    artifact = bytes(range(256)) * 1024
    fork = multiprocessing.get_context("fork")
    writers = [fork.Process(target=_store_many, args=(str(tmp_path), key, artifact)) for _ in range(2)]
    for w in writers:
        w.start()
    reader = CompileCache(tmp_path)
    # A reader racing the writers sees a whole entry or none, never a damaged one.
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        while any(w.is_alive() for w in writers):
            assert reader.get(key) in (None, artifact)
    assert all(w.exitcode == 0 for w in writers)
    assert reader.get(key) == artifact
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [reader.path(key).name]


def test_usage_and_clear_touch_only_cache_files(tmp_path: Path) -> None:
    cache = CompileCache(tmp_path)
    assert cache.usage().entries == 0 and cache.clear().entries == 0
    for bias in (0.0, 1.0, 2.0):
        cache.put(cache_key(small_graph(bias), ToyBackend(), {}), b"x" * 100)
    key = cache_key(small_graph(), ToyBackend(), {})
    (cache.path(key).parent / f".{key}.abc.tmp").write_bytes(b"left by a killed writer")
    (tmp_path / "notes.txt").write_text("mine")
    usage = cache.usage()
    assert usage.entries == 3 and usage.nbytes > 300 and str(usage).startswith("3 entries, 0.")
    assert cache.clear() == usage
    assert cache.usage().entries == 0
    assert [p.name for p in tmp_path.rglob("*")] == ["notes.txt"]


def test_open_cache_prefers_the_argument_then_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert open_cache(None) is None
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    assert open_cache(None).root == tmp_path / "env"
    assert open_cache(tmp_path / "arg").root == tmp_path / "arg"


@pytest.fixture
def toy(site: Site, monkeypatch: pytest.MonkeyPatch) -> ToyBackend:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu")})
    site.load()
    backend = get_backend("toy_cpu")
    assert isinstance(backend, ToyBackend)
    return backend


def count_compiles(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> list[str]:
    """Record each compile of ``backend`` (by graph name) from now on."""
    calls: list[str] = []
    original = backend.compile

    def counted(subgraph: Graph, target: Target) -> CompiledPart:
        calls.append(subgraph.name)
        return original(subgraph, target)

    monkeypatch.setattr(backend, "compile", counted)
    return calls


def test_hetero_compile_honours_the_cache_dir_variable(
    toy: ToyBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env"))
    calls = count_compiles(monkeypatch, toy)
    g = small_graph()
    hetero.compile(g, targets=["toy_cpu"])
    # One part entry and the model entry that names it.
    assert CompileCache(tmp_path / "env").usage().entries == 2
    exe = hetero.compile(g, targets=["toy_cpu"])
    assert calls == ["small"]
    np.testing.assert_array_equal(exe.run({"x": X})["relu"], expected(g))


def test_hetero_compile_uses_an_explicit_cache_and_none_by_default(
    toy: ToyBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = count_compiles(monkeypatch, toy)
    hetero.compile(small_graph(), targets=["toy_cpu"])
    hetero.compile(small_graph(), targets=["toy_cpu"])
    assert len(calls) == 2 and not list(tmp_path.rglob("*.entry"))
    hetero.compile(small_graph(), targets=["toy_cpu"], cache=tmp_path / "c")
    exe = hetero.compile(small_graph(), targets=["toy_cpu"], cache=tmp_path / "c")
    assert len(calls) == 3
    np.testing.assert_array_equal(exe.run({"x": X})["relu"], expected(small_graph()))


def test_a_dump_compiles_even_when_the_cache_holds_the_part(
    toy: ToyBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hetero.compile(small_graph(), targets=["toy_cpu"], cache=tmp_path / "c")
    calls = count_compiles(monkeypatch, toy)
    hetero.compile(small_graph(), targets=["toy_cpu"], cache=tmp_path / "c", dump=tmp_path / "d")
    assert calls == ["small"] and (tmp_path / "d" / "graph.txt").exists()


def test_the_bundled_cpu_backend_runs_a_cached_part_like_a_fresh_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    b = GraphBuilder("tiny")
    h = b.Add(b.input("x", (4, 8)), np.linspace(-1, 1, 8, dtype=np.float32), name="add")
    b.output(b.Relu(h, name="relu"))
    g = b.build()
    fresh = hetero.compile(g, targets=["llvm_cpu"], cache=tmp_path)
    calls = count_compiles(monkeypatch, get_backend("llvm_cpu"))
    cached = hetero.compile(g, targets=["llvm_cpu"], cache=tmp_path)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    assert calls == []
    np.testing.assert_array_equal(cached.run({"x": x})["relu"], fresh.run({"x": x})["relu"])
    np.testing.assert_allclose(cached.run({"x": x})["relu"], hetero.run_reference(g, {"x": x})["relu"])
