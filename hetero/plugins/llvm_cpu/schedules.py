"""Default CPU schedules: how llvm_cpu maps each lowered function onto the host's cores.

Sums of products (MatMul, Gemm, Conv) get the register-tiled micro-kernel of
:mod:`~hetero.plugins.llvm_cpu.schedules_tiled`; other reductions whose rows read
contiguous inputs (grouped 1x1 Conv, unpadded windows) the spatial tile of
:mod:`~hetero.plugins.llvm_cpu.schedules_window`; a block without a reduction whose
innermost loop walks its output contiguously gets that loop vectorized. Then, where
the block has enough work to pay for handing chunks to the thread pool, its leading
data-parallel loops are fused until there is work for every core and that loop runs in
parallel. Every step is a schedule primitive, so the result is recorded in a
replayable trace that a tuner can vary.
"""

from __future__ import annotations

import math

from hetero.plugin import ScheduleError
from hetero.plugin.schedule import LoopRef, Schedule, affine, block_names, find_block, node_at
from hetero.plugin.tir import (
    Allocate, Block, Call, Expr, For, ForKind, Load, PrimFunc, Store, Var, exprs_of, mentions, stores_in_loops, walk,
)
from hetero.plugins.llvm_cpu.exprs import is_scalar_call
from hetero.plugins.llvm_cpu.schedules_blocked import plan_blocked, schedule_blocked
from hetero.plugins.llvm_cpu.schedules_int8 import shift_windows
from hetero.plugins.llvm_cpu.schedules_tiled import TILE, plan_tile, schedule_tiled
from hetero.plugins.llvm_cpu.schedules_window import plan_window, schedule_window

#: Parallel chunks per core: enough to even out uneven chunk times.
CHUNKS_PER_THREAD = 4
#: Fewer loop iterations than this (a vectorized loop that reads contiguously counting
#: once per vector) run on the calling thread. A launch on the native pool
#: (hetero.plugins.llvm_cpu.runtime) costs about 1.5 us inside a part's program, whose
#: workers stay awake between its launches, and 7 us called alone from Python (AMD
#: EPYC, znver5); 16K vector iterations are some 10-20 us of work on one core (a
#: blocked Concat of 24K vectors took 32 us on a znver4), so from there a second
#: thread saves several times what its launch costs. (Through Python's thread pool a
#: launch cost about 70 us, and the threshold was 256K; before workers stayed awake
#: through a program, 32K.)
PARALLEL_MIN_WORK = 1 << 14
#: Lanes a vectorized loop is counted as doing at once (a host vector of float32).
VECTOR_LANES = TILE.vector
#: Shorter innermost loops are left to LLVM: a vector would be mostly remainder.
MIN_VECTOR_EXTENT = 4


def default_schedule(func: PrimFunc, threads: int) -> Schedule:
    """``func`` scheduled for ``threads`` cores: the schedule's ``func`` is the result and
    its ``trace`` the primitives that made it, which ``trace.apply(shift_windows(func))``
    replays (and a tuner varies)."""
    # Integer convolutions first read their shifted, padded input from a stage of its own.
    sch = Schedule(shift_windows(func))
    for name in block_names(sch.func.body):
        blocked = plan_blocked(sch.func, name)
        if blocked is not None:
            schedule_blocked(sch, name, blocked, threads)
            continue
        plan = plan_tile(sch.func, name)
        if plan is not None:
            schedule_tiled(sch, name, plan, threads)
            continue
        window = plan_window(sch.func, name)
        if window is not None:
            schedule_window(sch, name, window)
        else:
            _vectorize_innermost(sch, name)
        if threads > 1 and _work(sch.func, name) >= PARALLEL_MIN_WORK:
            _parallelize(sch, name, threads)
    return sch


def _block(func: PrimFunc, block_name: str) -> Block:
    path = find_block(func.body, block_name)
    assert path is not None  # names come from block_names of the same function
    block = node_at(func.body, path)
    assert isinstance(block, Block)
    return block


def _work(func: PrimFunc, block_name: str) -> int:
    """How many times the block's innermost statements run, a vectorized loop counting
    once per vector where it reads contiguously (else once per lane: a gather or a
    strided read loads lane by lane): the measure of whether a parallel launch pays."""
    def runs(loop: For, store: Store) -> int:
        lanes = 1
        if loop.kind is ForKind.VECTORIZED and _reads_contiguously(store, loop.var):
            lanes = min(loop.extent, VECTOR_LANES)
        return math.ceil(loop.extent / lanes)

    return sum(math.prod(runs(loop, store) for loop in loops)
               for store, loops in stores_in_loops(_block(func, block_name).body))


def _reads_contiguously(store: Store, var: Var) -> bool:
    """Whether every load under ``store`` reads neighbouring elements (or one element)
    for neighbouring values of ``var``."""
    for e in exprs_of(store.value):
        if isinstance(e, Load) and e.indices:
            last = affine(e.indices[-1])
            if ((mentions(e.indices[-1], var) if last is None else last[0].get(var, 0) not in (0, 1))
                    or any(mentions(i, var) for i in e.indices[:-1])):
                return False
    return True


def _vectorize_innermost(sch: Schedule, block_name: str) -> None:
    """Vectorize the block's innermost loop where it is its own (no reduction), at least
    ``MIN_VECTOR_EXTENT`` long, and the last index of the one store under it: neighbouring
    iterations write neighbouring elements, so the stores are whole vectors."""
    block = _block(sch.func, block_name)
    inner, loop = block.body, None
    while isinstance(inner, For):
        loop, inner = inner, inner.body
    if loop is None or not isinstance(inner, Store) or loop.extent < MIN_VECTOR_EXTENT:
        return
    # Already scheduled: a stage with no inputs (a table of per-channel factors) is
    # scheduled with its kernel, then again when the packer runs it alone.
    if loop.kind is not ForKind.SERIAL:
        return
    if any(isinstance(s, Allocate) for s in walk(block)):
        return
    if affine(inner.indices[-1]) != ({loop.var: 1}, 0) or _mentions(inner.indices[:-1], loop.var):
        return
    # A libm call (float64 erf, tan) stays scalar: asked to vectorize around it, LLVM
    # gives up and warns on stderr.
    if any(isinstance(e, Call) and is_scalar_call(e) for e in exprs_of(inner.value)):
        return
    sch.vectorize(LoopRef(block_name, loop.var.name))


def _mentions(indices: tuple[Expr, ...], var: Var) -> bool:
    """Whether any of ``indices`` uses ``var`` (or is not affine, so might)."""
    form = [affine(i) for i in indices]
    return any(f is None or var in f[0] for f in form)


def _parallelize(sch: Schedule, block_name: str, threads: int) -> None:
    block = sch.get_block(block_name)
    loops = sch.get_loops(block)
    own = [loop for loop in loops if loop.block == block_name]
    if not own or len(own) != len(loops):
        return  # a block computed inside another's loops runs in its thread
    # Only serial data-parallel loops join: a reduction loop would make the fused loop
    # serial, and a vectorized or unrolled loop is already the inside of the kernel.
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
        try:
            outer = sch.fuse(outer, loop)
        except ScheduleError:
            break  # not perfectly nested: a row loop around a serial walk (TopK's, say)
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
