"""A backend of the smallest kind the shared parts allow: each kernel step's lowered
function, run by the tensor-IR interpreter. The tests of :mod:`hetero.core.parts` build
on it; it is also the shortest example of what a codegen backend supplies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
import pickle
from typing import Any

import numpy as np

from hetero.core.ir.tir import PrimFunc, run_func
from hetero.core.lower.steps import KernelStep
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.parts import ArrayType, BuiltStep, Clock, KernelBuilder, Step, StepPart
from hetero.core.ir import Graph
from hetero.core.parts import compile_steps
from hetero.core.plugin.backend import Backend
from hetero.core.plugin.target import Target


class InterpPart(StepPart[PrimFunc]):
    """Kernels are lowered functions, run by the interpreter."""

    backend = "interp"

    def launch(self, step: Step[PrimFunc], arrays: list[Any], clock: Clock) -> None:
        params = step.kernel.params
        clock.start()
        results = run_func(step.kernel, {b.name: a for b, a in zip(params, arrays)})
        for b, a in zip(params[len(step.inputs):], arrays[len(step.inputs):]):
            np.copyto(a, results[b.name])
        clock.stop(step.name)

    def kernel_output_types(self, step: Step[PrimFunc]) -> list[ArrayType]:
        return [(b.shape, b.dtype) for b in step.kernel.params[len(step.inputs):]]

    def save_kernel(self, step: Step[PrimFunc]) -> tuple[dict[str, Any], dict[str, bytes | str]]:
        return {"name": step.kernel.name}, {"pickle": pickle.dumps(step.kernel, protocol=4)}

    @classmethod
    def load_kernel(cls, saved: dict[str, Any], read: Callable[[str], bytes], settings: dict[str, Any]) -> PrimFunc:
        func = pickle.loads(read("pickle"))
        if func.name != saved["name"]:
            raise ValueError(f"kernel {saved['name']} holds {func.name}")
        return func


class InterpBuilder(KernelBuilder[PrimFunc]):
    """Each step's lowered function; records what :meth:`prepare` was given."""

    def __init__(self) -> None:
        self.prepared: list[str] | None = None

    def prepare(self, steps: Sequence[KernelStep]) -> None:
        self.prepared = [step.node.name for step in steps]

    def build(self, step: KernelStep) -> BuiltStep[PrimFunc]:
        func = step.lower()
        return BuiltStep(func, lambda: [("tir", "txt", str(func)), ("code", "py", f"# {func.name}\n")])


class InterpBackend(Backend):
    """The interpreter as a backend: a region compiles in two lines."""

    name = "interp"
    version = "0"
    device_kind = "cpu"
    memory = MemoryHierarchy([MemoryLevel("DRAM", 2**30, bandwidth_gbps=10.0, latency_ns=100.0)])

    def compile(self, subgraph: Graph, target: Target) -> InterpPart:
        return InterpPart(*compile_steps(subgraph, target, InterpBuilder()))

    def load_artifact(self, artifact: bytes) -> InterpPart:
        return InterpPart.from_artifact(artifact)
