"""The tiled GPU schedule for sums of products (MatMul 2-D and batched, Gemm, Conv with one
group): shared-memory tiles, a register tile per thread.

The classic SIMT tiling of TVM's CUDA matmul tutorial and CUTLASS's simplest kernel.
A block computes a ``BM x BN`` tile of the output (``blockIdx.y``, ``blockIdx.x``; the
batch, if any, on ``blockIdx.z``) with ``TY x TX`` threads (``threadIdx.y``,
``threadIdx.x``); each thread holds a ``TM x TN`` register tile of accumulators
(:meth:`~hetero.core.schedule.Schedule.tile_accumulator`), its rows and columns strided
by ``TY`` and ``TX`` so that the threads of a warp read consecutive shared words and
store consecutive output elements. The reduction is split by ``BK``; at each step the
block copies the ``BM x BK`` tile of A and the ``BK x BN`` tile of B into shared memory
together (thread ``t`` copies elements ``t, t + TY*TX, ...``, in the order of the source's
rows, so a warp reads consecutive global words), meets at a barrier, accumulates from
shared memory, and meets again before the next copy overwrites the tiles. Elements
past the ends of a ragged M, N or K are copied as zeros, steps past K are skipped and
stores past M and N dropped (the splits' guards), so every size is correct; each
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

Every loop step is a schedule primitive, recorded in the trace (split, reorder,
tile_accumulator, fuse, bind, unroll). The staging through shared memory is not:
the primitives cannot express a copy that the threads of a block share
(:func:`stage_tiles_in_shared` says why), so it is a rewrite made after them, and
a trace replays the tiling without it.
"""

from __future__ import annotations

import math
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Binary, Expr, Load, Var, const, logical_and, lt, minimum, select
from hetero.core.ir.tir.stmt import (
    Allocate, Barrier, Block, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store, seq,
)
from hetero.core.ir.tir.visit import exprs_of, map_stmt, substitute
from hetero.core.schedule import BlockRef, LoopRef, Schedule
from hetero.core.schedule.tree import block_names, find_block, node_at, paths, replace_at, unique_name
from hetero.plugins.cuda.device import GpuSpec

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
    loops = {role: Var(ref.name) for role, ref in
             {"by": i0, "bx": j0, "ty": i2, "tx": j2, "tm": i1, "tn": j1, "ko": k0, "ki": k1}.items()}
    sch.func = stage_tiles_in_shared(sch.func, name, plan, t, loops)
    return True


