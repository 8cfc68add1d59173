"""`hetero partition`: the text report and the JSON, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest
from toyplugin import hetero_environment, plugin_source, run_hetero, write_distribution



@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("site")
    write_distribution(path, "hetero-cr", "1.0", {"cr": "partition_cli_plugin"},
                       {"partition_cli_plugin": plugin_source("conv_relu", ops=("Conv", "Relu"))})
    return path


def hetero(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_hetero(site, "partition", *args)


def test_text_report_shows_coverage_regions_transfers_and_reasons(site: Path) -> None:
    done = hetero(site, "light:squeezenet", "--targets", "conv_relu")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("partition of squeezenet_old: 67 nodes in ")
    assert "over conv_relu, llvm_cpu; policy priority, fallback llvm_cpu" in out
    for section in ("coverage (nodes each backend", "regions (in execution order)", "transfers",
                    "not on the preferred backend (conv_relu)"):
        assert section in out
    assert "  Conv               26     26/26      26/26     conv_relu 26" in out
    assert "-> llvm_cpu: conv_relu does not implement Concat" in out


def test_json_report_is_complete_and_its_regions_form_a_dag(site: Path) -> None:
    done = hetero(site, "light:squeezenet", "--targets", "conv_relu", "--policy", "cost",
                  "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["targets"], report["policy"]) == (["conv_relu", "llvm_cpu"], "cost")
    assert report["coverage"]["Concat"] == {"nodes": 8, "supported": {"conv_relu": 0, "llvm_cpu": 8},
                                            "placed": {"llvm_cpu": 8}}
    owner = {n: r["name"] for r in report["regions"] for n in r["nodes"]}
    assert len(owner) == 67
    dag = nx.DiGraph()
    dag.add_nodes_from(r["name"] for r in report["regions"])
    for t in report["transfers"]:
        if t["src_region"] and t["dst_region"]:
            dag.add_edge(t["src_region"], t["dst_region"])
    assert nx.is_directed_acyclic_graph(dag)
    assert all(m["reason"] for m in report["not_preferred"])
    # The same command gives the same report, byte for byte.
    assert hetero(site, "light:squeezenet", "--targets", "conv_relu", "--policy", "cost",
                  "--format", "json").stdout == done.stdout


def test_overrides_and_their_errors(site: Path) -> None:
    done = hetero(site, "light:squeezenet", "--targets", "conv_relu", "--override", "Relu=llvm_cpu",
                  "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["coverage"]["Relu"]["placed"] == {"llvm_cpu": 26}
    bad = hetero(site, "light:squeezenet", "--targets", "conv_relu", "--override", "Conv=nope")
    assert bad.returncode == 2
    assert "hetero partition: error: override 'Conv' -> 'nope': 'nope' is not a selected backend" in bad.stderr


def test_the_partition_shown_is_the_one_compile_builds(tmp_path: Path) -> None:
    """A target that takes every node keeps the graph whole in ``hetero.compile`` even
    where the small-island rule would hand tiny regions back; ``hetero partition`` shows
    that same partition (it showed the regions returned to llvm_cpu)."""
    import onnx
    from onnx import TensorProto, helper

    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site, "hetero-all", "1.0", {"all": "partition_all_plugin"},
                       {"partition_all_plugin": plugin_source("takes_all", ops=("Relu", "Neg"))})
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])],
                              "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "tiny.onnx")
    done = run_hetero(site, "partition", str(tmp_path / "tiny.onnx"), "--targets", "takes_all",
                      "--format", "json")
    assert done.returncode == 0, done.stderr
    shown = [(r["backend"], sorted(r["nodes"])) for r in json.loads(done.stdout)["regions"]]
    script = ("import json, sys, hetero; exe = hetero.compile(sys.argv[1], targets=['takes_all']); "
              "print(json.dumps([(r['backend'], sorted(r['nodes'])) for r in exe.partition['regions']]))")
    built = subprocess.run([sys.executable, "-c", script, str(tmp_path / "tiny.onnx")],
                           capture_output=True, text=True, env=hetero_environment(site), check=True)
    assert [tuple(r) for r in json.loads(built.stdout)] == [tuple(r) for r in shown]
    assert {backend for backend, _ in shown} == {"takes_all"}
