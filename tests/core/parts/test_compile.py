"""The shared compile loop: steps, views, index checks, constants, aliases, the builder's
hooks, errors and the dump, on the interpreter backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.parts.interp import InterpBackend, InterpBuilder, InterpPart
from hetero.core import progress
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.lower.steps import KernelStep
from hetero.core.parts import STAGES, BuiltStep, compile_steps
from hetero.core.plugin.target import bind
from hetero.core.exec.reference import run_reference
from hetero.errors import CodegenError, PluginError


def _graph() -> Graph:
    """Conv + Relu (a fused group), a view of it, a Gather by run-time indices; the input and
    a constant handed straight through as outputs."""
    b = GraphBuilder("g")
    x = b.input("x", (1, 2, 4, 4))
    idx = b.input("i", (2,), "int64")
    w = np.random.default_rng(0).standard_normal((3, 2, 1, 1)).astype(np.float32)
    y = b.Relu(b.Conv(x, w, name="conv"), name="relu")
    flat = b.Reshape(y, shape=[3, 16], name="flat")
    b.output(b.Gather(flat, idx, axis=0, name="gather"), x,
             b.constant(np.array([1, 2], np.int64), "shape"))
    return b.build()


def test_a_region_becomes_steps_with_their_checks_constants_and_aliases() -> None:
    graph = _graph()
    builder = InterpBuilder()
    compiled = compile_steps(graph, bind(InterpBackend()), builder)
    assert compiled.inputs == ("x", "i") and compiled.outputs == ("gather", "x", "shape")
    assert [s.name for s in compiled.steps] == ["conv (Conv+Relu)", "flat (Reshape)", "gather (Gather)"]
    assert builder.prepared == ["conv", "gather"]  # the kernel steps, not the view
    conv, flat, gather = compiled.steps
    assert conv.nodes == ("conv", "relu") and conv.output_types == (((1, 3, 4, 4), np.dtype(np.float32)),)
    assert flat.view == (3, 16) and flat.kernel is None
    assert gather.checks == (("i", 0, 3, True),)
    # The weight the conv reads and the constant output; the input and the constant handed through.
    assert set(compiled.constants) == {conv.inputs[1], "shape"}
    assert compiled.aliases == {"x": "x", "shape": "shape"}
    part = InterpPart(*compiled)
    inputs = {"x": np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32),
              "i": np.array([2, 0])}
    got, want = part.run(inputs), run_reference(graph, inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_each_step_is_one_progress_item() -> None:
    seen: list[tuple[str, int, int, str]] = []

    class Recorder:
        def step(self, stage: str, index: int, total: int, label: str) -> None:
            seen.append((stage, index, total, label))

        def end(self, stage: str) -> None:
            pass

    with progress.reporting(Recorder()):
        compile_steps(_graph(), bind(InterpBackend()), InterpBuilder())
    assert seen == [("kernel", 1, 3, "conv"), ("kernel", 2, 3, "flat"), ("kernel", 3, 3, "gather")]


def test_a_kernel_that_fails_to_build_is_a_plugin_error_naming_backend_and_step() -> None:
    class Failing(InterpBuilder):
        def build(self, step: KernelStep) -> BuiltStep:
            if step.node.op == "Gather":
                raise CodegenError("no gathers today")
            return super().build(step)

    with pytest.raises(PluginError, match=r"interp could not build gather \(Gather\): no gathers today"):
        compile_steps(_graph(), bind(InterpBackend()), Failing())


def test_a_builder_may_read_other_values_and_hold_their_constants() -> None:
    """As llvm_cpu's packed weights: a kernel reading a constant the builder made."""
    graph = _graph()

    class Packing(InterpBuilder):
        def __init__(self) -> None:
            super().__init__()
            self.constants = {n: v.data for n, v in graph.values.items() if v.data is not None}

        def build(self, step: KernelStep) -> BuiltStep:
            built = super().build(step)
            if step.node.op != "Conv":
                return built
            weight = step.inputs[1]
            self.constants[f"{weight}_packed"] = self.constants[weight].copy()
            return BuiltStep(built.kernel, built.stages, (step.inputs[0], f"{weight}_packed"))

    compiled = compile_steps(graph, bind(InterpBackend()), Packing())
    packed = compiled.steps[0].inputs[1]
    assert packed.endswith("_packed") and set(compiled.constants) == {packed, "shape"}


def test_the_dump_writes_the_graph_and_the_builders_stages_per_kernel_step(tmp_path: Path) -> None:
    compile_steps(_graph(), bind(InterpBackend(), dump_dir=tmp_path), InterpBuilder())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["code", "graph", "tir"]
    assert sorted(p.name for p in (tmp_path / "graph").iterdir()) == ["conv.txt", "gather.txt"]
    assert (tmp_path / "graph" / "conv.txt").read_text().splitlines()[1].startswith("%relu = Relu(%conv)")
    assert "func conv(" in (tmp_path / "tir" / "conv.txt").read_text()
    assert (tmp_path / "code" / "gather.py").read_text() == "# gather\n"
    assert set(p.name for p in tmp_path.iterdir()) <= set(STAGES)


def test_a_backend_of_two_lines_compiles_and_loads_its_artifact() -> None:
    graph = _graph()
    part = bind(InterpBackend()).compile(graph)
    again = InterpBackend().load_artifact(part.artifact)
    inputs = {"x": np.ones((1, 2, 4, 4), np.float32), "i": np.array([1, 1])}
    np.testing.assert_array_equal(again.run(inputs)["gather"], run_reference(graph, inputs)["gather"])
