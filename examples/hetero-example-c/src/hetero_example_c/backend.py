"""The example C backend: what it declares, what it takes, and how it compiles.

It stands for a generic C target (here the host, through its C compiler). It takes the
ops of a CNN and of a transformer block, in the dtypes C has types for, and compiles a
region as one C file: the kit's compile loop plans the kernel steps (:mod:`.part`), each
kernel is lowered, scheduled, legalised and printed (:mod:`.kernels`), the system
compiler builds one shared library for the region (:mod:`.toolchain`), and the part
calls its functions through ctypes on host numpy arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
import os
from typing import Any
import zipfile

import numpy as np

from hetero.plugin import (
    Backend, Graph, MemoryHierarchy, MemoryLevel, Node, Option, PluginError, Support, Target, chain, check, dtypes,
    ops,
)
from hetero.plugin.codegen import CFunction, c_source
from hetero.plugin.lower import is_lowerable
from hetero.plugin.parts import StageDump
from hetero.plugin.tir import PrimFunc
from hetero_example_c.kernels import Kernel, build_kernel
from hetero_example_c.part import StepPart, compile_region, read_text
from hetero_example_c.toolchain import INSTALL_HINT, CProgram, find_compiler

NAME = "example_c"
#: Bump with every change to the C the backend writes: the compile cache keys on it.
VERSION = "0.1.0"

#: The ops of a CNN (BatchNormalization for what folding leaves) and of a transformer
#: block, as canonical op names (``hetero.plugin.op_names()``).
OPS = (
    "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Conv", "Div", "Dropout", "Equal",
    "Erf", "Exp", "Expand", "Flatten", "Gather", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool",
    "Identity", "LayerNormalization", "LeakyRelu", "MatMul", "Max", "MaxPool", "Min", "Mul", "Neg", "Pow",
    "ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Split", "Sqrt",
    "Squeeze", "Sub", "Tanh", "Transpose", "Unsqueeze", "Where",
)
#: Those this hetero can lower to the tensor IR (every one, today).
SUPPORTED_OPS = frozenset(op for op in OPS if is_lowerable(op))
#: The dtypes computed in: each has a C type.
DTYPES = (np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64, np.bool_)

CHECK = chain(
    ops(SUPPORTED_OPS, NAME),
    dtypes(DTYPES, NAME),
    check(lambda node, _: all(v.type.size > 0 for v in node.outputs),
          lambda node: f"{node.name} produces an empty tensor; {NAME} needs at least one element"),
)

OPTIONS = (
    Option("example_c_openmp", "run the outer loops of large kernels on every core with OpenMP "
                               "(the C compiler must accept -fopenmp)", default=False, types=(bool,)),
)


def _host_memory() -> MemoryHierarchy:
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = 16 * 2**30
    return MemoryHierarchy([MemoryLevel("DRAM", ram, bandwidth_gbps=20.0, latency_ns=90.0)])


class ExampleCBackend(Backend):
    """A C target built by the system compiler: the ops of a CNN and a transformer."""

    name = NAME
    version = VERSION
    device_kind = "cpu"
    options = OPTIONS
    peak_gflops = 8.0  # plain C loops, a few GFLOP/s a core: the partitioner needs the order only
    supported_ops = SUPPORTED_OPS

    def __init__(self) -> None:
        self.memory = _host_memory()

    def device_status(self) -> str:
        return "" if find_compiler() is not None else INSTALL_HINT

    def supports(self, node: Node, target: Target) -> Support:
        return CHECK(node, target)

    def compile(self, subgraph: Graph, target: Target) -> StepPart:
        for node in subgraph.nodes:
            verdict = self.supports(node, target)
            if not verdict:
                raise PluginError(f"{NAME} cannot compile node {node.name} of {subgraph.name}: {verdict.reason}")
        openmp = bool(target.options["example_c_openmp"])
        kernels: dict[str, Kernel] = {}

        def build(func: PrimFunc, dump: StageDump, file: str) -> str:
            if func.name not in kernels:  # equal kernels have equal canonical names: one C function
                kernels[func.name] = build_kernel(func, openmp)
            kernels[func.name].dump(dump, file)
            return func.name

        dump = StageDump(target.dump_dir)
        region = compile_region(subgraph, build, dump)
        functions: list[CFunction] = [k.function for k in kernels.values()]
        source = c_source(functions, f"{NAME} {VERSION}: one region's kernels, written by hetero-example-c")
        dump.write("code", "region", "c", source)
        return StepPart(region, CProgram(source, openmp), NAME)

    def load_artifact(self, artifact: bytes) -> StepPart:
        return StepPart.from_artifact(artifact, NAME, _load_program)


def _load_program(zf: zipfile.ZipFile, settings: Mapping[str, Any], source: str) -> CProgram:
    """The program of an artifact: its C built again (a cache hit on this machine)."""
    return CProgram(read_text(zf, "region.c", source), bool(settings["openmp"]))


__all__ = ["DTYPES", "NAME", "OPS", "OPTIONS", "SUPPORTED_OPS", "VERSION", "ExampleCBackend"]
