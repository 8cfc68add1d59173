"""The compile driver: targets bound to their options, the fallback chosen by declaration."""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path
import re
import warnings

import numpy as np
import pytest

import hetero
from hetero.core.compiler import Session
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.plugin.manager import ENTRY_POINT_GROUP, is_bundled
from hetero.errors import OptionError, PartitionError, PluginError
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.estimate import region_cycles
from tests.plugins.npu_sim.test_compiler_conv import qconv_graph
from toyplugin import plugin_source

X = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)


def relu_tanh() -> Graph:
    """relu -> tanh -> neg: a toy that takes Relu and Neg leaves Tanh to the fallback."""
    b = GraphBuilder("relu_tanh")
    b.output(b.Neg(b.Tanh(b.Relu(b.input("x", (4, 6)), name="relu"), name="tanh"), name="neg"))
    return b.build()


def relu_neg() -> Graph:
    b = GraphBuilder("relu_neg")
    b.output(b.Neg(b.Relu(b.input("x", (4, 6)), name="relu"), name="neg"))
    return b.build()


@pytest.fixture
def toys(site):
    """An accelerator toy taking Relu and Neg, and a third-party CPU toy declaring every op."""
    site.install("hetero-toy-acc", "1.0", {"acc": plugin_source("acc", ops=("Relu", "Neg"))})
    site.install("hetero-toy-cpu", "1.0", {"anycpu": plugin_source("anycpu", every_op=True)})
    return site


def test_no_string_under_core_names_a_bundled_backend() -> None:
    bundled = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if is_bundled(ep)})
    assert {"llvm_cpu", "npu_sim"} <= set(bundled)
    core = Path(hetero.__file__).parent / "core"
    found = [f"{path.relative_to(core)}:{i}: {line.strip()}"
             for path in sorted(core.rglob("*.py"))
             for i, line in enumerate(path.read_text().splitlines(), 1)
             if any(re.search(rf"\b{name}\b", line) for name in bundled)]
    assert not found, "core names a bundled backend:\n" + "\n".join(found)


def test_a_third_party_backend_taking_every_op_is_the_fallback_with_llvm_cpu_disabled(toys) -> None:
    toys.load(deny="llvm_cpu")
    exe = hetero.compile(relu_tanh(), targets=["acc"], passes=[], min_ratio=0.0)
    assert exe.partition["fallback"] == "anycpu"
    assert [p.backend for p in exe.placements] == ["acc", "anycpu", "acc"]
    want = hetero.run_reference(relu_tanh(), {"x": X})
    np.testing.assert_allclose(exe.run({"x": X})["neg"], want["neg"], rtol=1e-6)


def test_a_target_that_takes_the_whole_model_compiles_with_no_fallback_at_all(site) -> None:
    site.install("hetero-toy-acc", "1.0", {"acc": plugin_source("acc", ops=("Relu", "Neg"))})
    site.load(deny="llvm_cpu")
    exe = hetero.compile(relu_neg(), targets=["acc"], passes=[])
    assert exe.partition["fallback"] is None and [p.backend for p in exe.placements] == ["acc"]
    np.testing.assert_array_equal(exe.run({"x": X})["neg"], -np.maximum(X, 0))
    with pytest.raises(PartitionError, match=r"tanh \(Tanh\): no selected backend takes it .*no fallback"):
        hetero.compile(relu_tanh(), targets=["acc"], passes=[])


def test_the_fallback_is_chosen_by_declaration_bundled_first_unless_named(toys) -> None:
    toys.load()
    assert Session(["acc"]).fallback == "llvm_cpu"  # bundled plugins come first
    assert Session(["anycpu"]).fallback == "anycpu"  # a target that takes every op is its own
    named = Session(["acc"], fallback="anycpu")
    assert named.fallback == "anycpu" and named.names == ["acc", "anycpu"]
    with pytest.raises(OptionError, match="npu_sim does not declare that it takes every canonical op"):
        Session(["acc"], fallback="npu_sim")


def test_a_failed_compile_falls_back_to_the_declared_fallback(site) -> None:
    exploding = """\
        class Exploding(ToyBackend):
            def compile(self, subgraph, target):
                raise RuntimeError("codegen exploded")

        ToyBackend = Exploding
        """
    site.install("hetero-toy-bad", "1.0", {"bad": plugin_source("bad", ops=("Relu", "Neg"), body=exploding)})
    site.install("hetero-toy-cpu", "1.0", {"anycpu": plugin_source("anycpu", every_op=True)})
    site.load(deny="llvm_cpu")
    with pytest.warns(hetero.core.compiler.CompileFallbackWarning, match="anycpu compiles it instead"):
        exe = hetero.compile(relu_neg(), targets=["bad"], passes=[])
    assert [(f.backend, f.fallback) for f in exe.fallbacks] == [("bad", "anycpu")]
    np.testing.assert_array_equal(exe.run({"x": X})["neg"], -np.maximum(X, 0))


