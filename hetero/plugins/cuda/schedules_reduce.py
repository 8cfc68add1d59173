"""The GPU schedule of a long reduction: a block of threads folds each output element.

The default schedule (:mod:`.schedules`) gives each output element one thread, which
folds the whole reduction alone: a ReduceSum of (4, 100000) over axis 1 would run four
threads of 100000 steps each. :func:`cross_thread_reduction` gives each output element
``lanes`` threads instead (TVM's cross-thread allreduce, CUB's block reduce, built from
a shared-memory tree rather than warp shuffles)::

    for o in range(blocks) thread_binding(blockIdx.x) {      # [grid-stride loop around]
      alloc n_rf: f32[group, lanes] shared {
        for g thread_binding(threadIdx.y): for t thread_binding(threadIdx.x):
          acc = identity; for k: acc = acc (+) x[.., k * lanes + t]    # a strided slice each
          n_rf[g, t] = acc
        for g (threadIdx.y): for t (threadIdx.x): if t < lanes / 2: n_rf[g, t] (+)= n_rf[g, t + lanes / 2]
        ...                                                             # log2(lanes) steps
        for g (threadIdx.y): n[o * group + g] = epilogue(n_rf[g, 0])   # thread 0 of each group

The renderer puts a barrier between the steps (statements of a sequence outside the
thread loops) and guards the last store to the first thread. It is made of recorded
primitives: fuse the output loops and the reduction loops, split the reduction by
``lanes`` and put the lane outermost (each thread folds a strided slice, so a warp reads
consecutive elements), split the outputs into blocks of ``group``, :meth:`Schedule.rfactor`
into a shared buffer with its tree, and bind. The combiner, the identity and the
epilogue are the stage's own (sum, product, max, min as lowering writes them).

When it applies, from the stage's shapes: a reduction of at least
:data:`MIN_REDUCTION` terms, and fewer output elements than the device has thread
slots (``spec.sms * spec.max_threads_per_sm``): with more, one thread an element
already fills the GPU. ``lanes`` is a power of two from a warp to the block size,
about :data:`TERMS_PER_LANE` terms a lane; a block holds ``group`` output elements
where the reduction is short (fewer lanes than the block size) while that leaves at
least one block a multiprocessor; past ``spec.sms * BLOCKS_PER_SM`` blocks a grid-stride
loop runs around the grid, as the default schedule does.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from hetero.plugin import GpuSpec
from hetero.plugin.schedule import LoopRef, Schedule, find_accumulation, find_block, node_at
from hetero.plugin.tir import Block, For, IterKind
from hetero.plugins.cuda.schedules import BLOCKS_PER_SM, THREADS_PER_BLOCK

#: The fewest terms a reduction folds before its output element gets a block of threads:
#: two warps' worth, so that each lane folds at least two terms before the tree.
MIN_REDUCTION = 64
#: Terms each lane folds, roughly, before the block's tree combines the lanes.
TERMS_PER_LANE = 8


@dataclass(frozen=True)
class ReductionPlan:
    """How a reduction stage is spread: ``outputs`` elements, each a reduction of
    ``terms``, folded by ``lanes`` threads; ``group`` elements a block, ``blocks``
    blocks, and ``strides`` grid-stride iterations (1: none)."""

    outputs: int
    terms: int
    lanes: int
    group: int
    blocks: int
    strides: int


def plan_reduction(outputs: int, terms: int, spec: GpuSpec,
                   threads_per_block: int = THREADS_PER_BLOCK) -> ReductionPlan | None:
    """The cross-thread plan for a stage of ``outputs`` elements, each folding ``terms``,
    or None where one thread an element (the default schedule) is the better choice."""
    if terms < MIN_REDUCTION or outputs >= spec.sms * spec.max_threads_per_sm:
        return None
    threads = min(threads_per_block, spec.max_threads_per_block)
    lanes = min(threads, max(spec.warp_size, _floor_pow2(terms // TERMS_PER_LANE)))
    group = min(threads // lanes, max(1, _floor_pow2(outputs // spec.sms)))
    blocks = math.ceil(outputs / group)
    most = spec.sms * BLOCKS_PER_SM
    strides = math.ceil(blocks / most) if blocks > most else 1
    return ReductionPlan(outputs, terms, lanes, group, min(blocks, most), strides)


def _floor_pow2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


def cross_thread_reduction(sch: Schedule, name: str, spec: GpuSpec,
                           threads_per_block: int = THREADS_PER_BLOCK) -> bool:
    """Schedule stage ``name`` as a block-wide reduction for ``spec`` and return True, or
    leave it untouched and return False where it is not a reduction of the lowering's
    form (one accumulator under the output loops) or :func:`plan_reduction` declines."""
    path = find_block(sch.func.body, name)
    block = node_at(sch.func.body, path) if path is not None else None
    if not isinstance(block, Block) or not any(it.kind is IterKind.REDUCTION for it in block.iters):
        return False
    spatial = {it.var.name for it in block.iters if it.kind is IterKind.SPATIAL}
    leading: list[LoopRef] = []
    nest = block.body
    for loop in sch.get_loops(sch.get_block(name)):
        if loop.block != name or loop.name not in spatial or not isinstance(nest, For) or nest.var.name != loop.name:
            break
        leading.append(loop)
        nest = nest.body
    if not leading:
        return False
    found = find_accumulation(nest)
    if isinstance(found, str) or found.lanes:
        return False
    reduction = _perfect_nest(found.update)
    plan = plan_reduction(math.prod(sch.extent(l) for l in leading), math.prod(f.extent for f in reduction), spec,
                          threads_per_block)
    if plan is None:
        return False
    outputs = sch.fuse(*leading) if len(leading) > 1 else leading[0]
    loops = [LoopRef(name, f.var.name) for f in reduction]
    r = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    r_outer, r_lane = sch.split(r, [None, plan.lanes])
    sch.reorder(r_lane, r_outer)
    factors = [plan.strides] if plan.strides > 1 else []
    factors += [plan.blocks] + ([plan.group] if plan.group > 1 else [])
    parts = sch.split(outputs, factors) if len(factors) > 1 else [outputs]
    grid = parts[1] if plan.strides > 1 else parts[0]
    left = sch.rfactor(sch.get_block(name), r_lane, grid, "shared")
    sch.bind(grid, "blockIdx.x")
    for copies in left.lanes:
        for loop in copies:
            sch.bind(LoopRef(name, loop), "threadIdx.y")
    for loop in left.reduction:
        sch.bind(LoopRef(name, loop), "threadIdx.x")
    return True


def _perfect_nest(loop: For) -> list[For]:
    """``loop`` and the loops perfectly nested in it, outermost first."""
    nest = [loop]
    while isinstance(nest[-1].body, For):
        nest.append(nest[-1].body)
    return nest
