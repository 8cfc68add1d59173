"""The llvm_cpu backend: every canonical op, compiled to machine code for the host CPU.

``compile`` runs llvm_cpu's graph passes (epilogues grouped with their anchors, grouped
convolutions split, the blocked layout: :func:`kernel_graph`) and hands the region to the
shared compile loop (:func:`~hetero.plugin.parts.compile_steps`) with its builder: every
kernel step lowered to the tensor IR, given the default CPU schedule (or a tuned one)
and its weight packing, then LLVM on all the distinct functions at once, on the host's
cores; the kernels make an :class:`~hetero.plugins.llvm_cpu.part.LlvmCpuPart`. With a
dump folder each step's stages are written (the tensor IR as lowered, scheduled and
legalised, LLVM IR and assembly in ``code/``, the launch in ``report/``); the ``aot``
option adds an object file and assembly for another target (``code/<step>.aot.o``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
import os
from typing import Any

import numpy as np

from hetero.plugin import (
    Backend, Declarations, Graph, MemoryHierarchy, MemoryLevel, Node, Option, OptionError, Support, Target,
    block_layout, chain, nonempty_outputs, op_names, pads_groups, progress, timing,
)
from hetero.plugin.lower import KernelStep, fuse_epilogues, is_lowerable
from hetero.plugin.parts import BuiltStep, KernelBuilder, StageFile, compile_steps, lowerable
from hetero.plugin.schedule import TUNED_OPTION, Trace, TuningTask
from hetero.plugin.tir import PrimFunc, canonical_names, legalize
from hetero.plugins.llvm_cpu import tuning, tuning_features
from hetero.plugins.llvm_cpu.exprs import CPU_NATIVE
from hetero.plugins.llvm_cpu.host import host, usable_cpus
from hetero.plugins.llvm_cpu.jit import OWNER, compile_all, compile_workers
from hetero.plugins.llvm_cpu.kernel import CompiledKernel, compile_kernel
from hetero.plugins.llvm_cpu.part import LlvmCpuPart
from hetero.plugins.llvm_cpu.prepack import ConstantPacker
from hetero.plugins.llvm_cpu.target import emit_assembly, emit_object, host_features
from hetero.plugins.llvm_cpu.ungroup import ungroup_convs

#: Part of every compile-cache key: 0.3 artifacts have the shared step parts' manifest
#: (hetero.plugin.parts), which 0.2's lack, so their entries are never asked for again.
VERSION = "0.3.0"

#: What llvm_cpu refuses: ops without a lowering, and empty outputs.
SUPPORTS = chain(lowerable("llvm_cpu"), nonempty_outputs("llvm_cpu"))


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
    return usable_cpus()[0] * 2 * lanes * fma * 3.0


#: The compile options llvm_cpu reads.
OPTIONS = (
    Option("num_threads", "threads each kernel runs on (default: the CPUs this process may use: its affinity "
                          "mask, lowered to a cgroup CPU quota)", types=(int,)),
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
        return SUPPORTS(node, target)

    def compile(self, subgraph: Graph, target: Target) -> LlvmCpuPart:
        graph = kernel_graph(subgraph, target)
        threads = _threads(target)
        builder = _Builder(graph, threads[0], target.options[TUNED_OPTION] or {}, target.options["aot"])
        compiled = compile_steps(graph, target, builder, fused=True)
        with timing.phase("plan arena", OWNER):
            return LlvmCpuPart(*compiled, threads=threads)

    def load_artifact(self, artifact: bytes | memoryview) -> LlvmCpuPart:
        return LlvmCpuPart.from_artifact(artifact)

    def tuning_tasks(self, subgraph: Graph, target: Target) -> list[TuningTask]:
        return tuning.tasks(kernel_graph(subgraph, target), _threads(target)[0], self.name)

    def tuning_replay(self, task: TuningTask, trace: Trace) -> None:
        tuning.replay(task, trace)

    def tuning_measure(self, task: TuningTask, trace: Trace, repeats: int,
                       seed: int) -> tuple[float, list[np.ndarray]]:
        return tuning.measure(task, trace, repeats, seed)

    def tuning_machine(self) -> dict[str, Any]:
        return tuning.machine()

    def tuning_features(self, task: TuningTask, trace: Trace) -> list[float] | None:
        return tuning_features.tuning_features(task, trace)


def _threads(target: Target) -> tuple[int, str]:
    """The threads each kernel runs on, and why that many."""
    given = target.options["num_threads"]
    if given:
        return int(given), f"num_threads={given} was given"
    count, why = usable_cpus()
    return count, f"{why} (num_threads not given)"


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
    """One step's kernel before LLVM: its function as lowered, then scheduled (weights
    packed), then with canonical names (what compiles), its schedule's trace, and the
    values its parameters read."""

    lowered: PrimFunc
    scheduled: PrimFunc
    canonical: PrimFunc
    trace: Trace
    inputs: tuple[str, ...]


class _Builder(KernelBuilder[CompiledKernel]):
    """llvm_cpu's kernels: every step's function first (:meth:`prepare`), then LLVM's work
    on all of them at once, on the host's cores, then each kernel, a cache hit (:meth:`build`)."""

    def __init__(self, graph: Graph, threads: int, tuned: Mapping[str, str], aot: str | None) -> None:
        self.threads = threads
        self.tuned = tuned
        self.aot = aot
        self.packer = ConstantPacker({n: v.data for n, v in graph.values.items() if v.data is not None}, threads,
                                     graph.values)
        self.constants = self.packer.constants  # the graph's and the packed weights
        self._made: dict[str, _KernelFunction] = {}

    def prepare(self, steps: Sequence[KernelStep]) -> None:
        for index, step in enumerate(steps):
            progress.step("lower", index + 1, len(steps), step.node.name)
            self._made[step.node.name] = _kernel_function(step, self.threads, self.packer, self.tuned)
        progress.end("lower")
        progress.step("LLVM", 0, 0, f"{len(steps)} kernels")
        compile_all((m.canonical for m in self._made.values()), compile_workers(host().cores))
        progress.end("LLVM")

    def build(self, step: KernelStep) -> BuiltStep[CompiledKernel]:
        made = self._made[step.node.name]
        kernel = compile_kernel(made.canonical, self.threads, made.trace)
        return BuiltStep(kernel, lambda: _stages(made, kernel, self.aot), made.inputs)


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
    return _KernelFunction(func, scheduled, canonical, trace, inputs)


