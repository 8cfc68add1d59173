"""compare_regions() and `hetero compare`: every region on its backend against the reference.

The backends are installed plugins: a correct toy accelerator, and one with a planted
wrong kernel (its Relu adds 1), beside the bundled llvm_cpu fallback.
"""

from __future__ import annotations

import json
import math
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import tiny_model
from toyplugin import plugin_source, run_hetero, write_distribution

from hetero import GraphBuilder
from hetero.core.partition import partition_graph
from hetero.core.plugin import get_backend
from hetero.core.runtime.compare import (
    compare_regions,
    describe_comparison,
    first_beyond,
    format_comparison,
)
from hetero.errors import PartitionError


#: A plugin whose Relu kernel is wrong by exactly 1; every other op is right.
WRONG_RELU = textwrap.dedent("""\
    import numpy as np
    from hetero.core.ir.opdef import get_op
    from hetero.core.memory import MemoryHierarchy, MemoryLevel
    from hetero.core.plugin import hookimpl
    from toyplugin import ToyBackend, ToyPart


    class WrongReluPart(ToyPart):
        def run(self, inputs):
            env = self.run_intermediates(inputs)
            return {name: env[name] for name in self.outputs}

        def run_intermediates(self, inputs):
            env = {name: np.asarray(inputs[name]) for name in self.inputs}
            for name, c in self.program["constants"].items():
                env[name] = np.array(c["data"], dtype=c["dtype"]).reshape(c["shape"])
            for node in self.program["nodes"]:
                args = [env[n] if n is not None else None for n in node["inputs"]]
                [(name, dtype)] = node["outputs"]
                [result] = get_op(node["op"]).reference(args, node["attrs"])
                env[name] = np.asarray(result + (1 if node["op"] == "Relu" else 0)).astype(dtype)
            return {node["outputs"][0][0]: env[node["outputs"][0][0]] for node in self.program["nodes"]}


    class WrongRelu(ToyBackend):
        def compile(self, subgraph, target):
            return WrongReluPart(super().compile(subgraph, target).program)


    @hookimpl
    def hetero_backends():
        memory = MemoryHierarchy([MemoryLevel("DRAM", 2**30, 20.0, 100.0)])
        return [WrongRelu("bad", ops=("Conv", "Relu", "Add"), memory=memory)]
    """)

#: A plugin that takes Relu and Add and raises whenever it compiles.
FAILS_TO_COMPILE = textwrap.dedent("""\
    from hetero.core.memory import MemoryHierarchy, MemoryLevel
    from hetero.core.plugin import hookimpl
    from toyplugin import ToyBackend


    class Broken(ToyBackend):
        def compile(self, subgraph, target):
            raise RuntimeError("no kernel for " + subgraph.name)


    @hookimpl
    def hetero_backends():
        memory = MemoryHierarchy([MemoryLevel("DRAM", 2**30, 20.0, 100.0)])
        return [Broken("broken", ops=("Relu", "Add"), memory=memory)]
    """)


def install(path: Path) -> None:
    write_distribution(path, "hetero-cmp", "1.0",
                       {"good": "cmp_good", "bad": "cmp_bad", "broken": "cmp_broken"},
                       {"cmp_good": plugin_source("good", ops=("Conv", "Relu", "Add")),
                        "cmp_bad": WRONG_RELU, "cmp_broken": FAILS_TO_COMPILE})


@pytest.fixture
def plugins(site):
    install(site.path)
    site.load()


def chain():
    """x → Relu A → Neg B → Relu C → Add D(C, A): the accelerators take A and C, D."""
    b = GraphBuilder("chain")
    x = b.input("x", (2, 64))
    a = b.Relu(x, name="A")
    c = b.Relu(b.Neg(a, name="B"), name="C")
    b.output(b.Add(c, a, name="D"))
    return b.build()


def compare(target: str):
    graph = chain()
    part = partition_graph(graph, [get_backend(target), get_backend("llvm_cpu")], min_ratio=0)
    assert [(r.backend, r.node_names) for r in part.regions] == [
        (target, ("A",)), ("llvm_cpu", ("B",)), (target, ("C", "D"))]
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    return compare_regions(graph, part, {"x": x}, rtol=1e-3, atol=1e-4)


