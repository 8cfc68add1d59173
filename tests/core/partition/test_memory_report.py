"""The partition's memory plan: one arena per backend, checked against its memory, reported.

Backends are real installed plugins (the ``site`` fixture) beside the bundled
llvm_cpu fallback.
"""

from __future__ import annotations

import pytest
from models import light_model_path
from toyplugin import ToyBackend, plugin_source

import hetero
from hetero import GraphBuilder
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.memory import MemoryHierarchy, MemoryLevel, format_bytes, plan_memory_spaces
from hetero.core.partition import partition_graph
from hetero.core.plugin import get_backend
from hetero.errors import MemoryPlanError, PartitionError


def install(site, capacity: str = "2**30", ops: tuple[str, ...] = ("Relu", "Add")) -> list:
    """The accelerator plugin ``acc`` (DRAM of ``capacity`` bytes) and llvm_cpu."""
    site.install("hetero-acc", "1.0", {"acc": plugin_source("acc", ops=ops, capacity=capacity)})
    site.load()
    return [get_backend("acc"), get_backend("llvm_cpu")]


def chain():
    """x → relu0 → relu1 → neg → relu2: acc, acc, llvm_cpu, acc; 4 KiB tensors."""
    b = GraphBuilder("chain")
    v = b.input("x", (4, 256))
    for name, op in [("relu0", "Relu"), ("relu1", "Relu"), ("neg", "Neg"), ("relu2", "Relu")]:
        v = b.op(op, v, name=name)
    b.output(v)
    return b.build()


def diamond(order: tuple[str, ...]):
    """A → B, A → C, B → D, C → D, the nodes added in ``order``; B (Neg) stays off acc."""
    b = GraphBuilder("diamond")
    made = {"x": b.input("x", (1, 256))}
    build = {"A": ("Relu", ["x"]), "B": ("Neg", ["A"]), "C": ("Relu", ["A"]), "D": ("Add", ["B", "C"])}
    for name in order:
        op, args = build[name]
        made[name] = b.op(op, *(made[a] for a in args), name=name)
    b.output(made["D"])
    return b.build()


def test_a_plan_that_cannot_be_made_to_fit_names_the_space_and_its_tensors(site) -> None:
    # acc is its own fallback here, so no other backend can take its tensors.
    backends = install(site, capacity="1024", ops=("Relu", "Add", "Neg"))
    with pytest.raises(MemoryPlanError) as err:
        partition_graph(chain(), backends[:1], fallback="acc", min_ratio=0)
    message = str(err.value)
    assert "memory space 'acc' needs" in message
    assert "memory level 'DRAM' holds 1 KiB (1024 bytes)" in message
    assert "relu0 (4 KiB), relu1 (4 KiB)" in message


def test_an_overfull_backend_hands_its_peak_tensors_producers_to_the_fallback(site) -> None:
    # Two 4 KiB tensors are live at once on acc; 6000 bytes hold only one of them.
    graph = chain()
    part = partition_graph(graph, install(site, capacity="6000"), min_ratio=0)
    moved = {c.node: c.reason for c in part.assignment.moved() if c.op != "Neg"}
    assert list(moved) == ["relu0"]
    assert moved["relu0"].startswith("returned to llvm_cpu: acc's memory 'DRAM' (5.859 KiB) cannot hold the 8 KiB its intermediates need")
    assert "relu0 (4 KiB) was live at the peak" in moved["relu0"]
    assert [r.backend for r in part.regions] == ["llvm_cpu", "acc", "llvm_cpu", "acc"]
    assert part.memory["acc"].arena_bytes <= 6000
    assert "returned to llvm_cpu: acc's memory" in part.report()


def test_a_memory_starved_backend_can_lose_all_its_work(site) -> None:
    part = partition_graph(chain(), install(site, capacity="1024"), min_ratio=0)
    assert {r.backend for r in part.regions} == {"llvm_cpu"}
    assert all("cannot hold" in c.reason for c in part.assignment.moved() if c.op != "Neg")


