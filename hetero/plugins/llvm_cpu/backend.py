"""The llvm_cpu backend: every canonical op, compiled to machine code for the host CPU.

``compile`` groups anchors with their epilogues (:mod:`hetero.core.passes.fuse`),
lowers each group or lone node to the tensor IR, applies the default CPU schedule,
and JIT-compiles it; the kernels make an :class:`~hetero.plugins.llvm_cpu.part.LlvmCpuPart`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
import os
from pathlib import Path
from typing import Any

import numpy as np

from hetero.plugin import (
    Backend, Declarations, Graph, MemoryHierarchy, MemoryLevel, Node, Option, OptionError, Support, Target,
    block_layout, index_checks, op_names, pads_groups, progress, timing,
)
from hetero.plugin.lower import VIEW_OPS, KernelStep, fuse_epilogues, is_lowerable, kernel_steps
from hetero.plugin.schedule import TUNED_OPTION, Trace, TuningTask
from hetero.plugin.tir import PrimFunc, canonical_names
from hetero.plugins.llvm_cpu import tuning, tuning_features
from hetero.plugins.llvm_cpu.host import host
from hetero.plugins.llvm_cpu.jit import OWNER, compile_all, compile_workers
from hetero.plugins.llvm_cpu.kernel import CompiledKernel, compile_kernel
from hetero.plugins.llvm_cpu.part import LlvmCpuPart, Step
from hetero.plugins.llvm_cpu.prepack import ConstantPacker
from hetero.plugins.llvm_cpu.target import emit_assembly, emit_object, host_features
from hetero.plugins.llvm_cpu.ungroup import ungroup_convs

#: Part of every compile-cache key: 0.2 artifacts have packed stage entries for the
#: native runtime, which 0.1's lack, so their entries are never asked for again.
VERSION = "0.2.0"




def _host_memory() -> MemoryHierarchy:
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = 16 * 2**30
    # Typical server-core figures; the partitioner only needs their order of magnitude.
    return MemoryHierarchy([
        MemoryLevel("DRAM", ram, bandwidth_gbps=20.0, latency_ns=90.0),
        MemoryLevel("L2", 2 * 2**20, bandwidth_gbps=200.0, latency_ns=4.0, scope="shared"),
        MemoryLevel("L1", 48 * 2**10, bandwidth_gbps=800.0, latency_ns=1.0, scope="local"),
    ])


def _peak_gflops() -> float:
    features = host_features()
    lanes = 16 if features.get("avx512f") else 8 if features.get("avx2") else 4
    fma = 2 if features.get("fma") or features.get("avx512f") else 1
    # Two vector FMA pipes at about 3 GHz per core.
    return (os.cpu_count() or 1) * 2 * lanes * fma * 3.0


#: The compile options llvm_cpu reads.
OPTIONS = (
    Option("num_threads", "threads each kernel runs on (default: every core of the host)", types=(int,)),
    Option("aot", "with a dump folder, also write each kernel's object file and assembly for this "
                  "TRIPLE[:CPU] (e.g. aarch64-unknown-linux-gnu:cortex-a76)", types=(str,)),
    Option("int8", "run a quantised (QDQ) model's units as integer kernels, as onnxruntime's CPU "
                   "provider does, rather than in float QDQ arithmetic", default=False, types=(bool,)),
    Option("layout", "activation layout of convolution chains: 'blocked' (NCHW[x]c, x the vector's "
                     "float32 lanes) or 'nchw' (as imported)", default="blocked", choices=("blocked", "nchw")),
    Option(TUNED_OPTION, "tuned schedule per kernel: {task key: trace JSON}; hetero.compile(records=FILE) "
                         "fills it from `hetero tune` records", types=(dict,)),
)


class LlvmCpuBackend(Backend):
    """The host CPU through LLVM: it takes every canonical op, so it can be the fallback."""

    name = "llvm_cpu"
    version = VERSION
    device_kind = "cpu"
    options = OPTIONS
    takes_every_op = True
    # Its constants load as views of the artifact (the mapped cache entry), not copies.
    artifact_views = True

    def __init__(self) -> None:
        self.memory = _host_memory()
        self.peak_gflops = _peak_gflops()
        self.supported_ops = frozenset(op for op in op_names() if is_lowerable(op))

    def declare(self, options: Mapping[str, Any]) -> Declarations:
        """The host, whatever the options (``int8`` declares that it computes in int8);
        refuses a thread count below one and a malformed ``aot`` target."""
        threads = options["num_threads"]
        if threads is not None and threads < 1:
            raise OptionError(f"llvm_cpu: num_threads must be at least 1, got {threads}")
        aot = options["aot"]
        if aot is not None and not aot.partition(":")[0]:
            raise OptionError(f"llvm_cpu: aot takes TRIPLE or TRIPLE:CPU (e.g. x86_64-unknown-linux-gnu), "
                              f"got {aot!r}")
        return replace(super().declare(options), computes_int8=bool(options["int8"]))

    def supports(self, node: Node, target: Target) -> Support:
        if node.op not in self.supported_ops:
            return Support.no(f"llvm_cpu has no lowering for {node.op}")
        if any(v.type.size == 0 for v in node.outputs):
            return Support.no(f"{node.name} produces an empty tensor; llvm_cpu needs at least one element")
        return Support.yes()

    def compile(self, subgraph: Graph, target: Target) -> LlvmCpuPart:
        threads = _threads(target)
        dump = target.dump_dir
        tuned = target.options[TUNED_OPTION] or {}
        graph = kernel_graph(subgraph, target)
        packer = ConstantPacker({n: v.data for n, v in graph.values.items() if v.data is not None}, threads,
                                graph.values)
        plan = kernel_steps(graph, VIEW_OPS)
        # Every kernel's function first, then LLVM's work on all of them at once (on the
        # host's cores), then the kernels, each a cache hit.
        made: list[_KernelFunction | None] = []
        for index, step in enumerate(plan):
            progress.step("kernel", index + 1, len(plan), step.node.name)
            made.append(None if step.view is not None else _kernel_function(step, threads, packer, tuned))
        progress.end("kernel")
        progress.step("LLVM", 0, 0, f"{sum(m is not None for m in made)} kernels")
        compile_all((m.canonical for m in made if m is not None), compile_workers(host().cores))
        progress.end("LLVM")
        steps: list[Step] = []
        for step, kf in zip(plan, made):
            if kf is None:
                # A fresh array of ours that no caller holds: viewing it is safe and free.
                steps.append(Step(step.label, None, step.inputs, step.outputs, step.names, view=step.view))
                continue
            kernel = compile_kernel(kf.canonical, threads, kf.trace)
            if dump is not None:
                _dump(dump, kf.name, kernel, kf.scheduled, target.options["aot"])
            steps.append(Step(step.label, kernel, kf.inputs, step.outputs, step.names,
                              tuple(c for n in step.members for c in index_checks(n))))
        used = {n for s in steps for n in s.inputs}
        constants = {name: data for name, data in packer.constants.items() if name in used}
        aliases = {v.name: v.name for v in graph.outputs if v.producer is None}
        for v in graph.outputs:
            if v.data is not None:
                constants[v.name] = v.data
        with timing.phase("plan arena", OWNER):
            return LlvmCpuPart(tuple(v.name for v in graph.inputs), tuple(v.name for v in graph.outputs),
                               steps, constants, aliases)

    def load_artifact(self, artifact: bytes | memoryview) -> LlvmCpuPart:
        return LlvmCpuPart.from_artifact(artifact)

    def tuning_tasks(self, subgraph: Graph, target: Target) -> list[TuningTask]:
        return tuning.tasks(kernel_graph(subgraph, target), _threads(target), self.name)

    def tuning_replay(self, task: TuningTask, trace: Trace) -> None:
        tuning.replay(task, trace)

    def tuning_measure(self, task: TuningTask, trace: Trace, repeats: int,
                       seed: int) -> tuple[float, list[np.ndarray]]:
        return tuning.measure(task, trace, repeats, seed)

    def tuning_machine(self) -> dict[str, Any]:
        return tuning.machine()

    def tuning_features(self, task: TuningTask, trace: Trace) -> list[float] | None:
        return tuning_features.tuning_features(task, trace)


def _threads(target: Target) -> int:
    return int(target.options["num_threads"] or os.cpu_count() or 1)


def kernel_graph(subgraph: Graph, target: Target) -> Graph:
    """``subgraph`` after llvm_cpu's graph passes: the graph whose steps become kernels."""
    with timing.phase("graph passes", OWNER):
        if target.options["layout"] == "nchw":
            return fuse_epilogues(ungroup_convs(subgraph))
        lanes = host().lanes(4)
        graph = fuse_epilogues(ungroup_convs(subgraph, keep=lambda conv: pads_groups(conv, lanes)))
        graph = block_layout(graph, lanes)
    return graph