def test_a_misspelt_option_names_itself_and_its_nearest_match() -> None:
    with pytest.raises(OptionError, match=r"unknown compile option 'npu_sram_kb' \(did you mean 'npu_sram_kib'\?\)"):
        hetero.compile(relu_neg(), targets=["npu_sim"], npu_sram_kb=64)
    with pytest.raises(OptionError, match="option 'npu_sram_kib' is npu_sim's.*add npu_sim to the targets"):
        hetero.compile(relu_neg(), targets=["llvm_cpu"], npu_sram_kib=64)
    with pytest.raises(OptionError, match="option num_threads of backend llvm_cpu takes int, got 'two'"):
        hetero.compile(relu_neg(), num_threads="two")
    with pytest.raises(OptionError, match="npu_preset of backend npu_sim takes one of .*'tiny-64k'"):
        hetero.compile(relu_neg(), targets=["npu_sim"], npu_preset="tiny64k")
    with pytest.raises(OptionError, match="npu_sim refuses its options: npu_sim: npu_sram_kib must be at least 4"):
        Session(["npu_sim"], options={"npu_sram_kib": 2})


def test_npu_sim_plans_and_builds_for_the_sram_its_option_declares() -> None:
    graph = qconv_graph(1, 64, (28, 28), 64, 3, pad=1, seed=3)
    small = Session(["npu_sim"], options={"npu_sram_kib": 64})
    default = Session(["npu_sim"])
    part = small.partition(graph)
    [region] = part.regions
    target = part.assignment.annotation.backend("npu_sim")
    sram = {level.name: level.capacity_bytes for level in target.memory.levels}["SRAM"]
    assert sram == 64 * 1024
    config = NpuConfig.from_options({"npu_sram_kib": 64})
    assert part.estimates[region.name] == pytest.approx(config.cycles_to_seconds(region_cycles(graph, config)))
    assert part.estimates[region.name] != default.partition(graph).estimates[region.name]
    devices = {d["backend"]: d for d in part.to_dict()["devices"]}
    assert devices["npu_sim"]["options"] == {"npu_sram_kib": 64}
    assert {"level": "SRAM", "capacity_bytes": 65536} == {k: v for k, v in devices["npu_sim"]["memory"][1].items()
                                                          if k != "bandwidth_gbps"}
    assert "npu_sim: DRAM 4 GiB > SRAM 64 KiB > ACC 8 KiB" in part.report()
    exe = small.compile(graph)
    assert exe.placements[0].part.config.sram_bytes == 64 * 1024
    x = np.random.default_rng(0).integers(-128, 128, graph.inputs[0].shape).astype(np.int8)
    np.testing.assert_array_equal(exe.run({graph.inputs[0].name: x})[graph.outputs[0].name],
                                  hetero.run_reference(graph, {graph.inputs[0].name: x})[graph.outputs[0].name])


def test_options_reach_only_the_targets_that_declare_them() -> None:
    session = Session(["npu_sim"], options={"npu_preset": "tiny-64k", "num_threads": 1})
    npu, cpu = session.target("npu_sim"), session.target("llvm_cpu")
    assert (npu.given, npu.options["npu_preset"]) == ({"npu_preset"}, "tiny-64k")
    assert (cpu.given, cpu.options["num_threads"]) == ({"num_threads"}, 1)
    assert npu.settings == NpuConfig.from_options({"npu_preset": "tiny-64k"})


def test_no_targets_means_the_fallback_alone() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exe = hetero.compile(relu_neg())
    assert [p.backend for p in exe.placements] == ["llvm_cpu"]


def test_a_plugin_whose_hooks_match_no_api_form_is_reported_broken(site) -> None:
    site.install("hetero-old", "1.0", {"old": """\
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.plugin import Backend, Support, hookimpl


class Old(Backend):
    name = "old"
    version = "1.0"
    device_kind = "cpu"
    peak_gflops = 1.0
    memory = MemoryHierarchy([MemoryLevel("DRAM", 2**30, 10.0, 100.0)])
    supported_ops = frozenset({"Relu"})

    def supports(self, node):
        return Support.yes()

    def compile(self):
        raise NotImplementedError

    def load_artifact(self, artifact):
        raise NotImplementedError


@hookimpl
def hetero_backends():
    return [Old()]
"""})
    with pytest.warns(UserWarning, match="old"):
        plugins = site.load()
    [record] = [r for r in plugins.records if r.name == "old"]
    assert record.status == "broken"
    # compile() cannot be adapted, so supports(node), which could, is listed with it.
    assert "compile(self) cannot take what hetero passes (compile(subgraph, target))" in record.error
    assert "supports(self, node) -> write supports(self, node, target)" in record.error
    with pytest.raises(PluginError, match=r"backend 'old' is broken: plugin old \(hetero-old 1.0\)"):
        Session(["old"])
