"""The tiled GPU schedule for sums of products (MatMul 2-D and batched, Gemm, Conv with one
group): shared-memory tiles, a register tile per thread.

The classic SIMT tiling of TVM's CUDA matmul tutorial and CUTLASS's simplest kernel.
A block computes a ``BM x BN`` tile of the output (``blockIdx.y``, ``blockIdx.x``; the
batch, if any, on ``blockIdx.z``) with ``TY x TX`` threads (``threadIdx.y``,
``threadIdx.x``); each thread holds a ``TM x TN`` register tile of accumulators
(:meth:`~hetero.core.schedule.Schedule.tile_accumulator`), its rows and columns strided
by ``TY`` and ``TX`` so that the threads of a warp read consecutive shared words and
store consecutive output elements. The reduction is split by ``BK``; at each step the
block copies the ``BM x BK`` tile of A and the ``BK x BN`` tile of B into
shared memory together (thread ``t`` copies elements ``t, t + TY*TX, ...``, in the
order of the source's rows, so a warp reads consecutive global words), meets at a barrier, accumulates from shared memory, and meets again before the next
copy overwrites the tiles. Elements past the ends of a ragged M, N or K are not
copied and never read (rows and columns past M and N read clamped into the tile's
last copied one), steps past K are skipped and stores past M and N dropped (the
splits' guards), so every size is correct; each
output still adds its K terms in order, one at a time, so the numbers are those of
the unscheduled lowering.

A convolution is the same product once its loops are fused (implicit GEMM): the
reduction loops (input channels, kernel window) into one K, the output pixels into
one column loop, the output channels the rows; a grouped convolution's input reads
depend on the output channel, so it is no such product and keeps the default.

The tile sizes follow the problem: ``TM``/``TN`` up to 4, thread rows and columns
powers of two up to 256 threads in all, so a small or one-row product (a classifier's
Gemm, 1 x 1000) gets one row of threads across N; ``BK`` is the largest of 16, 8, 4, 2, 1
(no more than K needs) whose tiles fit the device's shared memory per block and the
48 KiB of static shared memory a kernel may declare. While the grid would have fewer
blocks than the device has multiprocessors, the tile shrinks (threads, then registers).

Every step is a schedule primitive, recorded in the trace, so ``sch.trace.apply`` gives
the same kernel: each factor of the product is computed into a shared buffer over its
(batch, row, K) or (batch, K, column) loops (``cache_operand``: a matmul's read, a
convolution's padded read, i.e. its im2col tile), tiled as above (split, reorder,
tile_accumulator, bind, unroll), then computed at the K-outer loop (``compute_at`` relaxes
a shared stage's region over the thread loops, shrinks it to the ``BM x BK`` and
``BK x BN`` tiles allocated outside the thread loops, and puts the barriers around the
step), its loops fused in the source's row order, split by the block's threads and
bound to them (``bind`` of a shared stage's loop to an axis the consumer already binds).
A product of a buffer by itself (``x @ x``) has no operand of its own to cache: it is
tiled in registers only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hetero.plugin import GpuSpec
from hetero.plugin.schedule import BlockRef, LoopRef, Schedule, find_block, node_at
from hetero.plugin.tir import (
    Allocate, Binary, Block, Buffer, Expr, For, Load, PrimFunc, Seq, Stmt, Store, Var, exprs_of,
)

#: Threads a tiled block runs at most: 16 x 16, each with a 4 x 4 register tile (64 x 64 outputs).
THREADS = 256
#: The register tile's rows and columns at most: 16 accumulators a thread.
REGISTER_TILE = 4
#: Reduction steps a shared tile holds, best first.
BK_CHOICES = (16, 8, 4, 2, 1)
#: Static shared memory a kernel may declare (more needs dynamic shared memory and an opt-in).
STATIC_SHARED = 48 * 1024
#: The largest grid on the y and z axes.
MAX_GRID_YZ = 65535


@dataclass(frozen=True)
class GemmPlan:
    """A block recognised as a matrix product: ``Y[batch.., i, j] = sum_k A[.. i .. k ..] * B[.. k .. j ..]``.

    ``batch`` are the spatial loops outside the row loop ``row`` (i) and the column loop
    ``col`` (j); ``red`` is the one reduction loop (k); ``a`` and ``b`` are the two factors
    of the product as lowered (A's reads indexed by i and k, B's by k and j: plain reads
    for a matmul, a padded read for a convolution); ``a_first`` says which comes first.
    """

    batch: tuple[For, ...]
    row: For
    col: For
    red: For
    a: Expr
    b: Expr
    a_first: bool


@dataclass(frozen=True)
class GemmTiling:
    """Tile sizes: a thread's ``tm x tn`` registers, ``ty x tx`` threads, ``bk`` reduction steps."""

    tm: int
    tn: int
    ty: int
    tx: int
    bk: int

    @property
    def bm(self) -> int:
        return self.tm * self.ty

    @property
    def bn(self) -> int:
        return self.tn * self.tx

    @property
    def threads(self) -> int:
        return self.ty * self.tx

    @property
    def shared_bytes(self) -> int:
        """Bytes of the two float32 shared tiles."""
        return (self.bm + self.bn) * self.bk * 4