@dataclass(frozen=True)
class _KernelFunction:
    """One step's kernel before LLVM: its lowered function's name, the function scheduled
    (weights packed) and with canonical names (what compiles), its schedule's trace, and
    the values its parameters read."""

    name: str
    scheduled: PrimFunc
    canonical: PrimFunc
    trace: Trace
    inputs: tuple[str, ...]


def _kernel_function(step: KernelStep, threads: int, packer: ConstantPacker,
                     tuned: Mapping[str, str]) -> _KernelFunction:
    """``step`` lowered, scheduled, its weight packing done and its names made canonical."""
    node = step.node
    with timing.phase("lower", OWNER):
        func = step.lower()
    with timing.phase("schedule", OWNER):
        scheduled, trace = tuning.schedule_kernel(func, threads, tuned)
    # Stages that only reorder weights (packing) run here, once, not on every call.
    with timing.phase("pack constants", OWNER):
        scheduled, inputs = packer.apply(scheduled, step.inputs, node.name)
    # Canonical names make equal kernels (same op, shapes, attributes) one compile.
    with timing.phase("canonical names", OWNER):
        canonical = canonical_names(scheduled)
    return _KernelFunction(func.name, scheduled, canonical, trace, inputs)


def _dump(folder: Path, name: str, kernel: CompiledKernel, func: Any, aot: str | None) -> None:
    """Write every stage of one kernel; ``aot`` ("TRIPLE" or "TRIPLE:CPU") adds an object
    file and assembly for that target, for ahead-of-time use."""
    for stage, suffix, text in (("tir", "txt", str(func)), ("llvm", "ll", kernel.llvm_ir),
                                ("asm", "s", kernel.assembly)):
        (folder / stage).mkdir(parents=True, exist_ok=True)
        (folder / stage / f"{name}.{suffix}").write_text(text)
    if aot:
        triple, _, cpu = aot.partition(":")
        (folder / "aot").mkdir(parents=True, exist_ok=True)
        (folder / "aot" / f"{name}.o").write_bytes(emit_object(func, triple, cpu or "generic"))
        (folder / "aot" / f"{name}.s").write_text(emit_assembly(func, triple, cpu or "generic"))
