"""From a lowered function to a checked PTX kernel for one GPU: schedule, render, assemble.

:func:`build_kernel` is the cuda backend's compile of one stage: the default GPU
schedule for the device (:mod:`.schedules`, its trace kept for a tuner), the NVPTX
renderer (:mod:`.render`, which legalises first), ptxas for the device's architecture
(:mod:`.ptxas`) and the device's limits, so that a kernel over them is refused at
compile time, never at launch. A function of several stages needs one kernel per stage
and a launch between them, which the renderer does not split yet: it is refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero.core.ir.tir.stmt import PrimFunc
from hetero.core.schedule.trace import Trace
from hetero.core.schedule.tree import block_names
from hetero.errors import CodegenError
from hetero.plugins.cuda.device import GpuSpec
from hetero.plugins.cuda.ptxas import PtxasReport, assemble, check_limits
from hetero.plugins.cuda.render import RenderedKernel, render_ptx
from hetero.plugins.cuda.schedules import THREADS_PER_BLOCK, default_schedule


@dataclass(frozen=True)
class BuiltKernel:
    """A kernel ready to load: the rendered PTX with its launch, what ptxas reported for the
    device's architecture, and the schedule's trace."""

    kernel: RenderedKernel
    report: PtxasReport
    trace: Trace


def build_kernel(func: PrimFunc, spec: GpuSpec, threads_per_block: int = THREADS_PER_BLOCK) -> BuiltKernel:
    """``func`` (one stage, as lowered) scheduled, rendered and assembled for ``spec``.

    CodegenError names the function when it has several stages, when ptxas is missing or
    rejects the PTX, and when the kernel exceeds the device's registers, shared memory or
    threads per block.
    """
    stages = block_names(func.body)
    if len(stages) != 1:
        raise CodegenError(f"func {func.name} has {len(stages)} stages ({', '.join(stages)}); the cuda "
                           "renderer builds one kernel per function, and splitting stages into kernels "
                           "launched in turn is not done yet")
    schedule = default_schedule(func, spec, threads_per_block)
    kernel = render_ptx(schedule.func, arch=spec.arch)
    report = assemble(kernel.ptx, spec.arch, kernel.name)
    check_limits(report, kernel.launch.threads_per_block, spec.max_registers_per_thread, spec.shared_per_block,
                 registers_per_block=spec.registers_per_sm)
    return BuiltKernel(kernel, report, schedule.trace)