def test_a_correct_split_is_within_tolerance_in_every_region(plugins) -> None:
    results = compare("good")
    assert [(r.region, r.backend, r.ok) for r in results] == [
        ("r0", "good", True), ("r1", "llvm_cpu", True), ("r2", "good", True)]
    assert [[o.value for o in r.outputs] for r in results] == [["A"], ["B"], ["D"]]
    assert all(r.max_abs_error == 0.0 for r in results)
    assert first_beyond(results) is None
    assert format_comparison(results, 1e-3, 1e-4).endswith("all 3 region(s) within tolerance")


def test_the_planted_wrong_relu_is_named_as_the_first_region_beyond_tolerance(plugins) -> None:
    results = compare("bad")
    bad = first_beyond(results)
    assert (bad.region, bad.backend) == ("r0", "bad")
    # Relu + 1 against Relu: the error is exactly 1 everywhere.
    assert bad.max_abs_error == pytest.approx(1.0)
    # The CPU region ran on the reference's captured inputs, so the error stops at r0.
    assert results[1].ok and results[1].max_abs_error == 0.0
    # r2 has its own wrong Relu (C) before the Add: it is beyond tolerance as well.
    assert not results[2].ok and results[2].max_abs_error == pytest.approx(1.0)
    text = format_comparison(results, 1e-3, 1e-4)
    assert text.splitlines()[-1].startswith("first region beyond tolerance: r0 on bad (max abs err 1,")


def test_a_backend_exposing_intermediates_has_its_error_charged_to_the_node(plugins) -> None:
    results = compare("bad")
    # r2 = {C, D}: C is an intermediate of the region, and the first node beyond tolerance.
    [inner] = results[2].intermediates
    assert (inner.node, inner.value, inner.ok) == ("C", "C", False)
    assert inner.max_abs_error == pytest.approx(1.0)
    assert results[2].first_node_beyond is inner
    assert results[0].first_node_beyond.node == "A"  # r0's only node is its output
    text = format_comparison(results, 1e-3, 1e-4)
    assert "  node C -> C" in text and "BEYOND (first in region)" in text
    assert text.splitlines()[-1].endswith(", first at node A (A)")
    data = describe_comparison(results, 1e-3, 1e-4)
    assert data["first_node_beyond_tolerance"] == "A"
    assert [(o["node"], o["ok"]) for o in data["regions"][2]["intermediates"]] == [("C", False)]


def test_llvm_cpu_exposes_the_output_of_every_kernel(plugins) -> None:
    b = GraphBuilder("steps")
    x = b.input("x", (1, 4, 8, 8))
    w = b.constant(np.random.default_rng(1).standard_normal((4, 4, 3, 3)).astype(np.float32), "w")
    y = b.Conv(x, w, pads=(1, 1, 1, 1), name="conv")
    y = b.Softmax(b.Relu(y, name="relu"), axis=1, name="softmax")
    b.output(b.Neg(y, name="neg"))
    graph = b.build()
    part = partition_graph(graph, [get_backend("llvm_cpu")])
    x = np.random.default_rng(2).standard_normal((1, 4, 8, 8)).astype(np.float32)
    [region] = compare_regions(graph, part, {"x": x})
    assert region.ok and region.intermediates
    assert all(o.ok and o.node in {"conv", "relu", "softmax"} for o in region.intermediates)
    assert [o.node for o in region.outputs] == ["neg"]


def test_a_backend_that_fails_to_compile_is_reported_and_the_rest_still_compared(plugins) -> None:
    results = compare("broken")
    assert [r.ok for r in results] == [False, True, False]
    assert results[0].error == "RuntimeError: no kernel for chain.r0"
    assert math.isinf(results[0].max_abs_error)
    data = describe_comparison(results, 1e-3, 1e-4)
    assert data["first_beyond_tolerance"] == "r0"
    assert data["regions"][0]["max_abs_error"] is None
    json.dumps(data, allow_nan=False)


