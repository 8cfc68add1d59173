"""The example backend: what it declares, what it refuses, and how it compiles.

It stands for a small NPU: 1 GiB of DRAM, 256 KiB of on-chip SRAM, six float32
ops. Its code generator emits numpy, so it runs on any machine, but the partitioner
sees only the declarations and treats it as the device they describe.
"""

from __future__ import annotations

import numpy as np

from hetero.plugin import (
    Backend, Const, Graph, GraphBuilder, Match, MemoryHierarchy, MemoryLevel, Node, Op, Pattern, PluginError,
    Support, Target, Var, attribute, chain, dtypes, ops,
)
from hetero_example_backend.codegen import generate
from hetero_example_backend.part import ExamplePart, unpack

#: Where tensors live between parts; transfers to and from the host go through it.
DRAM = MemoryLevel("DRAM", 2**30, bandwidth_gbps=25.0, latency_ns=200.0)
#: On-chip memory that a fused matmul_bias keeps its weights in.
SRAM = MemoryLevel("SRAM", 256 * 2**10, bandwidth_gbps=400.0, latency_ns=2.0, scope="shared")

#: What the backend takes: its six ops, in float32, and Gemm only with A as stored.
SUPPORTED_OPS = frozenset({"Relu", "Sigmoid", "Add", "Mul", "MatMul", "Gemm"})
_FLOAT32 = dtypes({np.float32}, "the example backend")
CHECK = chain(
    ops(SUPPORTED_OPS, "the example backend"),
    _FLOAT32,
    attribute("Gemm", "transA", lambda t: not t,
              "the example backend's Gemm reads A as stored: transA=1 is not implemented (transB=1 is)"),
)


def _matmul_bias_check(match: Match, target: Target) -> Support:
    """Accept a float32 matmul_bias whose weights and bias fit in the target's on-chip
    memory together."""
    for node in (match.node("matmul"), match.root):
        verdict = _FLOAT32(node, target)
        if not verdict:
            return verdict
    sram = target.memory.levels[-1]
    need = match.const("w").nbytes + match.const("b").nbytes
    if need > sram.capacity_bytes:
        return Support.no(f"matmul_bias needs {need} bytes of weights and bias on chip; "
                          f"the {sram} scratchpad holds {sram.capacity_bytes}")
    return Support.yes()


def matmul_bias_example() -> Graph:
    """The smallest graph the matmul_bias pattern takes: ``x @ w + b``, w and b constant."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("matmul_bias")
    x = b.input("x", (4, 16))
    y = b.MatMul(x, rng.standard_normal((16, 8)).astype(np.float32), name="matmul")
    b.output(b.Add(y, rng.standard_normal(8).astype(np.float32), name="bias"))
    return b.build()


MATMUL_BIAS = Pattern(
    "matmul_bias",
    Op("Add", Op("MatMul", Var("x"), Const("w"), name="matmul"), Const("b"), commute=True),
    check=_matmul_bias_check,
    example=matmul_bias_example,
)


class ExampleBackend(Backend):
    """Compiles float32 subgraphs of Relu, Sigmoid, Add, Mul, MatMul and Gemm to numpy."""

    name = "example"
    version = "0.1.0"
    device_kind = "npu"
    memory = MemoryHierarchy([DRAM, SRAM])
    peak_gflops = 50.0
    supported_ops = SUPPORTED_OPS
    patterns = (MATMUL_BIAS,)

    def supports(self, node: Node, target: Target) -> Support:
        """Take a declared op when all its tensors are float32 (and Gemm's A is not transposed)."""
        return CHECK(node, target)

    def compile(self, subgraph: Graph, target: Target) -> ExamplePart:
        """Generate one numpy function for ``subgraph``; a dump folder receives ``kernel.py``."""
        for node in subgraph.nodes:
            verdict = self.supports(node, target)
            if not verdict:
                raise PluginError(f"example cannot compile node {node.name} of graph "
                                  f"{subgraph.name}: {verdict.reason}")
        part = ExamplePart(generate(subgraph))
        if target.dump_dir is not None:
            target.dump_dir.mkdir(parents=True, exist_ok=True)
            (target.dump_dir / "kernel.py").write_text(part.source)
        return part

    def load_artifact(self, artifact: bytes) -> ExamplePart:
        """Rebuild a part from :attr:`ExamplePart.artifact`."""
        return ExamplePart(unpack(artifact))
