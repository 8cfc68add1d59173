"""The spatial register tile for reductions the micro-kernel of
:mod:`~hetero.plugins.llvm_cpu.schedules_tiled` does not take: grouped Conv (whose
channel index ``co // per_group * per_group + rc`` no lane can be packed along) and
unpadded stride-1 windows (depthwise Conv, MaxPool, AveragePool).

Lowering leaves one scalar accumulator per output element with the reduction
innermost, so every term loads one scalar. Here the output's last two axes (rows
``oh``, lanes ``ow``) are cut into tiles of ``rows x lanes`` accumulators held in
registers (:meth:`~hetero.core.schedule.Schedule.tile_accumulator`) while the
reduction runs around the tile: each term then loads a row of ``lanes`` neighbouring
inputs as one vector and updates ``rows`` vectors of accumulators with one broadcast
weight. The lane loop is vectorized, the row loop unrolled. Windows with padding or
a stride are left alone: their clamped, selected reads would make every lane a
gather, slower than the scalar loop LLVM already vectorizes (measured on ShuffleNet's
depthwise 3x3 and MaxPool: 3 to 7 times slower).
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero.plugin.schedule import BlockRef, LoopRef, Schedule, affine
from hetero.plugin.tir import For, Load, PrimFunc, Select, Stmt, Store, Var, exprs_of, walk
from hetero.plugins.llvm_cpu.nests import reduction_nest
from hetero.plugins.llvm_cpu.schedules_tiled import TILE

#: Widest lane tile for rows that are split: one host vector of float32 (rows
#: shorter than two vectors stay whole).
MAX_LANES = TILE.vector
#: Narrower rows leave most of a vector idle; the plain schedule serves them.
MIN_LANES = 4
#: Rows of the tile, best first: a row count that divides the row loop leaves no
#: partial tile; as many as the host's registers hold (the micro-kernel's choices).
ROW_CHOICES = TILE.row_choices


@dataclass(frozen=True)
class WindowPlan:
    """The loops of a reduction block the spatial tile needs."""

    spatial: tuple[For, ...]  # the block's data-parallel loops, outermost first
    row: For
    lane: For


def plan_window(func: PrimFunc, block_name: str) -> WindowPlan | None:
    """The plan of ``block_name``, or None unless it is one scalar reduction under at
    least two perfectly nested data-parallel loops, the last at least ``MIN_LANES`` long
    and every read contiguous along it."""
    nest = reduction_nest(func, block_name)
    if nest is None:
        return None
    spatial = list(nest.spatial)
    if len(spatial) < 2 or spatial[-1].extent < MIN_LANES:
        return None
    if _lanes(spatial[-1].extent) is None or not _contiguous(nest.update, spatial[-1].var):
        return None
    return WindowPlan(tuple(spatial), spatial[-2], spatial[-1])


def _contiguous(update: Stmt, lane: Var) -> bool:
    """Whether every read of the reduction uses ``lane`` at most as ``lane + ...`` on one
    axis: neighbouring lanes read neighbouring elements, one vector load. A stride,
    or the clamp and select of a padded window, would make each lane a gather, slower
    than the scalar loop LLVM vectorizes on its own."""
    for s in walk(update):
        if not isinstance(s, Store):
            continue
        for e in exprs_of(s.value):
            if isinstance(e, Select):
                return False
            if not isinstance(e, Load):
                continue
            axes = [index for index in e.indices if any(x == lane for x in exprs_of(index))]
            if len(axes) > 1:
                return False
            if axes:
                form = affine(axes[0])
                if form is None or form[0].get(lane) != 1:
                    return False
    return True


def _rows(extent: int) -> int:
    if extent <= ROW_CHOICES[0]:
        return extent
    return next((r for r in ROW_CHOICES if extent % r == 0), ROW_CHOICES[-1])


def _lanes(extent: int) -> int | None:
    """The whole row if it fits in two vectors, else the widest divisor that fits one;
    None if there is none: a split's guard would clamp the lane index, and clamped
    indices turn the contiguous loads into gathers."""
    if extent < 2 * MAX_LANES:
        return extent
    return next((n for n in range(MAX_LANES, MIN_LANES - 1, -1) if extent % n == 0), None)


def schedule_window(sch: Schedule, block_name: str, plan: WindowPlan) -> list[LoopRef]:
    """Apply the spatial tile of ``plan`` to ``block_name``; return the loops outside the
    tile, outermost first (the ones a caller may parallelise)."""
    block = BlockRef(block_name)
    ref = {f.var.name: LoopRef(block_name, f.var.name) for f in plan.spatial}
    rows = _rows(plan.row.extent)
    lanes = _lanes(plan.lane.extent)
    assert lanes is not None  # plan_window checked
    row_outer, row_inner = sch.split(ref[plan.row.var.name], [None, rows])
    lane_outer, lane_inner = sch.split(ref[plan.lane.var.name], [None, lanes])
    outer = [ref[f.var.name] for f in plan.spatial[:-2]] + [row_outer, lane_outer]
    sch.reorder(*outer, row_inner, lane_inner)
    sch.tile_accumulator(block, row_inner, lane_inner)
    for suffix in ("_init", "", "_store"):
        sch.unroll(LoopRef(block_name, row_inner.name + suffix))
        sch.vectorize(LoopRef(block_name, lane_inner.name + suffix))
    return outer
