"""The register tile for convolutions in the blocked-channel layout (``ConvBlocked``).

A blocked convolution (:mod:`hetero.core.passes.layout`) writes ``Y[n, co, oh, ow, lane]``
with the channel block innermost, and reads its weight as ``W[co, rc, kh, kw, rci, lane]``:
one vector of weights per reduction step, already contiguous, so unlike the NCHW tile of
:mod:`~hetero.plugins.llvm_cpu.schedules_tiled` nothing is packed and every tile store
is whole vectors. The tile is oneDNN's: ``rows`` output pixels along ``ow`` times
``blocks`` output-channel blocks, each a vector accumulator, while the whole reduction
runs around it. Each reduction step loads ``blocks`` weight vectors, broadcasts ``rows``
input scalars (a depthwise one loads ``rows x blocks`` input vectors instead) and issues
``rows x blocks`` fused multiply-adds. The sizes come from the host's vector
registers (:func:`~hetero.plugins.llvm_cpu.host.host`): half of them as accumulators
(above its FMA latency's need wherever the shape allows), with ``rows`` dividing ``ow``
and ``blocks`` dividing the output's blocks, so no tile is partial.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetero.plugin.schedule import BlockRef, LoopRef, Schedule, affine
from hetero.plugin.tir import Binary, Const, For, Load, PrimFunc, Store, Var, exprs_of
from hetero.plugins.llvm_cpu.host import host
from hetero.plugins.llvm_cpu.nests import reduction_nest
from hetero.plugins.llvm_cpu.schedules_tiled import parallelize_outer

#: Most output-channel blocks in one tile: past four, each broadcast input feeds more
#: weight vectors than the registers leave room for rows.
MAX_BLOCKS = 4
#: Share of the vector registers the accumulators take: the rest hold the weight
#: vectors, the broadcast and LLVM's addresses. Measured on AVX-512 (32 registers):
#: 16-accumulator tiles (8 x 2 at 56 columns) ran 1.2-1.4x faster than 28 (28 x 1, 14 x 2),
#: which spill.
ACCUMULATOR_SHARE = 0.5


@dataclass(frozen=True)
class BlockedPlan:
    """The loops of a blocked convolution's nest: (n, co, o..., lane), outermost first."""

    spatial: tuple[For, ...]
    blocks: For  # the output-channel block loop (co)
    row: For  # the innermost spatial loop (ow)
    lane: For  # the channel lanes, innermost in every tensor
    group_blocks: int = 0  # a grouped convolution's output blocks per group (0: not grouped)


def plan_blocked(func: PrimFunc, block_name: str) -> BlockedPlan | None:
    """The plan of ``block_name``, or None unless it is one float sum of products over at
    least four data-parallel loops whose last one is the output's last axis, of exactly
    one vector's lanes, which every read uses at most as its own last index."""
    nest = reduction_nest(func, block_name)
    if nest is None or len(nest.spatial) < 4:
        return None
    update = nest.update_body
    if not (isinstance(update, Store) and isinstance(update.value, Binary) and update.value.op == "add"
            and isinstance(update.value.b, Binary) and update.value.b.op == "mul"
            and update.value.b.dtype == np.float32):
        return None
    spatial = nest.spatial
    lane = spatial[-1]
    if lane.extent != host().lanes(4):
        return None
    for load in (e for e in exprs_of(update.value.b) if isinstance(e, Load)):
        if not _lane_last_or_absent(load, lane.var):
            return None
    return BlockedPlan(spatial, spatial[1], spatial[-2], lane, _group_blocks(update.value.b, spatial[1].var))


def _group_blocks(product: Binary, co: Var) -> int:
    """Output blocks per group of a grouped convolution, whose input block is read at
    ``co // blocks_per_group * ...`` (:mod:`hetero.core.lower.layout`); 0 if none is."""
    for e in exprs_of(product):
        if isinstance(e, Binary) and e.op == "floordiv" and e.a == co and isinstance(e.b, Const):
            return int(e.b.value)
    return 0


def _lane_last_or_absent(load: Load, lane: Var) -> bool:
    uses = [d for d, index in enumerate(load.indices) if any(e == lane for e in exprs_of(index))]
    if not uses:
        return True
    return uses == [len(load.indices) - 1] and affine(load.indices[-1]) == ({lane: 1}, 0)


def tile_shape(rows: int, blocks: int, registers: int, group_blocks: int = 0) -> tuple[int, int]:
    """(rows, blocks) of the tile for a row loop of ``rows`` and ``blocks`` output blocks:
    divisors of each, at most :data:`ACCUMULATOR_SHARE` of ``registers`` as accumulators;
    the most accumulators, ties to more rows (measured: 8 x 2 beat 4 x 4 by 1.3-2x). A
    grouped convolution's tile keeps to one group (its blocks divide ``group_blocks``),
    so that every block of the tile reads the same broadcast inputs, and prefers a tile
    whose loads a step (``rows`` broadcasts, ``blocks`` weight vectors) do not outnumber
    its multiply-adds: ShuffleNet's 34-channel groups (3 blocks) at 28 columns ran 17-25%
    faster as 4 x 3 than as 14 x 1, which loads once per multiply-add."""
    budget = int(registers * ACCUMULATOR_SHARE)
    best, best_key = (1, 1), (False, 1, 1)
    within = group_blocks or blocks
    for b in range(1, min(within, MAX_BLOCKS) + 1):
        if blocks % b or within % b:
            continue
        r = max(d for d in range(1, min(rows, budget // b) + 1) if rows % d == 0)
        key = (bool(group_blocks) and r + b <= r * b, r * b, r)
        if key > best_key:
            best, best_key = (r, b), key
    return best


def schedule_blocked(sch: Schedule, block_name: str, plan: BlockedPlan, threads: int) -> None:
    """Apply the blocked register tile of ``plan`` to ``block_name``."""
    cpu = host()
    block = BlockRef(block_name)
    ref = {f.var.name: LoopRef(block_name, f.var.name) for f in plan.spatial}
    rows, blocks = tile_shape(plan.row.extent, plan.blocks.extent, cpu.vector_registers, plan.group_blocks)
    row_outer, row_inner = sch.split(ref[plan.row.var.name], [None, rows])
    block_outer, block_inner = sch.split(ref[plan.blocks.var.name], [None, blocks])
    outer: list[LoopRef] = []
    for f in plan.spatial[:-1]:
        outer.append(row_outer if f is plan.row else block_outer if f is plan.blocks else ref[f.var.name])
    lane = ref[plan.lane.var.name]
    sch.reorder(*outer, block_inner, row_inner, lane)
    sch.tile_accumulator(block, block_inner, row_inner, lane)
    for suffix in ("_init", "", "_store"):
        sch.unroll(LoopRef(block_name, block_inner.name + suffix))
        sch.unroll(LoopRef(block_name, row_inner.name + suffix))
        sch.vectorize(LoopRef(block_name, lane.name + suffix))
    if threads > 1:
        parallelize_outer(sch, outer, threads)
