"""assign(): priority and cost policies, overrides, and the reasons recorded."""

from __future__ import annotations

import numpy as np
import pytest
from toyplugin import ToyBackend

from hetero import GraphBuilder
from hetero.core.ir.pattern import Op, Var
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.partition import annotate, assign
from hetero.core.plugin import Pattern
from hetero.errors import PartitionError


def toy(name, ops, peak_gflops=10.0, bandwidth_gbps=20.0):
    backend = ToyBackend(name, ops=ops, memory=MemoryHierarchy(
        [MemoryLevel("DRAM", 2**30, bandwidth_gbps=bandwidth_gbps, latency_ns=100.0)]))
    backend.peak_gflops = peak_gflops
    return backend


def pipeline():
    """x[64,64] → Neg a → MatMul mm (64×64 weights) → Neg b."""
    g = GraphBuilder("pipe")
    x = g.input("x", (64, 64))
    w = np.ones((64, 64), np.float32)
    g.output(g.Neg(g.MatMul(g.Neg(x, name="a"), w, name="mm"), name="b"))
    return g.build()


def test_priority_takes_the_first_target_that_accepts_each_node() -> None:
    ann = annotate(pipeline(), [toy("npu", ("MatMul",)), toy("gpu", ("Neg", "MatMul")),
                                toy("cpu", ("Neg", "MatMul"))])
    result = assign(ann, "priority", fallback="cpu")
    assert {n: result.backend_of(n) for n in ("a", "mm", "b")} == {"a": "gpu", "mm": "npu", "b": "gpu"}
    assert [(c.node, c.reason) for c in result.moved()] == [
        ("a", "npu does not implement Neg"), ("b", "npu does not implement Neg")]


def test_what_no_target_takes_goes_to_the_fallback() -> None:
    ann = annotate(pipeline(), [toy("npu", ("MatMul",)), toy("host", ("Neg", "MatMul"))])
    result = assign(ann, fallback="host")
    assert result.backend_of("a") == "host" and result.backend_of("mm") == "npu"
    with pytest.raises(PartitionError, match="fallback backend 'gpu' is not among"):
        assign(ann, fallback="gpu")
    assert assign(ann).fallback is None  # none named: none assumed


def test_cost_keeps_memory_bound_neg_on_the_fast_memory_cpu_and_the_matmul_on_the_npu() -> None:
    # The npu computes 200x faster but streams memory at half the cpu's bandwidth:
    # each Neg moves 32 KiB, 3.28 µs there and 1.64 µs on the cpu, while the transfer
    # it would save costs the same either way. The MatMul (0.5 MFLOP) is compute-bound.
    npu = toy("npu", ("Neg", "MatMul"), peak_gflops=1000.0, bandwidth_gbps=10.0)
    cpu = toy("cpu", ("Neg", "MatMul"), peak_gflops=5.0, bandwidth_gbps=20.0)
    ann = annotate(pipeline(), [npu, cpu])
    priority = assign(ann, "priority", fallback="cpu")
    assert {priority.backend_of(n) for n in ("a", "mm", "b")} == {"npu"}
    cost = assign(ann, "cost", fallback="cpu")
    assert {n: cost.backend_of(n) for n in ("a", "mm", "b")} == {"a": "cpu", "mm": "npu", "b": "cpu"}
    reasons = {c.node: c.reason for c in cost.moved()}
    assert reasons == {"a": "cheaper on cpu by 1.64 µs", "b": "cheaper on cpu by 1.64 µs"}


def test_cost_pays_for_transfers_when_the_compute_gain_is_small() -> None:
    # Same speeds everywhere but the npu is 1.5x faster at compute; a lone node on it
    # would need its input and output moved, which costs more than it saves.
    npu = toy("npu", ("Neg",), peak_gflops=15.0, bandwidth_gbps=1e6)
    cpu = toy("cpu", ("Neg", "MatMul"), peak_gflops=10.0, bandwidth_gbps=1e6)
    g = GraphBuilder("g")
    x = g.input("x", (1, 1024))
    g.output(g.MatMul(g.Neg(g.MatMul(x, np.ones((1024, 8), np.float32), name="m1"), name="n"),
                      np.ones((8, 4), np.float32), name="m2"))
    ann = annotate(g.build(), [npu, cpu])
    assert assign(ann, "priority", fallback="cpu").backend_of("n") == "npu"
    assert assign(ann, "cost", fallback="cpu").backend_of("n") == "cpu"


