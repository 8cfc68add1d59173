"""The register-tiled micro-kernel schedule for sums of products (MatMul, Gemm, Conv).

BLIS's and TVM's CPU recipe, made of schedule primitives: the output is cut into
tiles of ``rows x lanes`` elements held in vector registers while the whole
reduction runs (:meth:`~hetero.core.schedule.Schedule.tile_accumulator`); the
operand that varies along the lanes is packed into panels ``lanes`` wide
(:meth:`~hetero.core.schedule.Schedule.pack`), so each reduction step loads one
contiguous row of vectors, broadcasts ``rows`` scalars of the other operand and
issues ``rows * lanes / vector`` fused multiply-adds. The tile's sizes come from the
host's vector width, registers and FMA units (:func:`register_tile`), so one schedule
fits AVX-512 (8 rows of 2x16 lanes), AVX2 (6 rows of 2x8) and NEON alike. Where the packed operand
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

from hetero.plugin.schedule import BlockRef, LoopRef, Schedule, affine, find_block, node_at
from hetero.plugin.tir import Binary, Call, Expr, For, IfThenElse, Load, PrimFunc, Store, Var, exprs_of, mentions, walk
from hetero.plugins.llvm_cpu.host import HostCpu, host
from hetero.plugins.llvm_cpu.nests import reduction_nest

#: Vectors along the lanes of one tile row: two loads per reduction step feed each
#: broadcast twice.
VECTORS_PER_ROW = 2
#: Most rows a tile has, whatever the registers allow: eight rows of two vectors already
#: leave the FMA units, not the loads, the bound; more only lengthen the unrolled body.
MAX_ROWS = 8
#: Fewest rows worth a tile: fewer leave each loaded vector used too few times.
MIN_ROWS = 4
#: The codegen's widest vectorized loop (hetero.plugins.llvm_cpu.codegen): wider lane
#: loops keep their accumulators in memory, not registers.
MAX_VECTOR_LOOP = 64
#: Data-parallel iterations per thread worth splitting across cores.
CHUNKS_PER_THREAD = 4


@dataclass(frozen=True)
class RegisterTile:
    """The micro-kernel's register tile for one CPU, from its vector width, register
    count and FMA units (:mod:`~hetero.plugins.llvm_cpu.host`)."""

    vector: int  # float32 (or int32) lanes of one vector register
    lanes: int  # lanes of a tile row
    row_choices: tuple[int, ...]  # rows of the tile, best first
    min_accumulators: int  # independent vector accumulators a tile holds at least
    min_lanes: int  # narrower lane loops do not fill a vector: the plain schedule serves them


def register_tile(cpu: HostCpu) -> RegisterTile:
    """The tile for ``cpu``: rows x VECTORS_PER_ROW accumulators, the row's loaded vectors
    and one broadcast all in registers (32 AVX-512 registers allow 8 rows, AVX2's 16
    allow 6); a one-row tile (batch-1 Gemm) widens its lanes until it has enough
    accumulators to keep every FMA unit busy (FMA latency x units), as far as the
    codegen keeps them in registers."""
    vector = cpu.lanes(4)
    most = min(MAX_ROWS, (cpu.vector_registers - VECTORS_PER_ROW - 1) // VECTORS_PER_ROW)
    rows = tuple(range(most, min(MIN_ROWS, most) - 1, -1))
    return RegisterTile(vector=vector, lanes=VECTORS_PER_ROW * vector, row_choices=rows,
                        min_accumulators=min(cpu.min_accumulators, MAX_VECTOR_LOOP // vector),
                        min_lanes=max(vector // 2, 4))


#: The host's tile, which the default schedules use.
TILE = register_tile(host())
#: float32 lanes of one host vector, and the fewest accumulators a host tile holds.
VECTOR, MIN_ACCUMULATORS = TILE.vector, TILE.min_accumulators


@dataclass(frozen=True)
class TilePlan:
    """What the micro-kernel schedule needs to know about a block."""

    spatial: tuple[For, ...]  # the block's data-parallel loops, outermost first
    row: For
    lane: For
    packed: tuple[tuple[str, int], ...]  # (buffer, axis) of each read the lanes index


def plan_tile(func: PrimFunc, block_name: str, tile: RegisterTile = TILE) -> TilePlan | None:
    """The tile plan of ``block_name``, or None if it is not one sum of float or int32
    products over perfectly nested data-parallel loops, with a lane loop and a row loop.

    int32 is the accumulator of the int8 ops (QConv, QMatMul): integer sums are exact
    in any order, so the tile's reordering keeps them bit for bit, and an int32 vector
    has the lanes of a float32 one. A sum of ``dot4_u8s8`` (four byte products a step,
    :mod:`~hetero.plugins.llvm_cpu.schedules_int8`) is tiled alike."""
    nest = reduction_nest(func, block_name)
    if nest is None or len(nest.spatial) < 2:
        return None
    spatial = list(nest.spatial)
    products = _products(nest.update_body)
    if products is None:
        return None
    reads = [e for p in products for e in exprs_of(p) if isinstance(e, Load)]
    for lane in reversed(spatial):
        if lane.extent < tile.min_lanes:
            continue
        packed = _packable(reads, lane.var)
        if packed is None or not packed or len(packed) == len(reads):
            continue
        rows = [f for f in spatial if f is not lane]
        return TilePlan(tuple(spatial), rows[-1], lane, tuple(packed))
    return None


def _products(update: object) -> tuple[Expr, ...] | None:
    """What a sum's update adds to the accumulator: the product of ``acc + a * b`` (float
    or int32), or the two operands of ``acc = dot4_u8s8(acc, a, b)``; None for others."""
    if not isinstance(update, Store):
        return None
    value = update.value
    if (isinstance(value, Binary) and value.op == "add" and isinstance(value.b, Binary) and value.b.op == "mul"
            and (value.b.dtype.kind == "f" or value.b.dtype == np.int32)):
        return (value.b,)
    if (isinstance(value, Call) and value.func == "dot4_u8s8" and isinstance(value.args[0], Load)
            and value.args[0].buffer == update.buffer):
        return value.args[1:]
    return None


def _packable(reads: list[Load], var: Var) -> list[tuple[str, int]] | None:
    """(buffer, axis) of each read indexed by ``var`` alone on one axis; None if a read
    uses ``var`` any other way."""
    found: list[tuple[str, int]] = []
    unpackable = set()  # read somewhere without var too (MatMul(x, x) reads x as both operands)
    for load in reads:
        axes = [d for d, index in enumerate(load.indices) if mentions(index, var)]
        if not axes:
            unpackable.add(load.buffer.name)
            continue
        if len(axes) != 1 or affine(load.indices[axes[0]]) != ({var: 1}, 0):
            return None
        if (load.buffer.name, axes[0]) not in found:
            found.append((load.buffer.name, axes[0]))
    return [(name, axis) for name, axis in found if name not in unpackable]


def _rows(extent: int, tile: RegisterTile) -> int:
    """Rows of the tile for a row loop of ``extent``: all of it if it fits, else the most
    rows that divide it (no partial tile), else the middle choice."""
    choices = tile.row_choices
    if extent <= choices[0]:
        return extent
    return next((r for r in choices if extent % r == 0), choices[len(choices) // 2])


def _lanes(extent: int, rows: int, tile: RegisterTile) -> int:
    """The tile's lane count for a lane loop of ``extent`` and a tile of ``rows``."""
    vector = tile.vector
    if extent < vector:
        return extent
    if rows * tile.lanes >= tile.min_accumulators * vector:
        lanes = tile.lanes
    else:
        lanes = vector * -(-tile.min_accumulators // rows)
    return min(lanes, extent)


def schedule_tiled(sch: Schedule, block_name: str, plan: TilePlan, threads: int,
                   tile: RegisterTile = TILE) -> None:
    """Apply the micro-kernel schedule of ``plan`` to ``block_name``, with ``tile``'s
    register tile (the host's by default); the rows and lanes chosen are the trace's
    split factors, which a tuner may vary."""
    block = BlockRef(block_name)
    ref = {f.var.name: LoopRef(block_name, f.var.name) for f in plan.spatial}
    rows = _rows(plan.row.extent, tile)
    lanes = _lanes(plan.lane.extent, rows, tile)
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
        parallelize_outer(sch, outer, threads)


def _guarded_store(func: PrimFunc, block_name: str) -> bool:
    path = find_block(func.body, block_name)
    assert path is not None
    return any(isinstance(s, IfThenElse) for s in walk(node_at(func.body, path)))


def parallelize_outer(sch: Schedule, outer: list[LoopRef], threads: int) -> None:
    """Fuse the leading tile loops until there is work for every thread; run it in parallel."""
    fused, work = outer[0], sch.extent(outer[0])
    for loop in outer[1:]:
        if work >= CHUNKS_PER_THREAD * threads:
            break
        work *= sch.extent(loop)
        fused = sch.fuse(fused, loop)
    if work >= 2:
        sch.parallel(fused)