def _stages(made: _KernelFunction, kernel: CompiledKernel, aot: str | None) -> list[StageFile]:
    """Every dump stage of one kernel; ``aot`` ("TRIPLE" or "TRIPLE:CPU") adds an object
    file and assembly for that target, for ahead-of-time use."""
    files: list[StageFile] = [
        ("tir", "txt", str(made.lowered)), ("scheduled", "txt", str(made.scheduled)),
        ("legalized", "txt", str(legalize(made.scheduled, CPU_NATIVE))),
        ("code", "ll", kernel.llvm_ir), ("code", "s", kernel.assembly), ("report", "txt", _launches(kernel)),
    ]
    if aot:
        triple, _, cpu = aot.partition(":")
        files += [("code", "aot.o", emit_object(made.scheduled, triple, cpu or "generic")),
                  ("code", "aot.s", emit_assembly(made.scheduled, triple, cpu or "generic"))]
    return files


def _launches(kernel: CompiledKernel) -> str:
    """How a call of ``kernel`` runs: each stage's range and the chunks the threads share,
    its workspaces, and the schedule's trace."""
    space = sum(w.nbytes for w in kernel.module.workspaces)
    lines = [f"kernel {kernel.name}: {len(kernel.launch_plan)} stage(s) on {kernel.num_threads} thread(s), "
             f"{space} bytes of workspace"]
    for (entry, _), (symbol, parts) in zip(kernel.module.entries, kernel.launch_plan):
        kind = "parallel" if entry.parallel else "serial"
        lines.append(f"  {symbol}: {entry.extent} iterations, {kind}, {len(parts)} chunk(s)")
    if kernel.trace is not None:
        lines += ["schedule:", str(kernel.trace)]
    return "\n".join(lines)