def test_overrides_by_node_name_win_over_op_type() -> None:
    ann = annotate(pipeline(), [toy("npu", ("Neg", "MatMul")), toy("cpu", ("Neg", "MatMul"))])
    result = assign(ann, overrides={"Neg": "cpu", "b": "npu"}, fallback="cpu")
    assert (result.backend_of("a"), result.backend_of("b")) == ("cpu", "npu")
    assert result.choices["a"].reason == "override: Neg -> cpu"
    cost = assign(ann, "cost", overrides={"mm": "cpu"}, fallback="cpu")
    assert cost.backend_of("mm") == "cpu" and cost.choices["mm"].reason == "override: mm -> cpu"


@pytest.mark.parametrize("overrides, message", [
    ({"Nge": "cpu"}, "no node or op of that name \\(did you mean 'Neg'\\?\\)"),
    ({"a": "gpu"}, "'gpu' is not a selected backend"),
    ({"Neg": "npu"}, "npu refuses node a \\(Neg\\): npu does not implement Neg"),
])
def test_bad_overrides_name_the_problem(overrides, message) -> None:
    ann = annotate(pipeline(), [toy("npu", ("MatMul",)), toy("cpu", ("Neg", "MatMul"))])
    with pytest.raises(PartitionError, match=message):
        assign(ann, overrides=overrides, fallback="cpu")


def test_unknown_policy_and_untaken_node_are_errors() -> None:
    ann = annotate(pipeline(), [toy("npu", ("MatMul",)), toy("cpu", ("MatMul",))])
    with pytest.raises(PartitionError, match="unknown partition policy 'fastest'"):
        assign(ann, "fastest", fallback="cpu")
    with pytest.raises(PartitionError, match="node a \\(Neg\\): no selected backend takes it"):
        assign(ann, fallback="cpu")


def test_a_composite_that_cannot_land_whole_gives_its_nodes_back() -> None:
    npu = toy("npu", ("MatMul",))
    npu.patterns = (Pattern("mm_neg", Op("Neg", Op("MatMul", Var("x"), ...))),)
    cpu = toy("cpu", ("Neg", "MatMul"))
    ann = annotate(pipeline(), [npu, cpu])
    whole = assign(ann, fallback="cpu")
    assert whole.backend_of("b") == "npu" and [c.nodes for c in whole.composites()] == [("mm", "b")]
    split = assign(ann, overrides={"mm": "cpu"}, fallback="cpu")
    assert split.backend_of("b") == "cpu" and split.composites() == []
    assert "only inside a composite" in split.choices["b"].reason


def test_an_override_into_a_composite_that_cannot_land_whole_is_an_error() -> None:
    # npu takes b (Neg) only inside mm_neg; with mm pinned to the cpu the composite
    # cannot land whole, and b's own pin cannot hold: that is an error, not a silent move.
    npu = toy("npu", ("MatMul",))
    npu.patterns = (Pattern("mm_neg", Op("Neg", Op("MatMul", Var("x"), ...))),)
    cpu = toy("cpu", ("Neg", "MatMul"))
    ann = annotate(pipeline(), [npu, cpu])
    held = assign(ann, overrides={"b": "npu"}, fallback="cpu")
    assert held.backend_of("b") == held.backend_of("mm") == "npu"
    with pytest.raises(PartitionError, match="override 'b' -> npu: npu takes node b \\(Neg\\) only "
                       "inside composite mm_neg, which does not land whole on npu \\(its node\\(s\\) mm"):
        assign(ann, overrides={"b": "npu", "mm": "cpu"}, fallback="cpu")