def plan_gemm(func: PrimFunc, block_name: str) -> GemmPlan | None:
    """The plan of ``block_name``, or None unless it is a float32 matrix product as lowered:
    perfectly nested spatial loops around one scalar accumulator, one reduction loop whose
    update adds the product of two reads, the last two spatial loops the row and column."""
    nest = _reduction_nest(func, block_name)
    if nest is None or len(nest[1]) != 1:
        return None
    spatial, (red,), acc = nest
    update = red.body
    assert isinstance(update, Store)
    value = update.value
    if not (update.buffer == acc and acc.dtype == np.float32 and isinstance(value, Binary) and value.op == "add"
            and value.a == Load(acc, update.indices, acc.dtype) and isinstance(value.b, Binary)
            and value.b.op == "mul"):
        return None
    row, col, k = spatial[-2], spatial[-1], red.var
    factors = (value.b.a, value.b.b)
    uses = [{e for e in exprs_of(f) if isinstance(e, Var)} for f in factors]
    reads = [[e for e in exprs_of(f) if isinstance(e, Load)] for f in factors]
    if any(not r or any(load.buffer == acc for load in r) for r in reads) or any(
            f.dtype != np.float32 for f in factors):
        return None
    a = [n for n, used in enumerate(uses) if row.var in used and col.var not in used and k in used]
    b = [n for n, used in enumerate(uses) if col.var in used and row.var not in used and k in used]
    if len(a) != 1 or len(b) != 1:
        return None
    known = {f.var for f in spatial} | {k}
    if any(not used <= known for used in uses):
        return None
    return GemmPlan(tuple(spatial[:-2]), row, col, red, factors[a[0]], factors[b[0]], a[0] == 0)


def _matrix_view(sch: Schedule, name: str) -> GemmPlan | None:
    """The plan of ``name`` seen as a matrix product, fusing loops where it takes that: the
    reduction loops into one K (a convolution's channels and kernel window), the
    spatial loops after the row loop into one column loop (its output pixels) and those
    before it into one batch loop; the fusions are applied to ``sch`` only where a plan
    results. Tries the row loop from
    the innermost but one outwards: a matmul's row, then a convolution's output channel."""
    nest = _reduction_nest(sch.func, name)
    if nest is None:
        return None
    spatial, reduction, _ = nest
    for p in range(len(spatial) - 2, -1, -1):
        groups = [g for g in (spatial[:p], spatial[p + 1:], reduction) if len(g) > 1]
        trial = Schedule(sch.func)
        for group in groups:
            trial.fuse(*(LoopRef(name, f.var.name) for f in group))
        plan = plan_gemm(trial.func, name)
        if plan is not None and plan.row.var == spatial[p].var:
            for group in groups:
                sch.fuse(*(LoopRef(name, f.var.name) for f in group))
            return plan
    return None


def _reduction_nest(func: PrimFunc, name: str) -> tuple[list[For], list[For], Buffer] | None:
    """The spatial loops of block ``name``, the reduction loops inside its scalar
    accumulator and the accumulator, as lowering a single reduction makes them; None
    for another shape."""
    path = find_block(func.body, name)
    block = node_at(func.body, path) if path is not None else None
    if not isinstance(block, Block):
        return None
    spatial: list[For] = []
    inner: Stmt = block.body
    while isinstance(inner, For):
        spatial.append(inner)
        inner = inner.body
    if not (isinstance(inner, Allocate) and inner.buffer.shape == (1,) and inner.buffer.scope == "local"
            and isinstance(inner.body, Seq) and len(inner.body.stmts) == 3):
        return None
    reduction: list[For] = []
    update = inner.body.stmts[1]
    while isinstance(update, For):
        reduction.append(update)
        update = update.body
    if len(spatial) < 2 or not reduction or not isinstance(update, Store):
        return None
    return spatial, reduction, inner.buffer


