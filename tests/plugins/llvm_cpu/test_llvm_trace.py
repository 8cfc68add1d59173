"""default_schedule returns its schedule with the trace, and a compiled kernel keeps that
trace: replayed on the unscheduled function it gives the kernel's function again, a tuner
can vary it, and it survives the part's artifact round trip."""

from __future__ import annotations

import numpy as np

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.ir.tir.canon import canonical_names
from hetero.core.lower import lower_node
from hetero.core.schedule import Schedule, Trace
from hetero.plugins.llvm_cpu.part import LlvmCpuPart
from hetero.plugins.llvm_cpu.prepack import ConstantPacker
from hetero.plugins.llvm_cpu.schedules import default_schedule

RNG = np.random.default_rng(5)


def _gemm() -> Graph:
    """A @ W.T + c with constant W: the tiled schedule, whose packed W the part hoists."""
    gb = GraphBuilder("gemm")
    w = RNG.standard_normal((48, 32)).astype(np.float32)
    c = RNG.standard_normal(48).astype(np.float32)
    gb.output(gb.Gemm(gb.input("a", (8, 32)), w, c, transB=1))
    return gb.build()


def _tanh() -> Graph:
    gb = GraphBuilder("act")
    gb.output(gb.Tanh(gb.input("x", (64, 256))))
    return gb.build()


def _part(graph: Graph) -> LlvmCpuPart:
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=2)
    (placement,) = exe.placements
    return placement.part  # type: ignore[no-any-return]


def test_default_schedule_returns_the_schedule_and_its_trace_replays() -> None:
    for graph in (_gemm(), _tanh()):
        func = lower_node(graph.nodes[0])
        sch = default_schedule(func, 2)
        assert isinstance(sch, Schedule) and len(sch.trace) > 0
        assert sch.trace.apply(func) == sch.func


def test_the_compiled_kernel_keeps_the_trace_that_made_it() -> None:
    graph = _tanh()
    (step,) = _part(graph).steps
    trace = step.kernel.trace
    assert trace is not None and [ins.kind for ins in trace.instructions] == ["vectorize"]
    assert canonical_names(trace.apply(lower_node(graph.nodes[0]))) == step.kernel.func


def test_a_packed_kernels_trace_replays_before_the_packing() -> None:
    graph = _gemm()
    node = graph.nodes[0]
    (step,) = _part(graph).steps
    trace = step.kernel.trace
    assert trace is not None and "pack" in [ins.kind for ins in trace.instructions]
    scheduled = trace.apply(lower_node(node))
    packer = ConstantPacker({v.name: v.data for v in node.inputs if v.data is not None}, 2)
    hoisted, _ = packer.apply(scheduled, tuple(v.name for v in node.inputs), node.name)
    assert canonical_names(hoisted) == step.kernel.func


def test_a_tuner_can_vary_the_kept_trace() -> None:
    graph = _gemm()
    func = lower_node(graph.nodes[0])
    (step,) = _part(graph).steps
    trace = step.kernel.trace
    assert trace is not None
    position, decisions = next((k, d) for k, d in trace.decisions.items() if "factors" in d)
    factors = list(decisions["factors"])
    changed = [None, *factors[1:]] if factors[-1] == 1 else [None, 1]
    tuned = trace.with_decisions({position: {"factors": changed}}).apply(func)
    assert tuned != trace.apply(func)


def test_the_trace_survives_the_artifact_round_trip() -> None:
    part = _part(_gemm())
    again = LlvmCpuPart.from_artifact(part.artifact)
    for before, after in zip(part.steps, again.steps):
        assert before.kernel is not None and after.kernel is not None
        assert after.kernel.trace == before.kernel.trace and after.kernel.trace is not None
        assert Trace.from_json(after.kernel.trace.to_json()) == before.kernel.trace
