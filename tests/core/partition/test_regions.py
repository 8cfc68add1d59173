"""merge_regions() and return_small_regions(), and the Partition they make.

Backends are real installed plugins (the ``site`` fixture) beside the bundled
llvm_cpu fallback, except where a test needs a backend of its own speed.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from models import light_model_path
from toyplugin import ToyBackend, plugin_source

import hetero
from hetero import GraphBuilder
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.ir.pattern import Op, Var
from hetero.core.partition import annotate, assign, merge_regions, partition_graph
from hetero.core.plugin import Pattern, get_backend
from hetero.errors import PartitionError


@pytest.fixture
def acc(site):
    """An installed accelerator plugin taking Relu, Add and Conv, and llvm_cpu."""
    site.install("hetero-acc", "1.0", {"acc": plugin_source("acc", ops=("Relu", "Add", "Conv"))})
    site.load()
    return [get_backend("acc"), get_backend("llvm_cpu")]


def diamond():
    """A → B, A → C, B → D, C → D: B is a Neg, which the accelerator refuses."""
    b = GraphBuilder("diamond")
    x = b.input("x", (1, 256))
    a = b.Relu(x, name="A")
    b.output(b.Add(b.Neg(a, name="B"), b.Relu(a, name="C"), name="D"))
    return b.build()


def regions_of(part):
    return [(r.backend, r.node_names) for r in part.regions]


def run_in_order(part, inputs):
    """Run each region's subgraph with the reference executor, in the partition's order."""
    env = dict(inputs)
    for region in part.regions:
        sub = hetero.verify(part.subgraph(region))
        env.update(hetero.run_reference(sub, {v.name: env[v.name] for v in sub.inputs}))
    return {v.name: env[v.name] for v in part.graph.outputs}


def test_the_diamond_splits_instead_of_making_a_cycle(acc) -> None:
    part = partition_graph(diamond(), acc, min_ratio=0)
    assert regions_of(part) == [("acc", ("A", "C")), ("llvm_cpu", ("B",)), ("acc", ("D",))]
    assert nx.is_directed_acyclic_graph(part.quotient())
    assert next(iter(nx.topological_sort(part.quotient()))) == "r0"


def test_the_compile_units_are_the_regions_or_the_whole_graph_when_one_backend_has_them_all(acc) -> None:
    part = partition_graph(diamond(), acc, min_ratio=0)
    assert [(u.region, u.backend, u.graph.name) for u in part.units()] == [
        (r.name, r.backend, part.subgraph(r).name) for r in part.regions]
    b = GraphBuilder("apart")
    b.output(b.Neg(b.input("x", (1, 256)), name="nx"))
    b.output(b.Neg(b.input("y", (1, 256)), name="ny"))
    apart = partition_graph(b.build(), acc, min_ratio=0)
    assert [r.backend for r in apart.regions] == ["llvm_cpu", "llvm_cpu"]
    assert apart.units() == [("r0+r1", "llvm_cpu", apart.graph)]


def test_a_chain_partitions_into_runs_of_one_backend(acc) -> None:
    b = GraphBuilder("chain")
    v = b.input("x", (4, 256))
    for i, op in enumerate(["Relu", "Relu", "Neg", "Neg", "Relu"]):
        v = b.op(op, v, name=f"n{i}")
    b.output(v)
    part = partition_graph(b.build(), acc, min_ratio=0)
    assert regions_of(part) == [("acc", ("n0", "n1")), ("llvm_cpu", ("n2", "n3")), ("acc", ("n4",))]


def test_every_region_verifies_and_running_them_in_order_matches_the_reference(acc) -> None:
    part = partition_graph(diamond(), acc, min_ratio=0)
    x = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
    want = hetero.run_reference(part.graph, {"x": x})
    got = run_in_order(part, {"x": x})
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


def test_subgraph_has_the_region_inputs_outputs_and_copied_constants(acc) -> None:
    b = GraphBuilder("g")
    x = b.input("x", (1, 4))
    h = b.Add(b.Neg(x, name="neg"), np.full((1, 4), 2.0, np.float32), name="add")
    b.output(b.Relu(h, name="relu"))
    part = partition_graph(b.build(), acc, min_ratio=0)
    region = part.regions[1]
    assert region.node_names == ("add", "relu")
    sub = hetero.verify(part.subgraph(region))
    assert [v.name for v in sub.inputs] == ["neg"] and [v.name for v in sub.outputs] == ["relu"]
    assert next(iter(sub.constants.values())).tolist() == [[2.0] * 4]


def test_small_islands_return_to_the_fallback_unless_the_threshold_keeps_them(acc) -> None:
    # One Relu between Negs: its 8 KiB at 20 GB/s compute for 0.41 µs, and moving its
    # 4 KiB in and out costs 2 x 0.305 µs, so at ratio 1 (and the default 4) it does not
    # pay, at 0.5 it does.
    b = GraphBuilder("island")
    v = b.Neg(b.input("x", (1, 1024)), name="n0")
    b.output(b.Neg(b.Relu(v, name="relu"), name="n2"))
    graph = b.build()
    kept = partition_graph(graph, acc, min_ratio=0.5)
    assert [r.backend for r in kept.regions] == ["llvm_cpu", "acc", "llvm_cpu"]
    back = partition_graph(graph, acc, min_ratio=1.0)
    assert regions_of(back) == [("llvm_cpu", ("n0", "relu", "n2"))]
    reason = back.assignment.choices["relu"].reason
    assert reason.startswith("returned to llvm_cpu: its acc region of 1 node(s) computes 0.41 µs")
    assert "less than 1 x its 0.61 µs of transfers" in reason
    assert regions_of(partition_graph(graph, acc)) == regions_of(back)
    assert reason in back.report()


def test_an_accepted_composite_lands_in_one_region_with_a_node_taken_only_inside_it() -> None:
    acc = ToyBackend("acc", ops=("Relu",))
    acc.patterns = (Pattern("neg_relu", Op("Relu", Op("Neg", Var("x")))),)
    cpu = ToyBackend("cpu", ops=("Relu", "Neg"))
    b = GraphBuilder("g")
    b.output(b.Neg(b.Relu(b.Neg(b.input("x", (1, 8)), name="n0"), name="n1"), name="n2"))
    graph = b.build()
    assignment = assign(annotate(graph, [acc, cpu]), fallback="cpu")
    assert [c.nodes for c in assignment.composites()] == [("n0", "n1")]
    assert [(r.backend, r.node_names) for r in merge_regions(graph, assignment)] == [
        ("acc", ("n0", "n1")), ("cpu", ("n2",))]


def test_squeezenet_splits_between_conv_relu_plugin_and_llvm_cpu_acyclically(site) -> None:
    site.install("hetero-cr", "1.0", {"cr": plugin_source("conv_relu", ops=("Conv", "Relu"))})
    site.load()
    model = randomize_weights(read_model(light_model_path("squeezenet")).model, 0)
    graph = hetero.optimize(hetero.load_onnx(model))
    part = partition_graph(graph, [get_backend("conv_relu"), get_backend("llvm_cpu")])
    assert nx.is_directed_acyclic_graph(part.quotient())
    assert len(part.regions) > 2
    assert {r.backend for r in part.regions} == {"conv_relu", "llvm_cpu"}
    for node in graph.nodes:
        if node.op not in ("Conv", "Relu"):
            assert part.assignment.backend_of(node.name) == "llvm_cpu"
    assert sorted(n.name for r in part.regions for n in r.nodes) == sorted(n.name for n in graph.nodes)
    for region in part.regions:
        hetero.verify(part.subgraph(region))


def test_an_override_keeps_a_one_node_island_on_its_backend() -> None:
    # The lone Relu between Negs is too small to pay for its transfers (as in the test
    # above), so without the override it returns to the fallback; pinned, it stays.
    acc = ToyBackend("acc", ops=("Relu",))
    cpu = ToyBackend("cpu", ops=("Relu", "Neg"))
    b = GraphBuilder("island")
    v = b.Neg(b.input("x", (1, 1024)), name="n0")
    b.output(b.Neg(b.Relu(v, name="relu"), name="n2"))
    graph = b.build()
    assert regions_of(partition_graph(graph, [acc, cpu], fallback="cpu")) == [("cpu", ("n0", "relu", "n2"))]
    for key in ("relu", "Relu"):
        part = partition_graph(graph, [acc, cpu], fallback="cpu", overrides={key: "acc"})
        assert regions_of(part) == [("cpu", ("n0",)), ("acc", ("relu",)), ("cpu", ("n2",))]
        assert part.assignment.pins["relu"].backend == "acc"
        assert part.assignment.backend_of("relu") == "acc"


def test_reassign_refuses_to_move_a_pinned_node() -> None:
    acc = ToyBackend("acc", ops=("Relu",))
    cpu = ToyBackend("cpu", ops=("Relu", "Neg"))
    b = GraphBuilder("g")
    b.output(b.Relu(b.input("x", (1, 8)), name="relu"))
    pinned = assign(annotate(b.build(), [acc, cpu]), overrides={"relu": "acc"}, fallback="cpu")
    with pytest.raises(PartitionError, match="override 'relu' -> acc: node relu would be moved to cpu"):
        pinned.reassign({"relu": ("cpu", "because")})
