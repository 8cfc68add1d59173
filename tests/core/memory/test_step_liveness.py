"""Liveness over a compiled part's steps: what each step reads and writes, views sharing
their source's memory; planned arenas never overlap two values live at one step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hetero.core.memory import LiveInterval, StepUse, analyze_step_liveness, plan_arena


def test_a_value_lives_from_its_step_to_its_last_reader_and_a_view_extends_its_source() -> None:
    steps = [
        StepUse("conv", ("x", "w"), ("a",)),
        StepUse("flat", ("a",), ("a_view",), view=True),
        StepUse("relu", ("a_view",), ("b",)),
        StepUse("gemm", ("b", "a_view"), ("c",)),
        StepUse("unused", ("c",), ("d",)),
    ]
    live = analyze_step_liveness("part", steps, {"a": 400, "b": 64, "c": 8, "d": 4})
    assert live.intervals == (LiveInterval("a", 0, 3, 400), LiveInterval("b", 2, 3, 64),
                              LiveInterval("c", 3, 4, 8), LiveInterval("d", 4, 4, 4))
    assert live.step_names == ("conv", "flat", "relu", "gemm", "unused")
    assert live.peak_step == 3 and live.step_name(3) == "gemm"


def test_a_view_of_a_view_keeps_the_first_source_alive() -> None:
    steps = [StepUse("k", ("x",), ("a",)), StepUse("v1", ("a",), ("b",), view=True),
             StepUse("v2", ("b",), ("c",), view=True), StepUse("k2", ("x",), ("d",)),
             StepUse("k3", ("c", "d"), ("e",))]
    live = analyze_step_liveness("part", steps, {"a": 16, "d": 16, "e": 16})
    assert {iv.name: (iv.start, iv.end) for iv in live.intervals} == {"a": (0, 4), "d": (3, 4), "e": (4, 4)}


@st.composite
def step_lists(draw: st.DrawFn) -> tuple[list[StepUse], dict[str, int]]:
    """Random chains of kernels (reading earlier values or inputs) and views of earlier values."""
    made: list[str] = []
    steps: list[StepUse] = []
    sizes: dict[str, int] = {}
    for i in range(draw(st.integers(1, 25))):
        name = f"v{i}"
        if made and draw(st.booleans()) and draw(st.booleans()):
            steps.append(StepUse(f"s{i}", (draw(st.sampled_from(made)),), (name,), view=True))
        else:
            reads = tuple(dict.fromkeys(draw(st.lists(st.sampled_from(made or ["x"]), max_size=3)) or ["x"]))
            steps.append(StepUse(f"s{i}", reads, (name,)))
            sizes[name] = draw(st.integers(1, 300))
        made.append(name)
    return steps, sizes


@settings(max_examples=200, deadline=None)
@given(step_lists())
def test_no_step_sees_two_of_its_values_in_the_same_bytes(case: tuple[list[StepUse], dict[str, int]]) -> None:
    steps, sizes = case
    live = analyze_step_liveness("part", steps, sizes)
    plan = plan_arena(live, live.intervals, alignment=16)
    place = {a.name: (a.offset, a.stop) for a in plan.allocations}
    root = {}
    for step in steps:
        root[step.writes[0]] = root[step.reads[0]] if step.view else step.writes[0]
    # Every value a later step reads, through any view, is where it was written and
    # overlaps nothing that step writes or that was written since.
    for i, step in enumerate(steps):
        if step.view:
            continue
        touched = {root[v] for v in (*step.reads, *step.writes) if v in root}
        for a in touched:
            for b in touched:
                if a != b:
                    (a0, a1), (b0, b1) = place[a], place[b]
                    assert a1 <= b0 or b1 <= a0, (step.name, a, b)
        for value in step.reads:
            if value in root:
                source = root[value]
                written = next(j for j, s in enumerate(steps) if s.writes == (source,))
                for j in range(written + 1, i):
                    other = steps[j]
                    if not other.view:
                        (a0, a1), (b0, b1) = place[source], place[other.writes[0]]
                        assert a1 <= b0 or b1 <= a0, (step.name, source, other.name)
