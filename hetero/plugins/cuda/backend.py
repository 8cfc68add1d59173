"""The cuda backend: graph regions compiled to PTX kernels for a declared NVIDIA GPU.

It declares the GPU its ``cuda_device`` option names (:data:`~hetero.plugin.GPU_PRESETS`;
by default the GPU this machine has, where it is one of them, else an H100): its memory
hierarchy and peak throughput, so the partitioner plans for the device it compiles for.
:meth:`CudaBackend.supports` takes a node when the op lowers to the tensor IR and the
default GPU schedule binds every stage of it to blocks and threads, and refuses with the
reason otherwise; it refuses nothing because this machine has no GPU (the partition
still shows what the GPU would take). :meth:`CudaBackend.compile` groups anchors with
their epilogues as the CPU does, lowers each group, builds one kernel per stage
(schedule, NVPTX render, ptxas against the device's limits: :mod:`.build`) and returns
a :class:`~hetero.plugins.cuda.part.CudaPart`; a kernel that fails to build is a
PluginError naming the node, so the region falls back. With a dump folder every kernel's
stages are written: ``tir/`` (the scheduled tensor IR), ``llvm/`` (NVVM IR), ``ptx/``
and ``ptxas/`` (what ptxas reported).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetero.plugin import (
    Backend, Declarations, GPU_PRESETS, GpuSpec, Graph, HeteroError, Node, Option, OptionError, PluginError, Support,
    Target, index_checks, op_names, progress, roofline,
)
from hetero.plugin.lower import VIEW_OPS, fuse_epilogues, is_lowerable, kernel_steps, lower_node, region_constants
from hetero.plugin.tir import canonical_names
from hetero.plugins.cuda.build import BuiltFunction, build_function
from hetero.plugins.cuda.driver import probe
from hetero.plugins.cuda.part import CudaPart, Step, make_step
from hetero.plugins.cuda.schedules import THREADS_PER_BLOCK, default_schedule

VERSION = "0.1.0"

#: Ops whose lowerings are sequential statements (scans, recurrences, sorts, scatters and a
#: determinant's elimination: no loop the GPU schedules may run in parallel) or always read
#: with run-time indices (RoiAlign's batch indices): they stay on the CPU until they have
#: GPU schedules of their own.
SEQUENTIAL_OPS = frozenset({"CumProd", "CumSum", "Det", "GRU", "LSTM", "RNN", "MaxUnpool", "ScatterND",
                            "ScatterElements", "TopK", "RoiAlign"})
#: Seconds a kernel launch costs before it computes anything (the driver's and the GPU's).
LAUNCH_SECONDS = 5e-6
#: The preset a machine without a recognised GPU compiles for.
DEFAULT_DEVICE = "h100"

#: The compile options cuda reads.
OPTIONS = (
    Option("cuda_device", "the GPU to compile for (default: this machine's, where it is one of these, else "
                          f"{DEFAULT_DEVICE})", types=(str,), choices=tuple(GPU_PRESETS)),
    Option("cuda_threads_per_block", "threads per block of the default schedules (a multiple of 32)",
           default=THREADS_PER_BLOCK, types=(int,)),
    Option("cuda_emulate", "run the kernels' scheduled tensor IR in hetero's interpreter instead of on a GPU: "
                           "slow, for checking what the cuda backend computes on a machine without one (the PTX "
                           "is still built and checked by ptxas)", default=False, types=(bool,)),
)


@dataclass(frozen=True)
class CudaSettings:
    """The backend's reading of its options: the GPU, the block size, whether to emulate."""

    spec: GpuSpec
    threads_per_block: int
    emulate: bool


def detected_device() -> str:
    """The preset of this machine's GPU, by its name (an "A100", "H100" or "H200"), else the default."""
    found = probe()
    if found.ok:
        for name in GPU_PRESETS:
            if name in found.name.lower().replace(" ", ""):
                return name
    return DEFAULT_DEVICE


