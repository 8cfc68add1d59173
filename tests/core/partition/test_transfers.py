"""find_transfers(): the copies between memory spaces, costed from the hierarchies."""

from __future__ import annotations

import pytest
from toyplugin import ToyBackend, plugin_source

from hetero import GraphBuilder
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.partition import partition_graph
from hetero.core.plugin import get_backend


def test_transfers_cross_backends_and_are_costed_by_the_slower_memory(site) -> None:
    site.install("hetero-acc", "1.0", {"acc": plugin_source("acc", ops=("Relu", "Add"))})
    site.load()
    acc, cpu = get_backend("acc"), get_backend("llvm_cpu")
    b = GraphBuilder("diamond")
    a = b.Relu(b.input("x", (1, 256)), name="A")
    b.output(b.Add(b.Neg(a, name="B"), b.Relu(a, name="C"), name="D"))
    part = partition_graph(b.build(), [acc, cpu], min_ratio=0)
    moves = [(t.value, t.src_backend, t.dst_backend, t.src_region, t.dst_region) for t in part.transfers]
    assert moves == [
        ("x", "llvm_cpu", "acc", None, "r0"),      # a graph input lives on the host
        ("A", "acc", "llvm_cpu", "r0", "r1"),
        ("B", "llvm_cpu", "acc", "r1", "r2"),
        ("D", "acc", "llvm_cpu", "r2", None),      # a graph output returns to the host
    ]
    for t in part.transfers:
        assert t.nbytes == 1024
        assert t.est_seconds == max(acc.memory.transfer_seconds(1024), cpu.memory.transfer_seconds(1024))
    # The plugin's DRAM (100 ns) is slower to reach than the host's: it sets the cost.
    assert t.est_seconds == acc.memory.transfer_seconds(1024) == 100e-9 + 1024 / 20e9
    r0 = part.region("r0")
    assert [t.value for t in part.transfers_in(r0)] == ["x"]
    assert [t.value for t in part.transfers_out(r0)] == ["A"]


def test_a_value_moves_once_per_destination_backend_and_not_between_regions_of_one() -> None:
    memory = MemoryHierarchy([MemoryLevel("DRAM", 2**30, bandwidth_gbps=10.0)])
    acc = ToyBackend("acc", ops=("Relu", "Add"), memory=memory)
    cpu = ToyBackend("cpu", ops=("Relu", "Add", "Neg"))
    b = GraphBuilder("g")
    n0 = b.Neg(b.input("x", (1, 64)), name="n0")
    c = b.Neg(b.Relu(n0, name="a1"), name="c")
    b.output(b.Add(c, n0, name="a2"))
    part = partition_graph(b.build(), [acc, cpu], fallback="cpu", min_ratio=0)
    assert [(r.backend, r.node_names) for r in part.regions] == [
        ("cpu", ("n0",)), ("acc", ("a1",)), ("cpu", ("c",)), ("acc", ("a2",))]
    moves = [(t.value, t.dst_region) for t in part.transfers]
    assert moves == [("n0", "r1"), ("a1", "r2"), ("c", "r3"), ("a2", None)]
    # acc streams at half the bandwidth, but the toy cpu's 100 ns latency costs more.
    assert part.transfers[0].est_seconds == pytest.approx(max(256 / 10e9, 100e-9 + 256 / 20e9))


class _Blind(ToyBackend):
    def estimate(self, subgraph, target):  # noqa: ANN001, ANN201 - a backend whose cost model fails
        raise RuntimeError("no cost model")


def test_json_report_writes_an_unknown_estimate_as_null() -> None:
    import json

    b = GraphBuilder("g")
    b.output(b.Relu(b.input("x", (1, 8)), name="r"))
    part = partition_graph(b.build(), [_Blind("blind", ops=("Relu",))], fallback="blind", min_ratio=0)
    text = part.to_json()
    assert "Infinity" not in text
    assert json.loads(text)  # valid JSON
    assert "null" in text
