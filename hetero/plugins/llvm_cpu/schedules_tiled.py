"""The register-tiled micro-kernel schedule for sums of products (MatMul, Gemm, Conv).

BLIS's and TVM's CPU recipe, made of schedule primitives: the output is cut into
tiles of ``rows x lanes`` elements held in vector registers while the whole
reduction runs (:meth:`~hetero.core.schedule.Schedule.tile_accumulator`); the
operand that varies along the lanes is packed into panels ``lanes`` wide
(:meth:`~hetero.core.schedule.Schedule.pack`), so each reduction step loads one
contiguous row of vectors, broadcasts ``rows`` scalars of the other operand and
issues ``rows * lanes / 16`` fused multiply-adds on AVX-512. Where the packed operand
is a weight, the llvm_cpu backend packs it once at compile time
(:mod:`~hetero.plugins.llvm_cpu.prepack`), so a one-row tile (batch-1 Gemm, a
matrix-vector product) streams each weight once, straight from its panels.

The *lane* loop is a data-parallel loop that every read of the product either
ignores or uses as one plain index (the column ``j`` of a matmul, the output channel
of a convolution); the *row* loop is the innermost other data-parallel loop (the
row ``i``, the output column ``ow``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero.core.ir.tir.expr import Binary, Load, Var
from hetero.core.ir.tir.stmt import For, IfThenElse, PrimFunc, Store, walk
from hetero.core.ir.tir.visit import exprs_of
from hetero.core.schedule import BlockRef, LoopRef, Schedule
from hetero.core.schedule.region import affine
from hetero.core.schedule.tree import find_block, node_at
from hetero.plugins.llvm_cpu.nests import reduction_nest

#: Lanes of the tile: two AVX-512 vectors of float32.
LANES = 32
#: Narrower lane loops do not fill a vector: the plain schedule serves them.
MIN_LANES = 8
#: Rows of the tile, best first: rows * 2 accumulators plus two loaded vectors and a
#: broadcast stay within the 32 vector registers; a row count that divides the loop
#: leaves no partial tile.
ROW_CHOICES = (8, 7, 6, 5, 4)
#: float32 lanes of one AVX-512 vector.
VECTOR = 16
#: Independent vector accumulators a tile holds at least, so that one reduction step
#: issues that many FMA chains. A one-row tile (a matrix-vector product: batch-1 Gemm)
#: widens its lanes to get them. More would need lanes past the codegen's widest
#: vectorized loop (64), whose accumulators then live in memory, not registers.
MIN_ACCUMULATORS = 4
#: Data-parallel iterations per thread worth splitting across cores.
CHUNKS_PER_THREAD = 4


@dataclass(frozen=True)
class TilePlan:
    """What the micro-kernel schedule needs to know about a block."""

    spatial: tuple[For, ...]  # the block's data-parallel loops, outermost first
    row: For
    lane: For
    packed: tuple[tuple[str, int], ...]  # (buffer, axis) of each read the lanes index


def plan_tile(func: PrimFunc, block_name: str) -> TilePlan | None:
    """The tile plan of ``block_name``, or None if it is not one sum of float or int32
    products over perfectly nested data-parallel loops, with a lane loop and a row loop.

    int32 is the accumulator of the int8 ops (QConv, QMatMul): integer sums are exact
    in any order, so the tile's reordering keeps them bit for bit, and an int32 vector
    has the lanes of a float32 one."""
    nest = reduction_nest(func, block_name)
    if nest is None or len(nest.spatial) < 2:
        return None
    spatial = list(nest.spatial)
    update = nest.update_body
    if not (isinstance(update, Store) and isinstance(update.value, Binary) and update.value.op == "add"
            and isinstance(update.value.b, Binary) and update.value.b.op == "mul"
            and (update.value.b.dtype.kind == "f" or update.value.b.dtype == np.int32)):
        return None
    reads = [e for e in exprs_of(update.value.b) if isinstance(e, Load)]
    for lane in reversed(spatial):
        if lane.extent < MIN_LANES:
            continue
        packed = _packable(reads, lane.var)
        if packed is None or not packed or len(packed) == len(reads):
            continue
        rows = [f for f in spatial if f is not lane]
        return TilePlan(tuple(spatial), rows[-1], lane, tuple(packed))
    return None


def _packable(reads: list[Load], var: Var) -> list[tuple[str, int]] | None:
    """(buffer, axis) of each read indexed by ``var`` alone on one axis; None if a read
    uses ``var`` any other way."""
    found: list[tuple[str, int]] = []
    for load in reads:
        axes = [d for d, index in enumerate(load.indices) if any(e == var for e in exprs_of(index))]
        if not axes:
            continue
        if len(axes) != 1 or affine(load.indices[axes[0]]) != ({var: 1}, 0):
            return None
        if (load.buffer.name, axes[0]) not in found:
            found.append((load.buffer.name, axes[0]))
    return found


def _rows(extent: int) -> int:
    if extent <= ROW_CHOICES[0]:
        return extent
    return next((r for r in ROW_CHOICES if extent % r == 0), 6)


def _lanes(extent: int, rows: int) -> int:
    """The tile's lane count for a lane loop of ``extent`` and a tile of ``rows``."""
    if extent < VECTOR:
        return extent
    lanes = LANES if rows * LANES >= MIN_ACCUMULATORS * VECTOR else VECTOR * -(-MIN_ACCUMULATORS // rows)
    return min(lanes, extent)


def schedule_tiled(sch: Schedule, block_name: str, plan: TilePlan, threads: int) -> None:
    """Apply the micro-kernel schedule of ``plan`` to ``block_name``."""
    block = BlockRef(block_name)
    ref = {f.var.name: LoopRef(block_name, f.var.name) for f in plan.spatial}
    rows = _rows(plan.row.extent)
    lanes = _lanes(plan.lane.extent, rows)
    row_outer, row_inner = sch.split(ref[plan.row.var.name], [None, rows])
    lane_outer, lane_inner = sch.split(ref[plan.lane.var.name], [None, lanes])
    outer: list[LoopRef] = []
    for f in plan.spatial:
        if f is plan.row:
            outer.append(row_outer)
        elif f is plan.lane:
            outer.append(lane_outer)
        else:
            outer.append(ref[f.var.name])
    # The lane panel outside the row tiles: one packed panel stays in L2 while every
    # row tile streams past it.
    if outer.index(row_outer) < outer.index(lane_outer):
        a, b = outer.index(row_outer), outer.index(lane_outer)
        outer[a], outer[b] = outer[b], outer[a]
    sch.reorder(*outer, row_inner, lane_inner)
    for buffer, axis in plan.packed:
        sch.pack(block, buffer, axis, lanes)
    sch.tile_accumulator(block, row_inner, lane_inner)
    for suffix in ("_init", "", "_store"):
        sch.unroll(LoopRef(block_name, row_inner.name + suffix))
        if suffix != "_store" or not _guarded_store(sch.func, block_name):
            sch.vectorize(LoopRef(block_name, lane_inner.name + suffix))
    if threads > 1:
        _parallelize_outer(sch, outer, threads)


def _guarded_store(func: PrimFunc, block_name: str) -> bool:
    path = find_block(func.body, block_name)
    assert path is not None
    return any(isinstance(s, IfThenElse) for s in walk(node_at(func.body, path)))


def _parallelize_outer(sch: Schedule, outer: list[LoopRef], threads: int) -> None:
    """Fuse the leading tile loops until there is work for every thread; run it in parallel."""
    fused, work = outer[0], sch.extent(outer[0])
    for loop in outer[1:]:
        if work >= CHUNKS_PER_THREAD * threads:
            break
        work *= sch.extent(loop)
        fused = sch.fuse(fused, loop)
    if work >= 2:
        sch.parallel(fused)

