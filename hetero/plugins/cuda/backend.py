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
a :class:`~hetero.plugins.cuda.part.CudaPart` (through the shared compile loop,
:func:`~hetero.plugin.parts.compile_steps`); a kernel that fails to build is a
PluginError naming the node, so the region falls back. With a dump folder every step's
stages are written: the tensor IR as lowered, then per kernel scheduled and legalised,
NVVM IR and PTX in ``code/`` (``<step>.<k>.ptx`` for the k-th kernel of a step of
several) and what ptxas reported in ``report/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hetero.plugin import (
    Backend, Declarations, GPU_PRESETS, GpuSpec, Graph, HeteroError, Node, Option, OptionError, Support, Target,
    chain, check, index_checks, nonempty_outputs, op_names, roofline,
)
from hetero.plugin.lower import VIEW_OPS, KernelStep, is_lowerable, lower_node
from hetero.plugin.parts import BuiltStep, KernelBuilder, StageFile, compile_steps, lowerable
from hetero.plugin.tir import PrimFunc, canonical_names, legalize
from hetero.plugins.cuda.build import BuiltFunction, build_function
from hetero.plugins.cuda.driver import probe
from hetero.plugins.cuda.part import CudaPart, StepKernels, step_kernels
from hetero.plugins.cuda.render import NVPTX_NATIVE, lane_views
from hetero.plugins.cuda.schedules import THREADS_PER_BLOCK, default_schedule

#: Part of every compile-cache key: 0.2 artifacts have the shared step parts' manifest
#: (hetero.plugin.parts), which 0.1's lack.
VERSION = "0.2.0"

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
        return SUPPORTS(node, target)

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
        return CudaPart(*compile_steps(subgraph, target, _Builder(settings)), spec=settings.spec,
                        emulate=settings.emulate)

    def load_artifact(self, artifact: bytes) -> CudaPart:
        return CudaPart.from_artifact(artifact)


def _schedules(node: Node, target: Target) -> Support:
    """Whether the default GPU schedule binds every stage of ``node`` (a view needs none)."""
    if node.op in VIEW_OPS:
        return Support.yes()
    settings: CudaSettings = target.settings
    try:
        default_schedule(lower_node(node), settings.spec, settings.threads_per_block)
    except HeteroError as exc:
        return Support.no(f"cuda cannot schedule {node.name} ({node.op}): {exc}")
    return Support.yes()


#: What cuda refuses, each with its reason.
SUPPORTS = chain(
    check(lambda node, _: node.op not in SEQUENTIAL_OPS,
          lambda node: f"{node.op} lowers to sequential statements the GPU schedules cannot spread over threads; "
                       "it runs on the CPU"),
    lowerable("cuda"),
    nonempty_outputs("cuda"),
    check(lambda node, _: not index_checks(node),
          lambda node: f"{node.name} ({node.op}) reads with run-time indices, which are checked on the host before "
                       "use; the cuda kernels do not check them on the device"),
    _schedules,
)


class _Builder(KernelBuilder[StepKernels]):
    """cuda's kernels: each step lowered and built once per distinct function (equal up to
    names), one kernel per stage (:func:`~hetero.plugins.cuda.build.build_function`)."""

    def __init__(self, settings: CudaSettings) -> None:
        self.settings = settings
        self._built: dict[str, BuiltFunction] = {}

    def build(self, step: KernelStep) -> BuiltStep[StepKernels]:
        func = step.lower()
        canonical = canonical_names(func)
        if canonical.name not in self._built:
            self._built[canonical.name] = build_function(canonical, self.settings.spec,
                                                         self.settings.threads_per_block)
        function = self._built[canonical.name]
        return BuiltStep(step_kernels(function, len(step.inputs), self.settings.emulate),
                         lambda: _stages(func, function))


def _stages(func: PrimFunc, function: BuiltFunction) -> list[StageFile]:
    """Every dump stage of one step: its tensor IR, then per kernel (``<k>.`` before the
    suffix when there are several) the scheduled and legalised IR, NVVM IR, PTX and
    what ptxas reported."""
    files: list[StageFile] = [("tir", "txt", str(func))]
    for k, built in enumerate(function.kernels):
        tag = f"{k}." if len(function.kernels) > 1 else ""
        report = built.report
        figures = (f"kernel {built.kernel.name} for {report.arch}: {report.registers} registers, "
                   f"{report.shared_bytes} bytes shared, {report.local_bytes} bytes local, "
                   f"{report.spill_stores_bytes + report.spill_loads_bytes} bytes spilled; launch grid "
                   f"{built.kernel.launch.grid} block {built.kernel.launch.block}\n")
        files += [("scheduled", f"{tag}txt", str(built.func)),
                  ("legalized", f"{tag}txt", str(legalize(lane_views(built.func)[0], NVPTX_NATIVE))),
                  ("code", f"{tag}ll", built.kernel.llvm_ir), ("code", f"{tag}ptx", built.kernel.ptx),
                  ("report", f"{tag}txt", figures + report.log)]
    return files


__all__ = ["CudaBackend", "CudaSettings", "LAUNCH_SECONDS", "detected_device"]