def test_the_report_numbers_equal_the_planner_run_directly(site) -> None:
    graph = chain()
    part = partition_graph(graph, install(site), min_ratio=0)
    assert [r.backend for r in part.regions] == ["acc", "llvm_cpu", "acc"]
    direct = plan_memory_spaces(graph, lambda v: part.assignment.backend_of(v.producer.name))
    assert sorted(part.memory) == sorted(direct) == ["acc", "llvm_cpu"]
    rows = {m["space"]: m for m in part.to_dict()["memory"]}
    text = part.report()
    section = text[text.index("memory (one arena"):text.index("not on the preferred")]
    for space, plan in direct.items():
        assert rows[space] == {
            "space": space, "planned_bytes": plan.arena_bytes, "naive_bytes": plan.naive_bytes,
            "lower_bound_bytes": plan.lower_bound_bytes, "ratio": plan.ratio,
            "tensors": len(plan.allocations)}
        line = next(line for line in section.splitlines() if line.split()[:1] == [space])
        assert line.split() == [space, str(len(plan.allocations)),
                                *format_bytes(plan.arena_bytes).split(),
                                *format_bytes(plan.naive_bytes).split(),
                                *format_bytes(plan.lower_bound_bytes).split(), f"{plan.ratio:.3f}"]
    # relu0 dies once relu1 has read it; relu1 is read by neg in llvm_cpu's region,
    # and relu2, a graph output, lives to the end.
    assert rows["acc"]["naive_bytes"] == 3 * 4096 and rows["acc"]["lower_bound_bytes"] == 2 * 4096
    assert '"memory"' in part.to_json()


def test_liveness_follows_the_execution_order_of_the_regions(site) -> None:
    part = partition_graph(diamond(("A", "B", "C", "D")), install(site), min_ratio=0)
    assert [r.node_names for r in part.regions] == [("A", "C"), ("B",), ("D",)]
    executed = diamond(("A", "C", "B", "D"))
    direct = plan_memory_spaces(executed, lambda v: part.assignment.backend_of(v.producer.name))
    for space, plan in direct.items():
        got = part.memory[space]
        assert (got.arena_bytes, got.naive_bytes, got.lower_bound_bytes) == (
            plan.arena_bytes, plan.naive_bytes, plan.lower_bound_bytes)
    # Run in region order, A and C are live while B runs, so acc holds both at once.
    assert part.memory["acc"].lower_bound_bytes == 2 * 1024


def test_squeezenet_across_a_plugin_and_llvm_cpu_plans_within_1_1x_of_the_lower_bound(site) -> None:
    backends = install(site, ops=("Conv", "Relu"))
    model = randomize_weights(read_model(light_model_path("squeezenet")).model, 0)
    part = partition_graph(hetero.optimize(hetero.load_onnx(model)), backends)
    assert set(part.memory) == {r.backend for r in part.regions} == {"acc", "llvm_cpu"}
    for space, plan in part.memory.items():
        assert plan.lower_bound_bytes > 0
        assert plan.arena_bytes <= 1.1 * plan.lower_bound_bytes, plan.summary()
        for i, a in enumerate(plan.allocations):
            for b in plan.allocations[i + 1:]:
                live_together = a.start <= b.end and b.start <= a.end
                assert not (live_together and a.offset < b.stop and b.offset < a.stop), (space, a, b)


def toy_pair(capacity: int) -> list:
    """A toy accelerator taking Relu with ``capacity`` bytes of DRAM, and a toy fallback."""
    memory = MemoryHierarchy([MemoryLevel("DRAM", capacity, bandwidth_gbps=20.0, latency_ns=100.0)])
    return [ToyBackend("acc", ops=("Relu",), memory=memory), ToyBackend("cpu", ops=("Relu", "Neg"))]


def test_a_pinned_producer_stays_and_the_memory_fit_moves_another() -> None:
    # As above relu0 would go back first (its 4 KiB and relu1's overlap on acc); pinned, it
    # stays, and relu1 goes instead.
    backends = toy_pair(6000)
    free = partition_graph(chain(), backends, fallback="cpu", min_ratio=0)
    assert free.assignment.backend_of("relu0") == "cpu"
    part = partition_graph(chain(), backends, fallback="cpu", min_ratio=0, overrides={"relu0": "acc"})
    assert [part.assignment.backend_of(n) for n in ("relu0", "relu1")] == ["acc", "cpu"]
    assert part.memory["acc"].arena_bytes <= 6000


def test_pins_that_overflow_a_memory_are_an_error_naming_the_override() -> None:
    with pytest.raises(PartitionError, match="override 'Relu' -> acc: the pinned node\\(s\\) relu0, "
                       "relu1 keep their tensors where memory overflows") as err:
        partition_graph(chain(), toy_pair(6000), fallback="cpu", min_ratio=0, overrides={"Relu": "acc"})
    assert "memory space 'acc' needs 8 KiB" in str(err.value)