def stage_tiles_in_shared(func: PrimFunc, name: str, plan: GemmPlan, t: GemmTiling,
                          loops: Mapping[str, Var]) -> PrimFunc:
    """``func`` with the tiled product ``name`` reading A and B from shared tiles that the
    block's threads copy together at each reduction step, between two barriers.

    Why no primitive does this (TVM does it with ``cache_read`` + ``compute_at`` at the
    reduction's outer loop + ``bind`` of the copy's loops, then its storage passes): here
    ``compute_at`` computes the region one iteration reads with every enclosing loop
    fixed, the thread loops included, so the copy it places covers one thread's rows,
    not the block's tile; ``bind`` refuses a loop inside a loop bound to the same axis,
    so the copy cannot be spread over the block's threads; ``cache_read`` keeps the
    buffer's full shape, allocated around the whole stage (outside the block loops,
    where the renderer refuses shared memory); and no primitive places barriers.
    """
    root = func.body
    used = {b.name for b in func.params} | set(block_names(root)) | {
        s.buffer.name for _, s in paths(root) if isinstance(s, Allocate)} | {
        s.var.name for _, s in paths(root) if isinstance(s, For)}
    tiles = []
    for factor, shape in ((plan.a, (t.bm, t.bk)), (plan.b, (t.bk, t.bn))):
        source = next(e for e in exprs_of(factor) if isinstance(e, Load)).buffer
        tiles.append(Buffer(unique_name(f"{source.name}_shared", used), shape, np.float32, "shared"))
        used.add(tiles[-1].name)
    a_sh, b_sh = tiles
    by, bx, ty, tx, tm, tn, ko, ki = (loops[r] for r in ("by", "bx", "ty", "tx", "tm", "tn", "ko", "ki"))
    ko_path = _loop_path(root, ko)
    ko_loop = node_at(root, ko_path)
    assert isinstance(ko_loop, For)
    thread = ty * t.tx + tx
    m, n, k = plan.row.extent, plan.col.extent, plan.red.extent
    copies = []
    for factor, tile, dims in ((plan.a, a_sh, ((plan.row.var, by * t.bm, m), (plan.red.var, ko * t.bk, k))),
                               (plan.b, b_sh, ((plan.red.var, ko * t.bk, k), (plan.col.var, bx * t.bn, n)))):
        copies.append(_cooperative_copy(factor, tile, dims, thread, t.threads, used))
    a_tile, b_tile = a_sh[tm * t.ty + ty, ki], b_sh[ki, tn * t.tx + tx]
    product = Binary("mul", a_tile, b_tile, np.dtype(np.float32)) if plan.a_first else \
        Binary("mul", b_tile, a_tile, np.dtype(np.float32))

    def redirect(s: Stmt) -> Stmt | None:
        # The update (acc[tm, tn] = acc[tm, tn] + A * B, its reads clamped by
        # tile_accumulator) reads the tiles instead.
        if isinstance(s, Store) and s.buffer.scope == "local" and isinstance(s.value, Binary):
            return Store(s.buffer, s.indices, Binary("add", s.value.a, product, s.value.dtype))
        return None

    step = map_stmt(ko_loop.body, redirect)
    body = seq(*copies, Barrier("shared"), step, Barrier("shared"))
    root = replace_at(root, ko_path, dataclasses.replace(ko_loop, body=body))
    ty_path = _loop_path(root, ty)
    return PrimFunc(func.name, func.params, replace_at(root, ty_path, Allocate(a_sh, Allocate(
        b_sh, node_at(root, ty_path)))), func.attrs)


def _loop_path(root: Stmt, var: Var) -> tuple[int, ...]:
    found = [p for p, s in paths(root) if isinstance(s, For) and s.var == var]
    assert len(found) == 1, f"one loop {var.name} expected, found {len(found)}"
    return found[0]


def _cooperative_copy(factor: Expr, tile: Buffer, dims: tuple[tuple[Var, Expr, int], ...],
                      thread: Expr, threads: int, used: set[str]) -> Stmt:
    """The copy of ``factor``'s values into ``tile`` (dims: each tile axis's loop variable
    in the lowering, its origin and the loop's extent; the batch loop keeps its variable),
    shared by ``threads`` threads, zeros past the ends; walked in the order of its first read's rows, so consecutive
    threads read consecutive words."""
    elements = tile.size
    e = Var(unique_name(f"{tile.name}_e", used))
    used.add(e.name)
    index = e * threads + thread
    last = next(x for x in exprs_of(factor) if isinstance(x, Load)).indices[-1]
    fast = 1 if any(v == dims[1][0] for v in exprs_of(last)) else 0
    coords: list[Expr] = [index // tile.shape[fast]] * 2
    coords[fast] = index % tile.shape[fast]
    mapping: dict[Var, Expr] = {}
    inside: list[Expr] = []
    for (var, origin, extent), local, size in zip(dims, coords, tile.shape):
        source = origin + local
        if extent % size:
            inside.append(lt(source, extent))
            source = minimum(source, extent - 1)
        mapping[var] = source
    value = substitute(factor, mapping)
    if inside:
        cond = inside[0] if len(inside) == 1 else logical_and(inside[0], inside[1])
        value = select(cond, value, const(0.0, factor.dtype))
    copy: Stmt = Store(tile, (coords[0], coords[1]), value)
    if elements % threads:
        copy = IfThenElse(lt(index, elements), copy)
    return For(e, -(-elements // threads), copy, ForKind.UNROLLED)
