"""hetero.compile → Executable: run, report, save and load, through an installed plugin;
the runtime's check of what each compiled part returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
import json
from pathlib import Path
from typing import Any
import zipfile

import numpy as np
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.core.runtime.executable import MAGIC, trust
from hetero.core.runtime.signing import seal
from hetero.errors import (
    InputError, ModelLoadError, PluginError, SignatureError, UnknownBackendError, UnsupportedOpError,
)
from toyplugin import ToyPart, plugin_source


def small_graph() -> Graph:
    b = GraphBuilder("small")
    x = b.input("x", (2, 3))
    h = b.Add(x, np.arange(3, dtype=np.float32), name="add")
    b.output(b.Relu(b.Neg(h, name="neg"), name="relu"))
    return b.build()


@pytest.fixture
def toy(site):  # noqa: ANN001 - the fixture from conftest
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu")})
    site.load()
    return site


def test_compile_runs_like_the_reference(toy) -> None:  # noqa: ANN001
    g = small_graph()
    exe = hetero.compile(g, targets=["toy_cpu"])
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(exe.run({"x": x})["relu"], hetero.run_reference(g, {"x": x})["relu"])


def test_report_shows_time_per_kernel(toy) -> None:  # noqa: ANN001
    exe = hetero.compile(small_graph(), targets=["toy_cpu"])
    assert "not run yet" in exe.report()
    exe.run({"x": np.zeros((2, 3), np.float32)})
    exe.run({"x": np.zeros((2, 3), np.float32)})
    report = exe.report()
    assert "toy_cpu:part" in report and "over 2 run(s)" in report and "100.0%" in report


def test_save_and_load_run_without_recompiling(toy, tmp_path: Path) -> None:  # noqa: ANN001
    g = small_graph()
    exe = hetero.compile(g, targets=["toy_cpu"])
    path = tmp_path / "small.hetero"
    exe.save(path)
    again = hetero.load(path)
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(again.run({"x": x})["relu"], exe.run({"x": x})["relu"])
    assert again.interface.inputs == [("x", (2, 3), "float32")]


def test_inputs_are_checked(toy) -> None:  # noqa: ANN001
    exe = hetero.compile(small_graph(), targets=["toy_cpu"])
    with pytest.raises(InputError, match="'x'.*float32, got float64"):
        exe.run({"x": np.zeros((2, 3))})


def test_a_refused_node_is_named(toy) -> None:  # noqa: ANN001
    b = GraphBuilder("g")
    b.output(b.Tanh(b.input("x", (2,)), name="t"))
    with pytest.raises(UnsupportedOpError, match=r"t \(Tanh\): toy_cpu does not implement Tanh"):
        hetero.compile(b.build(), targets=["toy_cpu"], strict=True)


def test_a_mistyped_target_gets_did_you_mean(toy) -> None:  # noqa: ANN001
    with pytest.raises(UnknownBackendError, match="did you mean 'toy_cpu'"):
        hetero.compile(small_graph(), targets=["toy_cup"])


def test_dump_writes_the_graph_after_passes(toy, tmp_path: Path) -> None:  # noqa: ANN001
    hetero.compile(small_graph(), targets=["toy_cpu"], dump=tmp_path / "dump")
    assert "Relu(%neg)" in (tmp_path / "dump" / "graph.txt").read_text()


def test_loading_something_else_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.hetero"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ModelLoadError, match="not a saved hetero executable"):
        hetero.load(bad)
    other = tmp_path / "other.hetero"
    with zipfile.ZipFile(other, "w") as zf:
        zf.writestr("manifest.json", '{"format": "something", "format_version": 9}')
    with pytest.raises(SignatureError, match="other.hetero: this executable carries no signature.*recompile"):
        hetero.load(other)
    with pytest.raises(ModelLoadError, match="other.hetero: not a saved hetero executable.*nothing signed"):
        trust(other)
    # Signed with this user's key, yet of another format: named, not parsed further.
    payload = other.read_bytes()
    other.write_bytes(MAGIC + seal("hetero-executable/1", payload) + payload)
    with pytest.raises(ModelLoadError, match="format something v9 is not hetero-executable v1; recompile"):
        hetero.load(other)


class FaultyPart(ToyPart):
    """A toy part whose results break its contract in one way."""

    def __init__(self, program: dict[str, Any], fault: Callable[[dict[str, np.ndarray]], Any]) -> None:
        super().__init__(program)
        self.fault = fault

    def run(self, inputs: Mapping[str, np.ndarray]) -> Any:
        return self.fault(super().run(inputs))


@pytest.mark.parametrize("fault, message", [
    (lambda r: {"relu": r["relu"].reshape(3, 2)}, r"returned output 'relu' as float32\[3, 2\], its subgraph "
                                                   r"declares float32\[2, 3\]"),
    (lambda r: {"relu": r["relu"].astype(np.float64)}, r"returned output 'relu' as float64\[2, 3\], its "
                                                        r"subgraph declares float32\[2, 3\]"),
    (lambda r: {"neg": r["relu"]}, r"returned no output 'relu' \(it returned \['neg'\]\)"),
    (lambda r: {"relu": r["relu"].tolist()}, r"returned output 'relu' as a list, not a numpy array"),
    (lambda r: [r["relu"]], r"returned a list, not a dict of output arrays"),
    (lambda r: {**r, "spare": r["relu"]}, r"returned output\(s\) \['spare'\] that its subgraph does not have "
                                          r"\(it has \['relu'\]\)"),
])
def test_a_part_that_breaks_its_outputs_is_named(
    toy, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,  # noqa: ANN001
    fault: Callable[[dict[str, np.ndarray]], Any], message: str,
) -> None:
    backend = get_backend("toy_cpu")
    honest = backend.compile
    monkeypatch.setattr(backend, "compile", lambda g, o: FaultyPart(honest(g, o).program, fault))
    monkeypatch.setattr(backend, "load_artifact", lambda a: FaultyPart(json.loads(a), fault))
    exe = hetero.compile(small_graph(), targets=["toy_cpu"])
    x = np.ones((2, 3), np.float32)
    with pytest.raises(PluginError, match=rf"backend toy_cpu \(region r0\) {message}.*bug in toy_cpu"):
        exe.run({"x": x})
    # The declared types travel with a saved executable.
    exe.save(tmp_path / "faulty.hetero")
    with pytest.raises(PluginError, match=message):
        hetero.load(tmp_path / "faulty.hetero").run({"x": x})


def test_an_exception_inside_a_part_is_a_plugin_error_naming_backend_region_and_nodes(
    toy, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    def divide(results: dict[str, np.ndarray]) -> Any:
        return 1 / 0

    backend = get_backend("toy_cpu")
    honest = backend.compile
    monkeypatch.setattr(backend, "compile", lambda g, o: FaultyPart(honest(g, o).program, divide))
    exe = hetero.compile(small_graph(), targets=["toy_cpu"])
    with pytest.raises(PluginError, match=r"backend toy_cpu failed running region r0 \(nodes [\w, ]+\): "
                                          r"ZeroDivisionError: division by zero; this is a bug in toy_cpu") as info:
        exe.run({"x": np.ones((2, 3), np.float32)})
    assert isinstance(info.value.__cause__, ZeroDivisionError)
