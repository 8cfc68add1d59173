"""hetero.compile → Executable: run, report, save and load, through an installed plugin."""

from __future__ import annotations

from pathlib import Path
import zipfile

import numpy as np
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder
from hetero.errors import InputError, ModelLoadError, UnknownBackendError, UnsupportedOpError
from toyplugin import plugin_source


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
    with pytest.raises(ModelLoadError, match="recompile"):
        hetero.load(other)
