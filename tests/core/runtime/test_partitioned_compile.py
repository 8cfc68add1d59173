"""hetero.compile across several backends: an installed toy plugin taking a subset of
ops plus llvm_cpu; transfers at run time, fallback, strictness, save and load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import toyplugin
from toyplugin import plugin_source

import hetero
from hetero.core.compiler import CompileFallbackWarning
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.partition.transfers import TransferStep
from hetero.core.plugin.manager import get_backend
from hetero.errors import PluginError, UnsupportedOpError

#: A toy plugin whose codegen always raises.
EXPLODING = """\
import toyplugin


class ToyBackend(toyplugin.ToyBackend):
    def compile(self, subgraph, target):
        raise RuntimeError("toy codegen exploded")
"""


def split_graph() -> Graph:
    """add, neg (toy) -> tanh (llvm_cpu only) -> relu, sum (toy); sum also reads neg,
    so the toy nodes form two regions around the Tanh."""
    b = GraphBuilder("split")
    x = b.input("x", (2, 3))
    neg = b.Neg(b.Add(x, np.arange(3, dtype=np.float32), name="add"), name="neg")
    relu = b.Relu(b.Tanh(neg, name="tanh"), name="relu")
    b.output(b.Add(relu, neg, name="sum"))
    return b.build()


def x_input() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}


@pytest.fixture
def toy(site):
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu", ops=("Add", "Neg", "Relu"))})
    site.load()
    return site


def compile_split(**options: object) -> hetero.Executable:
    # min_ratio=0 keeps the tiny toy regions, which the estimates would return to llvm_cpu.
    return hetero.compile(split_graph(), targets=["toy_cpu"], passes=[], min_ratio=0.0, **options)


def test_a_model_split_across_toy_and_llvm_cpu_matches_the_reference(toy) -> None:
    exe = compile_split()
    assert [(p.region, p.backend) for p in exe.placements] == [
        ("r0", "toy_cpu"), ("r1", "llvm_cpu"), ("r2", "toy_cpu")]
    # The partition's transfers: x from the home backend (llvm_cpu) into toy_cpu, neg to
    # llvm_cpu for tanh (r2 reads neg where r0 left it), tanh back, and the output home.
    assert [(p.transfers_in, p.transfers_out) for p in exe.placements] == [
        ((TransferStep("x", "llvm_cpu", "toy_cpu"),), ()),
        ((TransferStep("neg", "toy_cpu", "llvm_cpu"),), ()),
        ((TransferStep("tanh", "llvm_cpu", "toy_cpu"),), (TransferStep("sum", "toy_cpu", "llvm_cpu"),))]
    expected = hetero.run_reference(split_graph(), x_input())["sum"]
    np.testing.assert_allclose(exe.run(x_input())["sum"], expected, rtol=1e-6, atol=1e-6)


def test_report_shows_the_partition_then_parts_with_times_and_no_copy_between_host_parts(toy) -> None:
    exe = compile_split()
    assert "regions (in execution order)" in exe.report() and "not run yet" in exe.report()
    exe.run(x_input())
    exe.run(x_input())
    report = exe.report()
    partition_at, times_at = report.index("regions (in execution order)"), report.index("executable split")
    assert partition_at < times_at
    assert "tanh (Tanh) -> llvm_cpu: toy_cpu does not implement Tanh" in report
    # The times table ends at the first blank line; the parts' own reports follow it.
    table = report[times_at:].split("\n\n")[0]
    rows = {line.split()[0] + " " + line.split()[1]: line.split() for line in table.splitlines()[2:]}
    for entry in ("r0 toy_cpu:part", "r2 toy_cpu:part"):
        assert entry in rows, entry
    assert rows["r0 toy_cpu:part"][2] == "2"
    # toy_cpu and llvm_cpu parts both run on the host: the planned transfers move nothing.
    assert "of which transfers" not in report and not any(k.startswith("transfer") for k in rows)
    shares = [float(row[-1].rstrip("%")) for row in rows.values()]
    assert sum(shares) == pytest.approx(100.0, abs=0.5)
    assert exe.partition["regions"][1]["nodes"] == ["tanh"]


def test_a_backend_that_raises_falls_back_with_a_warning_and_a_report_entry(site) -> None:
    site.install("hetero-bad", "1.0", {"bad": plugin_source("bad_toy", body=EXPLODING)})
    site.load()
    with pytest.warns(CompileFallbackWarning) as caught:
        exe = hetero.compile(split_graph(), targets=["bad_toy"], passes=[], min_ratio=0.0)
    assert [str(w.message) for w in caught] == [
        f"backend bad_toy failed to compile region {r} of split: RuntimeError: toy codegen exploded; "
        "llvm_cpu compiles it instead" for r in ("r0", "r2")]
    assert {p.backend for p in exe.placements} == {"llvm_cpu"}
    assert all(not p.transfers_in for p in exe.placements)
    report = exe.report()
    assert "compile fallbacks" in report
    for region in ("r0", "r2"):
        assert f"{region}: bad_toy raised RuntimeError: toy codegen exploded; compiled by llvm_cpu instead" in report
    expected = hetero.run_reference(split_graph(), x_input())["sum"]
    np.testing.assert_allclose(exe.run(x_input())["sum"], expected, rtol=1e-6, atol=1e-6)


def test_strict_turns_a_compile_failure_into_an_error(site) -> None:
    site.install("hetero-bad", "1.0", {"bad": plugin_source("bad_toy", ops=("Add", "Neg"), body=EXPLODING)})
    site.load()
    g = GraphBuilder("chain")
    g.output(g.Neg(g.input("x", (4,)), name="n"))
    with pytest.raises(PluginError, match=r"bad_toy failed to compile region r0 of chain .*first n\): "
                                          "RuntimeError: toy codegen exploded"):
        hetero.compile(g.build(), targets=["bad_toy"], strict=True)


def test_a_region_pinned_by_an_override_does_not_fall_back_when_its_compile_fails(site) -> None:
    site.install("hetero-bad", "1.0", {"bad": plugin_source("bad_toy", ops=("Add", "Neg"), body=EXPLODING)})
    site.load()
    g = GraphBuilder("chain")
    g.output(g.Neg(g.input("x", (4,)), name="n"))
    with pytest.raises(PluginError, match=r"bad_toy failed to compile region r0 of chain .*toy codegen "
                                          r"exploded; override 'n' -> bad_toy pins its nodes there"):
        hetero.compile(g.build(), targets=["bad_toy", "llvm_cpu"], overrides={"n": "bad_toy"})


def test_strict_turns_a_refusal_into_an_error_naming_node_and_reason(toy) -> None:
    with pytest.raises(UnsupportedOpError, match=r"backend toy_cpu refuses 1 node\(s\) of split: "
                                                 r"tanh \(Tanh\): toy_cpu does not implement Tanh"):
        compile_split(strict=True)


def test_a_saved_partitioned_executable_loads_and_runs_without_compiling(
    toy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    exe = compile_split()
    path = tmp_path / "split.hetero"
    exe.save(path)

    def refuse(*args: object) -> None:
        raise AssertionError("load must not compile")

    monkeypatch.setattr(toyplugin.ToyBackend, "compile", refuse)
    monkeypatch.setattr(type(get_backend("llvm_cpu")), "compile", refuse)
    again = hetero.load(path)
    assert [(p.region, p.backend, p.transfers_in, p.transfers_out) for p in again.placements] == [
        (p.region, p.backend, p.transfers_in, p.transfers_out) for p in exe.placements]
    assert again.partition == exe.partition and again.partition_report == exe.partition_report
    np.testing.assert_array_equal(again.run(x_input())["sum"], exe.run(x_input())["sum"])
    assert "r2 toy_cpu:part" in again.report()
