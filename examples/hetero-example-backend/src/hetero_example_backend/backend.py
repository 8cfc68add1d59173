"""The example backend: what it declares, what it refuses, and how it compiles.

It stands for a small NPU: 1 GiB of DRAM, 256 KiB of on-chip SRAM, six float32
ops. Its code generator emits numpy, so it runs on any machine, but the partitioner
sees only the declarations and treats it as the device they describe.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from hetero import GraphBuilder
from hetero.core.ir.graph import Graph, Node
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.passes.pattern import Const, Match, Op, Var
from hetero.core.plugin import Backend, Pattern, Support
from hetero.errors import PluginError
from hetero_example_backend.codegen import generate
from hetero_example_backend.part import ExamplePart, unpack

#: Where tensors live between parts; transfers to and from the host go through it.
DRAM = MemoryLevel("DRAM", 2**30, bandwidth_gbps=25.0, latency_ns=200.0)
#: On-chip memory that a fused matmul_bias keeps its weights in.
SRAM = MemoryLevel("SRAM", 256 * 2**10, bandwidth_gbps=400.0, latency_ns=2.0, scope="shared")

_FLOAT32 = np.dtype(np.float32)


def _float32_only(node: Node) -> Support:
    """Refuse ``node`` when any tensor it reads or writes is not float32."""
    for value in [*node.inputs, *node.outputs]:
        if value is not None and value.dtype != _FLOAT32:
            return Support.no(f"the example backend computes in float32 only; "
                              f"{node.op} {node.name} has {value.name} of {value.dtype.name}")
    return Support.yes()


def _matmul_bias_check(match: Match) -> Support:
    """Accept a float32 matmul_bias whose weights and bias fit in SRAM together."""
    for node in (match.node("matmul"), match.root):
        verdict = _float32_only(node)
        if not verdict:
            return verdict
    need = match.const("w").nbytes + match.const("b").nbytes
    if need > SRAM.capacity_bytes:
        return Support.no(f"matmul_bias needs {need} bytes of weights and bias on chip; "
                          f"the {SRAM} scratchpad holds {SRAM.capacity_bytes}")
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
    supported_ops = frozenset({"Relu", "Sigmoid", "Add", "Mul", "MatMul", "Gemm"})
    patterns = (MATMUL_BIAS,)

    def supports(self, node: Node) -> Support:
        """Take a declared op when all its tensors are float32 (and Gemm's A is not transposed)."""
        if node.op not in self.supported_ops:
            return Support.no(f"the example backend does not implement {node.op}")
        verdict = _float32_only(node)
        if not verdict:
            return verdict
        if node.op == "Gemm" and node.attrs["transA"]:
            return Support.no("the example backend's Gemm reads A as stored: transA=1 is not "
                              "implemented (transB=1 is)")
        return Support.yes()

    def compile(self, subgraph: Graph, options: Mapping[str, Any]) -> ExamplePart:
        """Generate one numpy function for ``subgraph``; ``dump_dir`` receives ``kernel.py``."""
        for node in subgraph.nodes:
            verdict = self.supports(node)
            if not verdict:
                raise PluginError(f"example cannot compile node {node.name} of graph "
                                  f"{subgraph.name}: {verdict.reason}")
        part = ExamplePart(generate(subgraph))
        if options.get("dump_dir") is not None:
            folder = Path(options["dump_dir"])
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "kernel.py").write_text(part.source)
        return part

    def load_artifact(self, artifact: bytes) -> ExamplePart:
        """Rebuild a part from :attr:`ExamplePart.artifact`."""
        return ExamplePart(unpack(artifact))
