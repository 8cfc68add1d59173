"""Default CPU schedules: how llvm_cpu maps each lowered function onto the host's cores.

Sums of products (MatMul, Gemm, Conv) get the register-tiled micro-kernel of
:mod:`~hetero.plugins.llvm_cpu.schedules_tiled`. Every other block: fuse its leading
data-parallel loops until there is enough work to share between the cores and run
that loop in parallel. Every step is a schedule
primitive, so the result is recorded in a replayable trace that a tuner can vary.
"""

from __future__ import annotations

from hetero.core.ir.tir.stmt import PrimFunc
from hetero.core.schedule import LoopRef, Schedule
from hetero.core.schedule.tree import block_names
from hetero.errors import ScheduleError
from hetero.plugins.llvm_cpu.schedules_tiled import plan_tile, schedule_tiled

#: Parallel chunks per core: enough to even out uneven chunk times.
CHUNKS_PER_THREAD = 4


def default_schedule(func: PrimFunc, threads: int) -> PrimFunc:
    """``func`` scheduled for ``threads`` cores."""
    sch = Schedule(func)
    for name in block_names(func.body):
        plan = plan_tile(sch.func, name)
        if plan is not None:
            schedule_tiled(sch, name, plan, threads)
        elif threads > 1:
            _parallelize(sch, name, threads)
    return sch.func


def _parallelize(sch: Schedule, block_name: str, threads: int) -> None:
    block = sch.get_block(block_name)
    loops = sch.get_loops(block)
    own = [loop for loop in loops if loop.block == block_name]
    if not own or len(own) != len(loops):
        return  # a block computed inside another's loops runs in its thread
    # Only data-parallel loops join: a reduction loop would make the fused loop serial.
    leading = []
    for loop in own:
        if not _data_parallel(sch.func, loop):
            break
        leading.append(loop)
    if not leading:
        return
    outer, work = leading[0], sch.extent(leading[0])
    for loop in leading[1:]:
        if work >= CHUNKS_PER_THREAD * threads:
            break
        extent = sch.extent(loop)
        outer = sch.fuse(outer, loop)
        work *= extent
    if work >= 2:
        sch.parallel(outer)


def _data_parallel(func: PrimFunc, loop: LoopRef) -> bool:
    """Whether ``loop``'s iterations write disjoint elements (trying the primitive on a copy)."""
    try:
        Schedule(func).parallel(loop)
    except ScheduleError:
        return False
    return True