def test_tolerances_decide_and_nan_or_inf_are_handled(plugins) -> None:
    from hetero.core.runtime.compare import _compare

    want = np.array([1.0, 2.0, np.inf, np.nan], dtype=np.float32)
    close = _compare("v", want + np.float32(1e-4) * np.array([1, 1, 0, 0], np.float32), want, 1e-3, 0)
    assert close.ok and close.max_abs_error == pytest.approx(1e-4, rel=1e-2)
    far = _compare("v", np.array([1.0, 2.0, np.inf, 0.0], np.float32), want, 1e-3, 1e-4)
    assert not far.ok and math.isinf(far.max_abs_error) and math.isinf(far.max_rel_error)
    shape = _compare("v", np.zeros(3, np.float32), want, 1e-3, 1e-4)
    assert not shape.ok and shape.problem == "shape [3], the reference has [4]"


def test_the_partition_must_be_of_the_graph_compared(plugins) -> None:
    part = partition_graph(chain(), [get_backend("llvm_cpu")])
    with pytest.raises(PartitionError, match="the partition is of graph chain, not of the graph chain"):
        compare_regions(chain(), part, {"x": np.zeros((2, 64), np.float32)})


@pytest.fixture(scope="module")
def cli_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("site")
    install(path)
    # Convolutions compute enough to pay for their transfers, so the default
    # partition keeps the accelerator regions: r0 = {A, B}, r1 = {C}, r2 = {D, E}.
    rng = np.random.default_rng(0)
    weights = [onnx.numpy_helper.from_array(rng.standard_normal((8, 8, 3, 3)).astype(np.float32), w)
               for w in ("w1", "w2")]
    nodes = [onnx.helper.make_node("Conv", ["x", "w1"], ["a"], name="A", pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["a"], ["b"], name="B"),
             onnx.helper.make_node("Neg", ["b"], ["c"], name="C"),
             onnx.helper.make_node("Conv", ["c", "w2"], ["d"], name="D", pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["d"], ["e"], name="E")]
    model = tiny_model(nodes, {"x": (onnx.TensorProto.FLOAT, [1, 8, 16, 16])}, ["e"], weights)
    onnx.save(model, path / "chain.onnx")
    return path


def hetero(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_hetero(site, "compare", str(site / "chain.onnx"), *args)


def test_cli_text_names_the_first_region_beyond_tolerance_and_exits_1(cli_site: Path) -> None:
    bad = hetero(cli_site, "--targets", "bad")
    assert bad.returncode == 1, bad.stderr
    lines = bad.stdout.splitlines()
    assert lines[0].startswith("model     ") and lines[0].endswith("5 nodes in 3 region(s) over bad, llvm_cpu")
    assert lines[1] == "per-region comparison with the reference (rtol 0.001, atol 0.0001)"
    assert lines[-1].startswith("first region beyond tolerance: r0 on bad")
    good = hetero(cli_site, "--targets", "good")
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[-1] == "all 3 region(s) within tolerance"


def test_cli_json_reports_every_region_and_its_outputs(cli_site: Path) -> None:
    done = hetero(cli_site, "--targets", "bad", "--json", "--atol", "2", "--rtol", "0")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["targets"], report["ok"], report["first_beyond_tolerance"]) == (
        ["bad", "llvm_cpu"], True, None)
    assert [(r["region"], r["backend"], r["nodes"]) for r in report["regions"]] == [
        ("r0", "bad", 2), ("r1", "llvm_cpu", 1), ("r2", "bad", 2)]
    [out] = report["regions"][0]["outputs"]
    assert (out["value"], out["ok"], out["problem"]) == ("b", True, None)
    assert out["max_abs_error"] == pytest.approx(1.0)
    # Relu's zeros are left out of the relative error: it stays finite and below 1 / atol.
    assert 0 < out["max_rel_error"] < 0.5
    strict = json.loads(hetero(cli_site, "--targets", "bad", "--json").stdout)
    assert (strict["ok"], strict["first_beyond_tolerance"]) == (False, "r0")