class CudaBackend(Backend):
    """NVIDIA GPUs through PTX: the ops whose lowerings the GPU schedules can bind."""

    name = "cuda"
    version = VERSION
    device_kind = "gpu"
    options = OPTIONS

    def __init__(self) -> None:
        spec = GPU_PRESETS[DEFAULT_DEVICE]
        self.memory = spec.memory_hierarchy()
        self.peak_gflops = spec.peak_gflops
        self.supported_ops = frozenset(op for op in op_names() if is_lowerable(op) and op not in SEQUENTIAL_OPS)

    def device_status(self) -> str:
        """Whether this machine can run the kernels: the GPU found, or why there is none."""
        return probe().summary

    def declare(self, options: Mapping[str, Any]) -> Declarations:
        """The GPU ``cuda_device`` names; refuses a block size the GPU does not allow."""
        spec = GPU_PRESETS[options["cuda_device"] or detected_device()]
        threads = options["cuda_threads_per_block"]
        if not 0 < threads <= spec.max_threads_per_block or threads % spec.warp_size:
            raise OptionError(f"cuda: cuda_threads_per_block must be a multiple of {spec.warp_size} up to "
                              f"{spec.max_threads_per_block}, got {threads}")
        settings = CudaSettings(spec, threads, bool(options["cuda_emulate"]))
        return Declarations(spec.memory_hierarchy(), spec.peak_gflops, (), settings)

    def supports(self, node: Node, target: Target) -> Support:
        if node.op in SEQUENTIAL_OPS:
            return Support.no(f"{node.op} lowers to sequential statements the GPU schedules cannot spread over "
                              "threads; it runs on the CPU")
        if not is_lowerable(node.op):
            return Support.no(f"cuda has no lowering for {node.op}")
        if any(v.type.size == 0 for v in node.outputs):
            return Support.no(f"{node.name} produces an empty tensor; cuda needs at least one element")
        if index_checks(node):
            return Support.no(f"{node.name} ({node.op}) reads with run-time indices, which are checked on the "
                              "host before use; the cuda kernels do not check them on the device")
        if node.op in VIEW_OPS:
            return Support.yes()
        settings: CudaSettings = target.settings
        try:
            default_schedule(lower_node(node), settings.spec, settings.threads_per_block)
        except HeteroError as exc:
            return Support.no(f"cuda cannot schedule {node.name} ({node.op}): {exc}")
        return Support.yes()

    def estimate(self, subgraph: Graph, target: Target) -> float:
        """A roofline per node over the part of the GPU its outputs can fill (one thread per
        output element, a full GPU from four thread slots in four per element), plus a
        launch each."""
        spec: GpuSpec = target.settings.spec
        slots = spec.sms * spec.max_threads_per_sm / 4
        total = 0.0
        for node in subgraph.nodes:
            if node.op in VIEW_OPS:
                continue
            fill = min(1.0, max(1, sum(v.type.size for v in node.outputs)) / slots)
            total += LAUNCH_SECONDS + roofline(node, spec.peak_gflops, spec.hbm_gbps) / fill
        return total

    def compile(self, subgraph: Graph, target: Target) -> CudaPart:
        settings: CudaSettings = target.settings
        graph = fuse_epilogues(subgraph)
        plan = kernel_steps(graph, VIEW_OPS)
        steps: list[Step] = []
        built: dict[str, BuiltFunction] = {}
        for index, step in enumerate(plan):
            progress.step("kernel", index + 1, len(plan), step.node.name)
            if step.view is not None:
                steps.append(Step(step.label, step.inputs, step.outputs, step.names, view=step.view))
                continue
            func = step.lower()
            canonical = canonical_names(func)
            try:
                if canonical.name not in built:
                    built[canonical.name] = build_function(canonical, settings.spec, settings.threads_per_block)
            except HeteroError as exc:
                raise PluginError(f"cuda could not build {step.label}: {exc}") from exc
            function = built[canonical.name]
            if target.dump_dir is not None:
                _dump(target.dump_dir, func.name, function)
            steps.append(make_step(step.label, function, step.inputs, step.outputs, step.names, settings.emulate))
        progress.end("kernel")
        constants, aliases = region_constants(graph, (n for s in steps for n in s.inputs))
        return CudaPart(tuple(v.name for v in graph.inputs), tuple(v.name for v in graph.outputs), steps,
                        constants, aliases, settings.spec, settings.emulate)

    def load_artifact(self, artifact: bytes) -> CudaPart:
        return CudaPart.from_artifact(artifact)


def _dump(folder: Path, name: str, function: BuiltFunction) -> None:
    """Every stage of each kernel of one node or group: tensor IR, NVVM IR, PTX, ptxas's report."""
    for k, built in enumerate(function.kernels):
        stem = name if len(function.kernels) == 1 else f"{name}_{k}"
        report = built.report
        figures = (f"kernel {built.kernel.name} for {report.arch}: {report.registers} registers, "
                   f"{report.shared_bytes} bytes shared, {report.local_bytes} bytes local, "
                   f"{report.spill_stores_bytes + report.spill_loads_bytes} bytes spilled; launch grid "
                   f"{built.kernel.launch.grid} block {built.kernel.launch.block}\n")
        for stage, suffix, text in (("tir", "txt", str(built.func)), ("llvm", "ll", built.kernel.llvm_ir),
                                    ("ptx", "ptx", built.kernel.ptx), ("ptxas", "txt", figures + report.log)):
            (folder / stage).mkdir(parents=True, exist_ok=True)
            (folder / stage / f"{stem}.{suffix}").write_text(text)


__all__ = ["CudaBackend", "CudaSettings", "LAUNCH_SECONDS", "detected_device"]
