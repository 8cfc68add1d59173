"""An int8 region that npu_sim declines while compiling falls back to llvm_cpu, which runs
hetero's integer ops bit for bit as their references do."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.compiler import CompileFallbackWarning
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.passes.lower_qdq import lower_qdq
from hetero.core.passes.quantize import quantize
from hetero.core.quant import calibrate


def bias_then_matmul() -> tuple[Graph, list[dict[str, np.ndarray]]]:
    """The smallest graph npu_sim declines: a 4-D Add (a QAdd, whose output npu_sim keeps
    NHWC in its DRAM) read by a MatMul (a QMatMul, which needs its rows contiguous),
    quantised to int8 and lowered; with sample inputs."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("bias_then_matmul")
    x = b.input("x", (1, 2, 3, 8))
    shifted = b.Add(x, rng.normal(0, 0.1, 8).astype(np.float32))
    b.output(b.MatMul(shifted, rng.normal(0, 0.3, (8, 4)).astype(np.float32)))
    graph = b.build()
    samples = [{"x": rng.normal(0, 1, (1, 2, 3, 8)).astype(np.float32)} for _ in range(4)]
    return lower_qdq(quantize(graph, calibrate(graph, samples))), samples


def test_a_declined_int8_region_runs_on_llvm_cpu_exactly() -> None:
    graph, samples = bias_then_matmul()
    assert {"QAdd", "QMatMul"} <= {n.op for n in graph.nodes}
    with pytest.warns(CompileFallbackWarning, match="leading axes are not contiguous"):
        exe = hetero.compile(graph, targets=["npu_sim", "llvm_cpu"], passes=[])
    (fallback,) = exe.fallbacks
    assert (fallback.backend, fallback.fallback) == ("npu_sim", "llvm_cpu")
    region = next(p for p in exe.placements if p.region == fallback.region)
    assert region.backend == "llvm_cpu"
    name = graph.outputs[0].name
    for sample in samples:
        np.testing.assert_array_equal(exe.run(sample)[name], hetero.run_reference(graph, sample)[name])
