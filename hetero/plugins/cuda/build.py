"""From a lowered function to checked PTX kernels for one GPU: schedule, render, assemble.

:func:`build_kernel` is the cuda backend's compile of one stage: the default GPU
schedule for the device (:mod:`.schedules`, its trace kept for a tuner), the NVPTX
renderer (:mod:`.render`, which legalises first), ptxas for the device's architecture
(:mod:`.ptxas`) and the device's limits, so that a kernel over them is refused at
compile time, never at launch. :func:`build_function` splits a function of several
stages (Softmax: max, exp, sum, divide) into one kernel per stage, launched in turn:
the launch boundary is the grid-wide synchronisation between stages, and the
intermediates the function allocates in global memory become workspaces every kernel
takes as parameters, after the function's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero.plugin import CodegenError, GpuSpec
from hetero.plugin.codegen import split_stages as core_split
from hetero.plugin.schedule import Trace, block_names
from hetero.plugin.tir import Buffer, PrimFunc
from hetero.plugins.cuda.ptxas import PtxasReport, assemble, check_limits
from hetero.plugins.cuda.render import RenderedKernel, render_ptx
from hetero.plugins.cuda.schedules import THREADS_PER_BLOCK, default_schedule


@dataclass(frozen=True)
class BuiltKernel:
    """A kernel ready to load: the rendered PTX with its launch, what ptxas reported for the
    device's architecture, the schedule's trace, and the scheduled function it renders."""

    kernel: RenderedKernel
    report: PtxasReport
    trace: Trace
    func: PrimFunc


def build_kernel(func: PrimFunc, spec: GpuSpec, threads_per_block: int = THREADS_PER_BLOCK) -> BuiltKernel:
    """``func`` (one stage, as lowered) scheduled, rendered and assembled for ``spec``.

    CodegenError names the function when it has several stages, when ptxas is missing or
    rejects the PTX, and when the kernel exceeds the device's registers, shared memory or
    threads per block.
    """
    stages = block_names(func.body)
    if len(stages) != 1:
        raise CodegenError(f"func {func.name} has {len(stages)} stages ({', '.join(stages)}); a kernel is "
                           "one stage: build it with build_function, one kernel per stage")
    schedule = default_schedule(func, spec, threads_per_block)
    kernel = render_ptx(schedule.func, arch=spec.arch)
    report = assemble(kernel.ptx, spec.arch, kernel.name)
    check_limits(report, kernel.launch.threads_per_block, spec.max_registers_per_thread, spec.shared_per_block,
                 registers_per_block=spec.registers_per_sm)
    return BuiltKernel(kernel, report, schedule.trace, schedule.func)


@dataclass(frozen=True)
class BuiltFunction:
    """A function as kernels launched in order, and the global workspaces they share (the
    device allocates them per run; every kernel takes the function's parameters, then
    the workspaces)."""

    name: str
    kernels: tuple[BuiltKernel, ...]
    params: tuple[Buffer, ...]
    workspaces: tuple[Buffer, ...]


def build_function(func: PrimFunc, spec: GpuSpec, threads_per_block: int = THREADS_PER_BLOCK) -> BuiltFunction:
    """``func``'s stages (:func:`split_stages`) built as kernels for ``spec``, in order
    (:func:`build_kernel` each); CodegenError as for :func:`build_kernel`, naming the stage."""
    stages, workspaces = split_stages(func)
    kernels = tuple(build_kernel(stage, spec, threads_per_block) for stage in stages)
    return BuiltFunction(func.name, kernels, func.params, workspaces)


def split_stages(func: PrimFunc) -> tuple[tuple[PrimFunc, ...], tuple[Buffer, ...]]:
    """``func`` as one function per stage, run in turn, and the workspaces they share.

    A stage is a top-level statement under the function's allocations, which become
    the workspaces (:func:`hetero.core.codegen.stages.split_stages`); each stage function takes ``func``'s parameters, then the
    workspaces. One stage is ``func`` itself.
    """
    workspaces, stages = core_split(func.body)
    if len(stages) == 1 and not workspaces:
        return (func,), ()
    params = func.params + tuple(workspaces)
    return tuple(PrimFunc(f"{func.name}_{k}", params, stage, func.attrs) for k, stage in enumerate(stages)), \
        tuple(workspaces)