def choose_tiling(m: int, n: int, k: int, batch: int, spec: GpuSpec) -> GemmTiling | None:
    """Tile sizes for ``batch`` products of ``m x k`` by ``k x n`` on ``spec``, or None if no
    tile fits its shared memory.

    The largest tile first (``TM x TN`` registers, up to 16 x 16 threads, no more of either
    than the output needs); while the grid has fewer blocks than the device has
    multiprocessors, the tile shrinks, threads first (along its longer side, down to two
    warps), then registers, so that a small product still spreads over the device.
    """
    tm, tn = min(REGISTER_TILE, m), min(REGISTER_TILE, n)
    ty = min(16, _pow2_at_least(math.ceil(m / tm)))
    tx = min(THREADS // ty, _pow2_at_least(math.ceil(n / tn)))
    while batch * math.ceil(m / (tm * ty)) * math.ceil(n / (tn * tx)) < spec.sms:
        if ty * tx > 2 * spec.warp_size:
            if tm * ty >= tn * tx and ty > 1 or tx == 1:
                ty //= 2
            else:
                tx //= 2
        elif tm * tn > 1:
            if tm >= tn:
                tm = -(-tm // 2)
            else:
                tn = -(-tn // 2)
        else:
            break
    room = min(spec.shared_per_block, STATIC_SHARED)
    for bk in (b for b in BK_CHOICES if b <= _pow2_at_least(k)):
        tiling = GemmTiling(tm, tn, ty, tx, bk)
        if tiling.shared_bytes <= room and tiling.threads <= spec.max_threads_per_block:
            return tiling
    return None


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def schedule_gemm(sch: Schedule, name: str, spec: GpuSpec) -> bool:
    """Tile the matrix product ``name`` through shared memory and registers; False (nothing
    changed) where ``name`` is no matrix product or its tiles do not fit ``spec``."""
    plan = _matrix_view(sch, name)
    if plan is None:
        return False
    m, n = plan.row.extent, plan.col.extent
    batch = math.prod(f.extent for f in plan.batch)
    tiling = choose_tiling(m, n, plan.red.extent, batch, spec)
    if tiling is None or math.ceil(m / tiling.bm) > MAX_GRID_YZ or batch > MAX_GRID_YZ:
        return False
    t = tiling
    block = BlockRef(name)
    stages = _cache_factors(sch, name, plan)
    i0, i1, i2 = sch.split(LoopRef(name, plan.row.var.name), [None, t.tm, t.ty])
    j0, j1, j2 = sch.split(LoopRef(name, plan.col.var.name), [None, t.tn, t.tx])
    batch_loops = [LoopRef(name, f.var.name) for f in plan.batch]
    sch.reorder(*batch_loops, i0, j0, i2, j2, i1, j1)
    sch.tile_accumulator(block, i1, j1)
    k0, k1 = sch.split(LoopRef(name, plan.red.var.name), [None, t.bk])
    for loop in batch_loops:  # one at most: _matrix_view fused them
        sch.bind(loop, "blockIdx.z")
    sch.bind(i0, "blockIdx.y")
    sch.bind(j0, "blockIdx.x")
    sch.bind(i2, "threadIdx.y")
    sch.bind(j2, "threadIdx.x")
    for loop in (k1, i1, j1):
        sch.unroll(loop)
    for suffix in ("_init", "_store"):
        sch.unroll(LoopRef(name, i1.name + suffix))
        sch.unroll(LoopRef(name, j1.name + suffix))
    for stage, _ in reversed(stages):
        sch.compute_at(stage, k0)
    for stage, rows_fast in stages:
        _spread_copy(sch, stage, rows_fast, t)
    return True


def _cache_factors(sch: Schedule, name: str, plan: GemmPlan) -> list[tuple[BlockRef, bool]]:
    """Cache A's factor over (batch.., i, k) and B's over (batch.., k, j) in shared memory
    (:meth:`~hetero.core.schedule.Schedule.cache_operand`); each stage with whether its
    walk must put its first axis fastest (the source's last index does not move with the
    second: a transposed B), so consecutive threads read consecutive words. None where A
    and B read one buffer (``x @ x``): one operand a buffer is what a stage can name."""
    sources = [next(e for e in exprs_of(f) if isinstance(e, Load)) for f in (plan.a, plan.b)]
    if sources[0].buffer == sources[1].buffer:
        return []
    stages = []
    for factor, load, dims in ((plan.a, sources[0], (plan.row.var, plan.red.var)),
                               (plan.b, sources[1], (plan.red.var, plan.col.var))):
        used = {e for e in exprs_of(factor) if isinstance(e, Var)}
        axes = [f.var for f in plan.batch if f.var in used] + list(dims)
        stage = sch.cache_operand(BlockRef(name), *(LoopRef(name, v.name) for v in axes),
                                  buffer=load.buffer.name, scope="shared")
        rows_fast = not any(e == dims[1] for e in exprs_of(load.indices[-1]))
        stages.append((stage, rows_fast))
    return stages


def _spread_copy(sch: Schedule, stage: BlockRef, rows_fast: bool, t: GemmTiling) -> None:
    """Spread the copy ``stage`` (computed at the reduction's outer loop) over the block's
    threads: its loops fused in the order of the source's rows, the fused loop split by
    the ``ty x tx`` threads and bound to them, what is left unrolled (thread ``t`` copies
    elements ``t, t + ty*tx, ...``)."""
    own = [l for l in sch.get_loops(stage) if l.block == stage.name]
    if not own:  # a one-element tile: each thread stores the same value
        return
    if rows_fast and len(own) == 2:
        own = own[::-1]
        sch.reorder(*own)
    loop = sch.fuse(*own) if len(own) > 1 else own[0]
    e, y, x = sch.split(loop, [None, t.ty, t.tx])
    sch.bind(y, "threadIdx.y")
    sch.bind(x, "threadIdx.x")
    sch.unroll(e)
