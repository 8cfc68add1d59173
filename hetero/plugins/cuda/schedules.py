"""Default GPU schedules: each stage's output elements spread over blocks and threads.

The first schedule every claimed op gets: a stage's leading spatial loops (the output
dimensions its definition names as spatial, outermost first, perfectly nested) are
fused into one loop over the output elements, split into blocks of
``threads_per_block`` threads (a multiple of the warp, fewer for a small output), and
bound to ``blockIdx.x`` and ``threadIdx.x``. A stage with more blocks than
:data:`BLOCKS_PER_SM` per multiprocessor keeps an outer serial loop around them: a
grid-stride loop, so the grid stays a size the device schedules in one wave or a few.
Where every access of an elementwise stage moves with the output and the renderer can
prove it aligned, each thread takes :data:`VECTOR_LANES` consecutive elements through an
innermost vectorized loop (one 16-byte load and store instead of four). Reduction loops
stay serial inside each thread: one thread folds one output element, which is correct
for every reduction and fast for the elementwise and injective ops. Before the default,
each stage is offered to the schedules of their own (:func:`_rules`): tiled matrix
products (:mod:`.schedules_gemm`) and block-wide reductions (:mod:`.schedules_reduce`).
Scalars, and reductions to one value that neither takes, run on one thread. Every step
is a schedule primitive, so the trace records it for a tuner.
"""

from __future__ import annotations

from collections.abc import Callable
import math

from hetero.plugin import GpuSpec, ScheduleError
from hetero.plugin.schedule import LoopRef, Schedule, block_names, find_block, node_at
from hetero.plugin.tir import Block, For, IterKind, PrimFunc, walk
from hetero.plugins.cuda.render import vector_accesses

#: Threads a block runs by default: eight warps, a common sweet spot for memory-bound kernels.
THREADS_PER_BLOCK = 256
#: Blocks per multiprocessor before a stage loops over its output (grid-stride).
BLOCKS_PER_SM = 32
#: Consecutive output elements a thread of an elementwise stage handles, as one vector
#: access of each buffer (``ld.global.v4.f32``) where the renderer can align it.
VECTOR_LANES = 4


def default_schedule(func: PrimFunc, spec: GpuSpec, threads_per_block: int = THREADS_PER_BLOCK) -> Schedule:
    """``func`` with every stage's output elements bound to blocks and threads of ``spec``.

    Raises :class:`~hetero.errors.ScheduleError` for a stage written as statements (it
    declares no iterators, so nothing says which loops may run in parallel) and for a
    block size the device does not allow.
    """
    if not 0 < threads_per_block <= spec.max_threads_per_block or threads_per_block % spec.warp_size:
        raise ScheduleError(f"{spec.name}: threads per block must be a multiple of {spec.warp_size} up to "
                            f"{spec.max_threads_per_block}, got {threads_per_block}")
    sch = Schedule(func)
    for name in block_names(func.body):
        if not any(rule(sch, name, spec) for rule in _rules()):
            _bind_outputs(sch, name, spec, threads_per_block)
    return sch


def _rules() -> tuple[Callable[[Schedule, str, GpuSpec], bool], ...]:
    """The schedules of their own, tried in order on each stage before the default
    binding: each applies itself and returns True where the stage is of its kind."""
    from hetero.plugins.cuda.schedules_gemm import schedule_gemm
    from hetero.plugins.cuda.schedules_reduce import cross_thread_reduction  # it imports this module
    return (schedule_gemm, cross_thread_reduction)


def _bind_outputs(sch: Schedule, name: str, spec: GpuSpec, threads_per_block: int) -> None:
    path = find_block(sch.func.body, name)
    block = node_at(sch.func.body, path) if path is not None else None
    if isinstance(block, Block) and not any(isinstance(s, For) for s in walk(block)):
        return  # a scalar: one thread computes it (the launch is one block of one thread)
    if not isinstance(block, Block) or not block.iters:
        raise ScheduleError(f"stage {name} of {sch.func.name} is written as statements (no spatial "
                            "iterators): the GPU's default schedule cannot tell which loops are parallel")
    spatial = {it.var.name for it in block.iters if it.kind is IterKind.SPATIAL}
    leading: list[LoopRef] = []
    for loop in sch.get_loops(sch.get_block(name)):
        if loop.block != name or loop.name not in spatial:
            break
        leading.append(loop)
    if not leading:
        if not spatial:
            return  # a reduction to one value that no schedule of its own took: one thread folds it
        raise ScheduleError(f"stage {name} of {sch.func.name} has no leading spatial loop to bind")
    elementwise = len(leading) == sum(loop.block == name for loop in sch.get_loops(sch.get_block(name)))
    fused = sch.fuse(*leading) if len(leading) > 1 else leading[0]
    elements = sch.extent(fused)
    if elementwise and elements % VECTOR_LANES == 0 and elements >= VECTOR_LANES * spec.warp_size:
        # An elementwise or injective stage (no loop but its output's): a thread takes
        # VECTOR_LANES consecutive elements where every access moving with them becomes
        # one aligned vector access; a strided or misaligned one would only cost threads.
        trial = Schedule(sch.func)
        _, lanes = trial.split(fused, [None, VECTOR_LANES])
        stage = node_at(trial.func.body, find_block(trial.func.body, name) or ())
        loop = next(s for s in walk(stage) if isinstance(s, For) and s.var.name == lanes.name)
        if vector_accesses(loop):
            fused, lanes = sch.split(fused, [None, VECTOR_LANES])
            sch.vectorize(lanes)
            elements //= VECTOR_LANES
    threads = min(threads_per_block, spec.warp_size * math.ceil(elements / spec.warp_size))
    blocks = math.ceil(elements / threads)
    most = spec.sms * BLOCKS_PER_SM
    if blocks > most:
        _, grid, lane = sch.split(fused, [None, most, threads])
    else:
        grid, lane = sch.split(fused, [None, threads])
    sch.bind(grid, "blockIdx.x")
    sch.bind(lane, "threadIdx.x")
