"""The memory planner: offsets that never collide, arenas near the lower bound, capacity errors."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.memory import MemoryLevel, MemoryPlan, plan_memory, plan_memory_spaces
from hetero.core.memory.liveness import LiveInterval, Liveness
from hetero.core.memory.planner import plan_arena
from hetero.errors import MemoryPlanError
from tests.models import LIGHT_MODELS, light_model_path
from tests.workcount import growth


def chain(width: int, length: int) -> Graph:
    """x -> t0 -> t1 -> ... Relus of ``width`` float32s; the last is the output."""
    b = GraphBuilder("chain")
    v = b.input("x", (1, width))
    for i in range(length):
        v = b.Relu(v, name=f"t{i}")
    b.output(v)
    return b.build()


def test_chain_ping_pongs_between_two_buffers() -> None:
    plan = plan_memory(chain(1024, 4))
    assert {a.name: a.offset for a in plan.allocations} == {"t0": 0, "t1": 4096, "t2": 0, "t3": 4096}
    assert plan.arena_bytes == plan.lower_bound_bytes == 8192
    assert plan.naive_bytes == 4 * 4096
    assert plan.ratio == 1.0


def test_offsets_are_aligned() -> None:
    plan = plan_memory(chain(25, 2), alignment=64)
    assert [(a.name, a.offset, a.nbytes) for a in plan.allocations] == [("t0", 0, 100), ("t1", 128, 100)]
    assert plan.arena_bytes == 228 and plan.lower_bound_bytes == 200
    assert plan_memory(chain(25, 2), alignment=4).arena_bytes == 200


def test_short_lived_tensors_take_turns_beside_a_long_lived_one() -> None:
    # big is made first and read late; the small tensors after it live two at a
    # time, so they alternate between two slots above big's.
    b = GraphBuilder("mixed")
    x = b.input("x", (1, 256))
    big = b.Relu(x, name="big")
    s1 = b.Relu(b.Slice(x, starts=(0,), ends=(16,), axes=(1,), steps=(1,), name="s0"), name="s1")
    s2 = b.Neg(s1, name="s2")
    b.output(b.Add(b.Slice(big, starts=(0,), ends=(16,), axes=(1,), steps=(1,), name="cut"), s2, name="y"))
    plan = plan_memory(b.build())
    assert {a.name: a.offset for a in plan.allocations} == {
        "big": 0, "s0": 1024, "s1": 1088, "s2": 1024, "cut": 1088, "y": 0,
    }
    assert plan.arena_bytes == plan.lower_bound_bytes == 1024 + 2 * 64
    assert plan.strategy == "greedy by size"


def test_breadth_order_wins_where_a_big_short_lived_tensor_would_sit_low() -> None:
    # By size, n1 (the largest, live one step) takes offset 0 and pushes the
    # long-lived n0 above it; placing the busiest steps first packs all at the bound.
    b = GraphBuilder("breadth")
    x1, x2 = b.input("x1", (1, 98)), b.input("x2", (1, 88))
    n0 = b.Relu(x2, name="n0")
    b.Relu(x1, name="n1")
    n3 = b.Add(n0, b.Relu(x2, name="n2"), name="n3")
    b.Relu(n0, name="n4")
    b.output(b.Relu(n3, name="n5"))
    plan = plan_memory(b.build(), alignment=1)
    assert plan.strategy == "greedy by breadth"
    assert plan.arena_bytes == plan.lower_bound_bytes == 3 * 352


@st.composite
def random_dags(draw: st.DrawFn) -> Graph:
    """Random DAGs of Relu, Add and Concat over (1, n) tensors of random widths and dtypes."""
    dtype = draw(st.sampled_from(["float32", "float16", "int8"]))
    b = GraphBuilder("random")
    values = [b.input(f"x{i}", (1, draw(st.integers(1, 300))), dtype)
              for i in range(draw(st.integers(1, 3)))]
    for i in range(draw(st.integers(1, 16))):
        a = draw(st.sampled_from(values))
        kind = draw(st.sampled_from(["Relu", "Add", "Concat"]))
        if kind == "Add":
            other = draw(st.sampled_from([v for v in values if v.shape == a.shape]))
            values.append(b.Add(a, other, name=f"n{i}"))
        elif kind == "Concat":
            parts = [a] + draw(st.lists(st.sampled_from(values), max_size=2))
            if sum(p.shape[1] for p in parts) > 2000:
                parts = [a]
            values.append(b.Concat(*parts, axis=1, name=f"n{i}"))
        else:
            values.append(b.Relu(a, name=f"n{i}"))
    made = [v for v in values if v.producer is not None]
    outputs = st.lists(st.sampled_from(made), min_size=1, max_size=3, unique_by=lambda v: v.name)
    b.output(*draw(outputs))
    return b.build()


def live_steps(graph: Graph, name: str) -> range:
    """Brute force: the node indices at which value ``name`` must still be in memory."""
    index = {id(n): i for i, n in enumerate(graph.nodes)}
    value = graph.values[name]
    made = index[id(value.producer)]
    if value in graph.outputs:
        return range(made, len(graph.nodes))
    return range(made, max([index[id(u)] for u in value.users], default=made) + 1)


@settings(max_examples=60, deadline=None)
@given(graph=random_dags(), alignment=st.sampled_from([1, 16, 64]))
def test_live_buffers_never_overlap(graph: Graph, alignment: int) -> None:
    plan = plan_memory(graph, alignment=alignment)
    made = {v.name for n in graph.nodes for v in n.outputs}
    assert {a.name for a in plan.allocations} == made
    steps = {a.name: live_steps(graph, a.name) for a in plan.allocations}
    for a in plan.allocations:
        assert a.offset % alignment == 0
        assert (a.start, a.end) == (steps[a.name].start, steps[a.name].stop - 1)
        assert a.stop <= plan.arena_bytes
    for i, a in enumerate(plan.allocations):
        for c in plan.allocations[i + 1:]:
            if set(steps[a.name]) & set(steps[c.name]) and a.nbytes and c.nbytes:
                assert a.stop <= c.offset or c.stop <= a.offset, (a, c)
    pressure = [sum(graph.values[n].type.nbytes for n in made if s in steps[n])
                for s in range(len(graph.nodes))]
    assert plan.lower_bound_bytes == max(pressure)
    assert plan.naive_bytes == sum(graph.values[n].type.nbytes for n in made)
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.naive_bytes + alignment * len(made)


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_plans_within_ten_percent_of_lower_bound(name: str) -> None:
    graph = hetero.optimize(hetero.load_onnx(light_model_path(name)))
    plan = plan_memory(graph)
    assert plan.lower_bound_bytes > 0
    assert plan.arena_bytes <= 1.1 * plan.lower_bound_bytes, plan.summary()
    assert plan.arena_bytes < plan.naive_bytes


def test_plan_that_does_not_fit_names_space_sizes_and_peak_tensors() -> None:
    b = GraphBuilder("wide")
    x = b.input("x", (1, 1024))
    big = b.Relu(x, name="big")
    cut = b.Slice(x, starts=(0,), ends=(16,), axes=(1,), steps=(1,), name="cut")
    small = b.Relu(cut, name="small")
    b.output(b.Add(b.Slice(big, starts=(0,), ends=(16,), axes=(1,), steps=(1,), name="head"), small, name="y"))
    graph = b.build()
    sram = MemoryLevel("SRAM", 2048, bandwidth_gbps=100)
    plan = plan_memory(graph)
    with pytest.raises(MemoryPlanError) as info:
        plan.check(sram)
    message = str(info.value)
    for part in ("graph wide", "memory space 'global'", f"({plan.arena_bytes} bytes)",
                 "memory level 'SRAM'", "(2048 bytes)", "big (4 KiB)",
                 f"step {plan.peak_step} [{plan.peak_step_name}]"):
        assert part in message, part
    assert message.index("big (4 KiB)") < message.index("small (64 B)")
    with pytest.raises(MemoryPlanError, match="SRAM"):
        plan_memory(graph, level=sram)
    roomy = MemoryLevel("DRAM", 2**20, bandwidth_gbps=10)
    assert plan_memory(graph, level=roomy).arena_bytes == plan.arena_bytes


def test_each_memory_space_gets_its_own_arena() -> None:
    graph = chain(256, 4)
    plans = plan_memory_spaces(graph, lambda v: "shared" if v.name in ("t0", "t2") else "global")
    assert set(plans) == {"shared", "global"}
    assert sorted(a.name for a in plans["shared"].allocations) == ["t0", "t2"]
    assert plans["shared"].arena_bytes == 1024  # t0 and t2 are never live together
    assert plans["global"].space == "global" and plans["global"].arena_bytes == 1024
    tiny = MemoryLevel("SMEM", 512, bandwidth_gbps=1000, scope="shared")
    with pytest.raises(MemoryPlanError, match="memory space 'shared'"):
        plan_memory_spaces(graph, lambda v: "shared", levels={"shared": tiny})


def test_bad_alignment_is_rejected() -> None:
    with pytest.raises(MemoryPlanError, match="graph chain: alignment must be a positive"):
        plan_memory(chain(4, 2), alignment=0)


def test_text_form_reports_sizes_and_every_tensor() -> None:
    plan = plan_memory(chain(1024, 4))
    text = str(plan)
    assert "memory plan of graph chain, space 'global' (4 tensors, 64-byte aligned" in text
    assert "planned arena" in text and "8 KiB" in text and "x1.000" in text
    assert "naive sum" in text and "16 KiB" in text and "reuse saves 50%" in text
    assert all(name in text for name in ("t0", "t1", "t2", "t3"))
    assert plan.summary() == "global: arena 8 KiB, lower bound 8 KiB (x1.000), naive 16 KiB"


def test_graph_without_intermediates_needs_no_arena() -> None:
    b = GraphBuilder("empty")
    b.output(b.input("x", (2,)))
    plan = plan_memory(b.build())
    assert isinstance(plan, MemoryPlan)
    assert (plan.arena_bytes, plan.naive_bytes, plan.lower_bound_bytes, plan.ratio) == (0, 0, 0, 1.0)
    assert np.isfinite(plan.ratio)


def _reference_plan(intervals: list[LiveInterval], steps: int, alignment: int) -> tuple[int, dict[str, int]]:
    """The three heuristics spelled out directly (every placed tensor checked at every
    placement, every step's live list built): the arena and offsets plan_arena must keep."""
    live: list[list[LiveInterval]] = [[] for _ in range(steps)]
    for iv in intervals:
        for step in range(iv.start, iv.end + 1):
            live[step].append(iv)
    by_size = sorted(intervals, key=lambda iv: (-iv.nbytes, iv.start, -(iv.end - iv.start)))
    by_breadth: dict[str, LiveInterval] = {}
    for step in sorted(live, key=lambda ivs: -sum(iv.nbytes for iv in ivs)):
        for iv in sorted(step, key=lambda iv: -iv.nbytes):
            by_breadth.setdefault(iv.name, iv)
    best: tuple[int, dict[str, int]] | None = None
    for order, best_fit in ((by_size, True), (by_size, False), (list(by_breadth.values()), True)):
        placed: list[tuple[int, int, LiveInterval]] = []
        offsets: dict[str, int] = {}
        for iv in order:
            conflicts = sorted((o, stop) for o, stop, other in placed if stop > o and other.overlaps(iv))
            candidate, chosen, chosen_gap = 0, None, 0
            for o, stop in conflicts:
                if o - candidate >= iv.nbytes and (chosen is None or o - candidate < chosen_gap):
                    chosen, chosen_gap = candidate, o - candidate
                    if not best_fit:
                        break
                candidate = max(candidate, -(-stop // alignment) * alignment)
            offsets[iv.name] = candidate if chosen is None else chosen
            placed.append((offsets[iv.name], offsets[iv.name] + iv.nbytes, iv))
        arena = max((offsets[iv.name] + iv.nbytes for iv in intervals), default=0)
        if best is None or arena < best[0]:
            best = (arena, offsets)
    assert best is not None
    return best


@st.composite
def lifetimes(draw: st.DrawFn) -> tuple[int, list[LiveInterval]]:
    steps = draw(st.integers(1, 40))
    intervals = []
    for i in range(draw(st.integers(0, 30))):
        start = draw(st.integers(0, steps - 1))
        end = draw(st.integers(start, steps - 1))
        nbytes = draw(st.sampled_from([0, 1, 64, 100, 4096]) | st.integers(1, 5000))
        intervals.append(LiveInterval(f"t{i}", start, end, nbytes))
    return steps, intervals


@settings(max_examples=300, deadline=None)
@given(lifetimes(), st.sampled_from([1, 16, 64]))
def test_the_indexed_placement_plans_exactly_what_the_direct_heuristics_do(case, alignment) -> None:
    steps, intervals = case
    liveness = Liveness("g", tuple(f"s{i}" for i in range(steps)), tuple(intervals))
    plan = plan_arena(liveness, intervals, alignment=alignment)
    arena, offsets = _reference_plan(intervals, steps, alignment)
    assert plan.arena_bytes == arena
    assert {a.name: a.offset for a in plan.allocations} == offsets


def test_planning_a_long_chain_costs_near_linear_work() -> None:
    # Each placement once scanned every tensor placed before it: 4x the nodes cost 16x.
    graphs = {n: residual_chain(n) for n in (1000, 4000)}
    assert growth(lambda n: plan_memory(graphs[n]), 1000) < 6.0


def residual_chain(n: int) -> Graph:
    """Relu and Add(previous, the one before) alternating, ``n`` nodes."""
    b = GraphBuilder("residual")
    v = b.Relu(b.input("x", (1, 16)), name="r0")
    prev = v
    for i in range(1, n):
        if i % 2:
            v = b.Add(v, prev, name=f"a{i}")
        else:
            prev, v = v, b.Relu(v, name=f"r{i}")
    b.output(v)
    return b.build()
