"""A backend whose compile raises: its region falls back, and nothing says it ran there.

The executable's placements, its partition (data and text), its report and
``hetero compile``'s output all name the fallback as the region's backend, and
give the error as the reason the region's nodes moved.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper
import pytest

import hetero
from hetero.cli import main
from hetero.core.compiler import CompileFallbackWarning
from hetero.core.runtime.executable import CompileFallback

FAILING = """\
from hetero.core.plugin import hookimpl
from hetero.errors import PluginError
from toyplugin import ToyBackend


class Failing(ToyBackend):
    def compile(self, subgraph, target):
        raise PluginError(f"{self.name} cannot compile {subgraph.nodes[0].name}: out of registers")


@hookimpl
def hetero_backends():
    return [Failing("failing", ops=("Relu", "Neg"))]
"""

ERROR = "PluginError: failing cannot compile relu: out of registers"


def _model(tmp_path: Path) -> Path:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"), helper.make_node("Neg", ["h"], ["y"], name="neg")],
        "g", [vi("x", onnx.TensorProto.FLOAT, [2, 3])], [vi("y", onnx.TensorProto.FLOAT, [2, 3])])
    path = tmp_path / "relu_neg.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def _section(text: str, title: str) -> list[str]:
    """The lines of the partition report's section that starts with ``title``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return lines[start + 1:end]


@pytest.fixture
def failing(site) -> None:
    site.install("hetero-failing", "1.0", {"failing": FAILING})
    site.load()


def test_the_report_names_the_fallback_as_the_runner_and_gives_the_error(failing, tmp_path: Path) -> None:
    with pytest.warns(CompileFallbackWarning, match="backend failing failed to compile region r0"):
        exe = hetero.compile(str(_model(tmp_path)), targets=["failing"], passes=[])
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(exe.run({"x": x})["y"], -np.maximum(x, 0))
    assert [p.backend for p in exe.placements] == ["llvm_cpu"]
    assert exe.fallbacks == [CompileFallback("r0", "failing", "llvm_cpu", ERROR)]
    data = exe.partition
    assert [r["backend"] for r in data["regions"]] == ["llvm_cpu"]
    assert {row["placed"].get("failing") for row in data["coverage"].values()} == {None}
    assert all("failing" not in (t["from"], t["to"]) for t in data["transfers"])
    assert [m["space"] for m in data["memory"]] == ["llvm_cpu"]
    assert {(c["node"], c["backend"], c["reason"]) for c in data["not_preferred"]} == {
        (node, "llvm_cpu", f"failing failed to compile region r0: {ERROR}") for node in ("relu", "neg")}
    report = exe.report()
    assert _section(report, "regions")[1].split()[:2] == ["r0", "llvm_cpu"]
    assert _section(report, "compile fallbacks") == [
        f"  r0: failing raised {ERROR}; compiled by llvm_cpu instead"]
    assert f"2 nodes (Neg, Relu) -> llvm_cpu: failing failed to compile region r0: {ERROR}" in report


def test_hetero_compile_says_where_the_region_ran(failing, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "m.hetero"
    code = main(["compile", str(_model(tmp_path)), "--targets", "failing", "-o", str(out_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    regions = _section(out, "regions")
    assert [line.split()[:2] for line in regions[1:]] == [["r0", "llvm_cpu"]]
    assert _section(out, "transfers") == ["  none"]
    assert f"fallback  r0: failing raised {ERROR}; compiled by llvm_cpu instead" in out.splitlines()
    assert "hetero compile: warning: backend failing failed to compile region r0" in err
    assert hetero.load(str(out_file)).placements[0].backend == "llvm_cpu"
    summary = next(line for line in out.splitlines() if line.startswith("compiled "))
    assert summary.endswith("; r0 fell back to llvm_cpu")
