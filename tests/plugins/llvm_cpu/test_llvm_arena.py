"""llvm_cpu's intermediates in one planned arena: the peak a run allocates is the plan's,
the numbers are unchanged, and what a run returns never shares memory with the arena.

The peak is measured with tracemalloc (numpy reports its allocations to it) over one
``Executable.run`` after a warm-up run, the inputs made before tracing starts. It is
compared with ``memory_plan.arena_bytes`` plus the bytes of the outputs, which the part
allocates apart: the measured peak must be at least the arena and at most 1.05 times
that sum (the rest is Python's own bookkeeping). Before the arena every step allocated
its outputs with ``np.empty`` and kept them to the end of the run: the naive sum.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import onnx
import pytest

import hetero
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.ir import Graph, GraphBuilder
from hetero.plugins.llvm_cpu.part import ALIGNMENT, LlvmCpuPart
from models import light_model_path
from oracle import run_model


def compiled_light(name: str) -> tuple[onnx.ModelProto, Graph, hetero.Executable]:
    model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
    graph = hetero.optimize(hetero.load_onnx(model))
    return model, graph, hetero.compile(graph, targets=["llvm_cpu"], passes=[])


def traced_peaks(exe: hetero.Executable, feeds: dict[str, np.ndarray]) -> tuple[int, int, dict[str, np.ndarray]]:
    """The most bytes traced at once during the first run and during a second one, and
    the second's outputs: the first allocates the arena and workspace, the second
    borrows them back."""
    tracemalloc.start()
    try:
        exe.run(feeds)
        first = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        outputs = exe.run(feeds)
        second = tracemalloc.get_traced_memory()[1] - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return first, second, outputs


def check_light_model(name: str) -> None:
    model, graph, exe = compiled_light(name)
    (placement,) = exe.placements
    plan = placement.part.memory_plan
    assert plan.arena_bytes < plan.naive_bytes / 2, plan.summary()
    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    feeds = {graph.inputs[0].name: x}
    first, second, outputs = traced_peaks(exe, feeds)
    # The arena, the outputs, and the region one kernel's stages pass intermediates in.
    out_bytes = sum(a.nbytes for a in outputs.values())
    budget = plan.arena_bytes + placement.part.workspace_bytes + out_bytes
    assert plan.arena_bytes <= first <= 1.05 * budget, (first, plan.summary())
    # A later run reuses the arena and workspace: it allocates its outputs and little else.
    assert second <= out_bytes + 0.05 * budget, (second, out_bytes)
    ours = outputs[graph.outputs[0].name]
    theirs = run_model(model, feeds)[0]
    scale = float(np.abs(theirs).max())
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * scale)


def test_squeezenet_runs_in_its_planned_arena_and_matches_onnxruntime() -> None:
    check_light_model("squeezenet")


@pytest.mark.slow
def test_resnet50_runs_in_its_planned_arena_and_matches_onnxruntime() -> None:
    check_light_model("resnet50")


def reused_graph() -> Graph:
    """a = Relu(x) reshaped to an output, while later steps reuse the arena: a, and the
    view of it that is returned, must not be overwritten by exp, neg and their sum."""
    b = GraphBuilder("reuse")
    x = b.input("x", (4, 64))
    a = b.Relu(x, name="a")
    flat = b.Reshape(a, shape=(256,), name="flat")
    e = b.Exp(b.Sin(x, name="s"), name="e")
    n = b.Neg(b.Cos(e, name="c"), name="n")
    b.output(flat, b.Add(n, b.Tanh(e, name="t"), name="out"))
    return b.build()


def test_outputs_never_share_memory_with_the_arena_or_a_later_run() -> None:
    graph = reused_graph()
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[])
    (placement,) = exe.placements
    part = placement.part
    assert isinstance(part, LlvmCpuPart)
    # Every intermediate the part does not return has its place in the arena.
    planned = {a.name for a in part.memory_plan.allocations}
    assert planned and not planned & {"a", "out"}
    assert all(a.offset % ALIGNMENT == 0 for a in part.memory_plan.allocations)
    rng = np.random.default_rng(0)
    first_in, second_in = ({"x": rng.standard_normal((4, 64)).astype(np.float32)} for _ in range(2))
    first = exe.run(first_in)
    kept = {name: array.copy() for name, array in first.items()}
    second = exe.run(second_in)
    for inputs, got in ((first_in, first), (second_in, second)):
        want = hetero.run_reference(graph, inputs)
        for name in ("flat", "out"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    for name, array in first.items():
        np.testing.assert_array_equal(array, kept[name])
        assert not np.shares_memory(array, second[name])


def test_run_intermediates_gives_every_value_right_though_they_share_the_arena_in_a_run() -> None:
    graph = reused_graph()
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[])
    part = exe.placements[0].part
    inputs = {"x": np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)}
    want = hetero.run_reference(graph, inputs, keep=True)
    got = part.run_intermediates(inputs)
    shared = {a.name for a in part.memory_plan.allocations} & set(got)
    assert len(shared) >= 2
    for name in got:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_loaded_part_plans_the_same_arena() -> None:
    exe = hetero.compile(reused_graph(), targets=["llvm_cpu"], passes=[])
    part = exe.placements[0].part
    again = LlvmCpuPart.from_artifact(part.artifact)
    assert again.memory_plan == part.memory_plan


def test_a_reshape_of_an_input_is_a_view_unless_it_is_handed_back() -> None:
    """A Reshape of a part input launches no kernel (it reads the input in place), and
    the input is never written; one that is itself an output stays a copy, so what a
    run returns never shares memory with what the caller passed."""
    b = GraphBuilder("input_view")
    x = b.input("x", (2, 3, 4))
    seen = b.Reshape(x, shape=(6, 4), name="seen")
    back = b.Reshape(x, shape=(24,), name="back")
    b.output(b.Relu(seen, name="r"), back)
    graph = b.build()
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[])
    steps = {s.name.partition(" ")[0]: s for s in exe.placements[0].part.steps}
    assert steps["seen"].kernel is None and steps["back"].kernel is not None
    x_in = np.random.default_rng(2).standard_normal((2, 3, 4)).astype(np.float32)
    kept = x_in.copy()
    got = exe.run({"x": x_in})
    want = hetero.run_reference(graph, {"x": kept})
    for name in ("r", "back"):
        np.testing.assert_array_equal(got[name], want[name])
    np.testing.assert_array_equal(x_in, kept)
    assert not np.shares_memory(got["back"], x_in)
