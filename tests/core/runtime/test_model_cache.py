"""The compile cache's model entries: a second compile of a model is one lookup that runs no
pass and compiles nothing, and misses when anything its key holds changes; a damaged
or foreign entry is discarded and recompiled. Hits are read from ``hetero.core.timing``
(the phases that ran), never from wall time."""

from __future__ import annotations

import os
from pathlib import Path
import stat
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core import timing
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.core.runtime import cache as cache_module
from hetero.core.runtime.cache import CACHE_ENV, CacheWarning, CompileCache
from hetero.core.runtime.signing import KEY_ENV
from toyplugin import plugin_source

X = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)


@pytest.fixture(autouse=True)
def no_cache_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)


def conv_graph(seed: int = 0) -> Graph:
    """A convolution and its epilogue: weights the key must cover, kernels to lower."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("convnet")
    x = b.input("x", X.shape)
    h = b.Conv(x, rng.standard_normal((4, 3, 3, 3)).astype(np.float32),
               rng.standard_normal(4).astype(np.float32), pads=[1, 1, 1, 1], name="conv")
    b.output(b.Relu(h, name="relu"))
    return b.build()


def compile_recorded(graph: Graph, cache: Path, **kwargs: Any) -> tuple[Any, set[str]]:
    """The executable and the names of the phases its compile ran."""
    with timing.recording() as times:
        exe = hetero.compile(graph, targets=kwargs.pop("targets", ["llvm_cpu"]), cache=cache, **kwargs)
    return exe, {name for (_, name), seconds in times.seconds.items()}


def is_model_hit(phases: set[str]) -> bool:
    """A model hit loads; it runs no pass, no partition and no lowering."""
    return "model cache load" in phases and not phases & {"optimise", "partition", "lower"}


def model_entry(cache: Path) -> Path:
    (entry,) = cache.glob("*/*.model")
    return entry


def part_entry(cache: Path) -> Path:
    (entry,) = cache.glob("*/*.entry")
    return entry


def flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x40
    path.write_bytes(bytes(data))


def test_a_second_compile_is_a_model_hit_that_compiles_nothing(tmp_path: Path) -> None:
    fresh, phases = compile_recorded(conv_graph(), tmp_path)
    assert "lower" in phases and not is_model_hit(phases)
    cached, phases = compile_recorded(conv_graph(), tmp_path)
    assert is_model_hit(phases), phases
    np.testing.assert_array_equal(cached.run({"x": X})["relu"], fresh.run({"x": X})["relu"])
    assert cached.partition == fresh.partition and cached.partition_report == fresh.partition_report
    assert [p.region for p in cached.placements] == [p.region for p in fresh.placements]


def test_a_hit_loads_the_weights_without_copying_them(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    cached, _ = compile_recorded(conv_graph(), tmp_path)
    constants = cached.placements[0].part.constants
    assert constants and not any(a.flags.owndata for a in constants.values())


@pytest.mark.parametrize("change", ["weights", "options", "passes", "backend version", "hetero version",
                                    "hetero sources"])
def test_a_change_to_what_the_key_holds_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    compile_recorded(conv_graph(), tmp_path)
    graph, kwargs = conv_graph(), {}
    if change == "weights":
        graph = conv_graph(seed=1)
    elif change == "options":
        kwargs = {"num_threads": 1}
    elif change == "passes":
        kwargs = {"passes": []}
    elif change == "backend version":
        monkeypatch.setattr(get_backend("llvm_cpu"), "version", "99.0")
    elif change == "hetero sources":
        # An edit or a checkout under the same version number: the passes may differ.
        monkeypatch.setattr(cache_module, "_source_identity", lambda: b"edited")
    else:
        monkeypatch.setattr(hetero._version, "__version__", "99.0")
    exe, phases = compile_recorded(graph, tmp_path, **kwargs)
    assert not is_model_hit(phases) and "optimise" in phases
    assert "model cache load" in phases and "model cache store" in phases
    np.testing.assert_allclose(exe.run({"x": X})["relu"], hetero.run_reference(graph, {"x": X})["relu"],
                               rtol=1e-5, atol=1e-5)
    assert len(list(tmp_path.glob("*/*.model"))) == 2


def test_other_targets_are_a_miss_and_several_parts_load_as_compiled(tmp_path: Path, site: Any) -> None:
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu")})
    site.load()
    compile_recorded(conv_graph(), tmp_path)
    # Relu on the toy, the convolution on llvm_cpu: two parts and the transfers between them.
    split = {"targets": ["toy_cpu", "llvm_cpu"], "min_ratio": 0.0}
    fresh, phases = compile_recorded(conv_graph(), tmp_path, **split)
    assert not is_model_hit(phases)
    assert [p.backend for p in fresh.placements] == ["llvm_cpu", "toy_cpu"]
    cached, phases = compile_recorded(conv_graph(), tmp_path, **split)
    assert is_model_hit(phases)
    assert [(p.backend, p.region) for p in cached.placements] == [(p.backend, p.region) for p in fresh.placements]
    assert [(p.transfers_in, p.transfers_out) for p in cached.placements] == \
        [(p.transfers_in, p.transfers_out) for p in fresh.placements]
    np.testing.assert_array_equal(cached.run({"x": X})["relu"], fresh.run({"x": X})["relu"])


def test_without_its_model_entry_a_compile_still_hits_the_part_entries(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    model_entry(tmp_path).unlink()
    _, phases = compile_recorded(conv_graph(), tmp_path)
    assert "optimise" in phases and "lower" not in phases
    model_entry(tmp_path)  # stored again


def test_a_model_entry_whose_part_entry_is_gone_recompiles_that_part(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    part_entry(tmp_path).unlink()
    exe, phases = compile_recorded(conv_graph(), tmp_path)
    assert "lower" in phases
    np.testing.assert_allclose(exe.run({"x": X})["relu"], hetero.run_reference(conv_graph(), {"x": X})["relu"],
                               rtol=1e-5, atol=1e-5)
    _, phases = compile_recorded(conv_graph(), tmp_path)
    assert is_model_hit(phases)


@pytest.mark.parametrize("entry", [model_entry, part_entry], ids=["model", "part"])
def test_a_tampered_entry_is_discarded_and_recompiled(tmp_path: Path, entry: Any) -> None:
    compile_recorded(conv_graph(), tmp_path)
    path = entry(tmp_path)
    flip_last_byte(path)
    with pytest.warns(CacheWarning, match=rf"{path.name} discarded: refused unread, its content does not match"):
        exe, phases = compile_recorded(conv_graph(), tmp_path)
    assert not is_model_hit(phases)
    np.testing.assert_allclose(exe.run({"x": X})["relu"], hetero.run_reference(conv_graph(), {"x": X})["relu"],
                               rtol=1e-5, atol=1e-5)
    _, phases = compile_recorded(conv_graph(), tmp_path)
    assert is_model_hit(phases)


def test_a_model_entry_sealed_with_another_key_is_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = os.environ[KEY_ENV]
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "someone-else" / "signing.key"))
    compile_recorded(conv_graph(), tmp_path / "cache")
    monkeypatch.setenv(KEY_ENV, mine)
    with pytest.warns(CacheWarning) as warned:
        _, phases = compile_recorded(conv_graph(), tmp_path / "cache")
    assert not is_model_hit(phases)
    # The model entry, then the part entry it named: neither reaches a loader.
    messages = [str(w.message) for w in warned]
    for suffix in (".model", ".entry"):
        assert any(f"{suffix} discarded: refused unread, it is signed with another key" in m for m in messages)


def test_a_model_entry_moved_to_another_key_is_discarded(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    compile_recorded(conv_graph(seed=1), tmp_path)
    first, second = sorted(tmp_path.glob("*/*.model"), key=lambda p: p.stat().st_mtime)
    second.replace(first)
    with pytest.warns(CacheWarning, match=r"\.model discarded: it holds the entry for key"):
        _, phases = compile_recorded(conv_graph(), tmp_path)
    assert not is_model_hit(phases)


def test_a_model_entry_naming_a_part_by_anything_but_a_key_is_discarded(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    cache, key = CompileCache(tmp_path), model_entry(tmp_path).name.removesuffix(".model")
    exe = cache.load_model(key)
    assert exe is not None
    cache.put_model(key, exe, ["../../elsewhere"])
    with pytest.warns(CacheWarning, match=r"\.model discarded: its manifest cannot be used \(CacheError"):
        _, phases = compile_recorded(conv_graph(), tmp_path)
    assert not is_model_hit(phases)


def test_an_entry_others_can_write_is_discarded(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    path = model_entry(tmp_path)
    path.chmod(0o666)
    with pytest.warns(CacheWarning, match=r"\.model discarded: others can write it \(mode 666\)"):
        _, phases = compile_recorded(conv_graph(), tmp_path)
    assert not is_model_hit(phases)
    assert stat.S_IMODE(model_entry(tmp_path).stat().st_mode) == 0o600


def test_a_dump_skips_the_model_cache(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path / "c")
    _, phases = compile_recorded(conv_graph(), tmp_path / "c", dump=tmp_path / "d")
    assert "model cache load" not in phases and (tmp_path / "d" / "graph.txt").exists()


def test_a_backend_that_cannot_name_its_machine_skips_the_model_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("no cpuinfo")

    monkeypatch.setattr(get_backend("llvm_cpu"), "tuning_machine", broken)
    with pytest.warns(CacheWarning, match=r"backend llvm_cpu: tuning_machine\(\) raised RuntimeError: no cpuinfo"):
        compile_recorded(conv_graph(), tmp_path)
    assert not list(tmp_path.glob("*/*.model")) and len(list(tmp_path.glob("*/*.entry"))) == 1


def test_usage_and_clear_count_model_entries(tmp_path: Path) -> None:
    compile_recorded(conv_graph(), tmp_path)
    cache = CompileCache(tmp_path)
    assert cache.usage().entries == 2
    assert cache.clear().entries == 2 and cache.usage().entries == 0
