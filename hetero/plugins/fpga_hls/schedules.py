"""Default HLS schedules: pipelined inner loops, unrolled reductions, operands in partitioned BRAM.

What an HLS engineer writes first for each op family, as schedule primitives, so the
trace records every step and the emitter reads the result off the loops' kinds and
annotations and the buffers' partitions:

Stages without a reduction (elementwise ops, relu and clip, casts, layout ops)
    Their own loops are fused into one loop over the output, pipelined at II=1: each
    iteration reads every operand once and writes one element, so the ports allow it.

Stages with a reduction (conv2d, depthwise conv, matmul, gemm, pooling, global pooling,
with whatever epilogue lowering fused into their store: bias, relu, clip, a divisor)
    1. The scalar accumulator becomes a tile over the trailing output loops (at most
       :data:`ACC_TILE` elements; :meth:`~hetero.core.schedule.Schedule.tile_accumulator`),
       so the pipelined loop writes a different element every iteration and carries no
       dependence through the adder: a float sum reaches II=1 without reassociating.
    2. The reduction loops are split into an outer part, run serially around the tile,
       and an inner part of ``lanes`` terms (the innermost reduction loops whole and the
       next one, the channel loop for a convolution, by a divisor of its extent), moved
       inside the tile loop and unrolled: ``lanes`` multiply-adds a cycle.
    3. The tile loops are fused and pipelined at II=1 (their init and store copies too).
    4. Every argument the pipelined loop reads more than once an iteration is copied into
       on-chip memory (:meth:`~hetero.core.schedule.Schedule.cache_read`; ``bram``, or
       ``uram`` where BRAM is short) and partitioned cyclically along each dimension the
       unrolled loops walk, by the lanes that walk it, so each lane reads its own bank.
       An argument that fits neither stays off-chip, and the estimate shows its ports
       limiting the interval. The copy's loops are fused and pipelined.

    ``lanes`` is chosen by estimating each candidate
    (:func:`~hetero.plugins.fpga_hls.estimate.estimate`): the fewest cycles among those
    whose DSPs and on-chip memory fit the budgets (:data:`DSP_SHARE` and :data:`BRAM_SHARE`
    of the part, as HLS designs leave headroom for routing), fewer lanes on a tie, and at
    most :data:`MAX_LANES`; where none fits, the one with the fewest DSPs. The estimate
    also decides whether a copy on chip pays: an operand each element of which is read
    once (a fully connected layer's weights, a pool whose stride is its window) streams
    from off-chip as fast as it would be copied, and stays there. Each output element still adds its terms one at a time in the
    original order, so the function means exactly what the unscheduled lowering means.

A stage that fits neither shape (written as statements, or a reduction lowering did not
give a one-element accumulator) has its innermost loops pipelined at II=1; the estimate
then reports the interval its dependences allow.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from hetero.plugin import ScheduleError
from hetero.plugin.schedule import BlockRef, LoopRef, Schedule, block_names, find_block, node_at, owned_loops
from hetero.plugin.tir import (
    Block, Buffer, Expr, For, ForKind, IfThenElse, IterKind, Load, Partition, PrimFunc, Stmt, Store, Var, exprs_of,
    walk,
)
from hetero.plugins.fpga_hls.device import FpgaPart, get_part
from hetero.plugins.fpga_hls.estimate import buffer_estimate, estimate

#: Accumulator elements a reduction's tile holds at most (registers or a small BRAM).
ACC_TILE = 256
#: Reduction terms unrolled side by side at most, whatever the DSP budget allows.
MAX_LANES = 512
#: The share of the part's DSPs a default schedule may use.
DSP_SHARE = 0.8
#: The share of the part's BRAM_18K (and URAM) blocks a default schedule may fill.
BRAM_SHARE = 0.8


@dataclass(frozen=True)
class _Plan:
    """How a reduction stage's loops are cut: ``outer`` stay serial, ``inner`` are unrolled
    inside the tile loop; ``split`` is ``(loop, lanes)`` when one loop is cut in two."""

    outer: tuple[str, ...]
    inner: tuple[str, ...]
    split: tuple[str, int] | None
    lanes: int


def default_schedule(func: PrimFunc, part: FpgaPart | str | None = None, *,
                     dsp_budget: int | None = None, bram_budget: int | None = None,
                     uram_budget: int | None = None) -> Schedule:
    """``func`` scheduled for ``part`` (a preset name or a part; the default part for None).

    ``dsp_budget``, ``bram_budget`` (BRAM_18K blocks) and ``uram_budget`` (URAM blocks)
    bound what the schedule may use; by default :data:`DSP_SHARE` of the part's DSPs and
    :data:`BRAM_SHARE` of its BRAM and URAM.
    """
    target = get_part(part)
    dsps = int(target.dsp * DSP_SHARE) if dsp_budget is None else dsp_budget
    memory = (int(target.bram_18k * BRAM_SHARE) if bram_budget is None else bram_budget,
              int(target.uram * BRAM_SHARE) if uram_budget is None else uram_budget)
    sch = Schedule(func)
    for name in block_names(func.body):
        block = _block(sch, name)
        if not any(isinstance(s, For) for s in walk(block)):
            continue  # a scalar: one statement, nothing to pipeline
        if _reduction_loops(sch, name) and _schedule_reduction(sch, name, target, dsps, memory):
            continue
        if block.iters and not any(it.kind is IterKind.REDUCTION for it in block.iters):
            _pipeline_fused(sch, name, [l for l in sch.get_loops(BlockRef(name)) if l.block == name])
        else:
            _pipeline_innermost(sch, name)
    return sch


def _block(sch: Schedule, name: str) -> Block:
    path = find_block(sch.func.body, name)
    block = node_at(sch.func.body, path) if path is not None else None
    if not isinstance(block, Block):
        raise ScheduleError(f"func {sch.func.name} has no block {name!r}")
    return block


def _reduction_loops(sch: Schedule, name: str) -> list[LoopRef]:
    block = _block(sch, name)
    reduction = {it.var.name for it in block.iters if it.kind is IterKind.REDUCTION}
    return [l for l in sch.get_loops(BlockRef(name)) if l.block == name and l.name in reduction]


def _pipeline_fused(sch: Schedule, name: str, loops: list[LoopRef]) -> LoopRef | None:
    """Fuse ``loops`` (a perfect nest, outermost first) and pipeline the result at II=1; where
    they do not fuse, pipeline the innermost loops instead."""
    if not loops:
        return None
    try:
        loop = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    except ScheduleError:
        _pipeline_innermost(sch, name)
        return None
    sch.pipeline(loop, 1)
    return loop


def _pipeline_innermost(sch: Schedule, name: str) -> None:
    """Pipeline at II=1 every serial loop of block ``name`` that holds no other loop."""
    root = sch.func.body
    path = find_block(root, name)
    assert path is not None
    innermost = []
    for p in owned_loops(root, path):
        loop = node_at(root, p)
        if isinstance(loop, For) and loop.kind is ForKind.SERIAL and \
                not any(isinstance(s, For) for s in walk(loop.body)):
            innermost.append(LoopRef(name, loop.var.name))
    # A statement-written stage may reuse a loop variable's name in several nests; a loop
    # reference names the first, so each name is pipelined once (the others stay serial).
    for ref in dict.fromkeys(innermost):
        sch.pipeline(ref, 1)


# -- reductions -----------------------------------------------------------------------------


def _schedule_reduction(sch: Schedule, name: str, part: FpgaPart, dsps: int, memory: tuple[int, int]) -> bool:
    """Apply the best plan that fits the budgets to reduction stage ``name``; False (the
    schedule unchanged) where the stage is not a one-element accumulation."""
    block = _block(sch, name)
    spatial = {it.var.name for it in block.iters if it.kind is IterKind.SPATIAL}
    loops = [l for l in sch.get_loops(BlockRef(name)) if l.block == name]
    reduction = _reduction_loops(sch, name)
    extents = {l.name: sch.extent(l) for l in loops}
    tile: list[LoopRef] = []
    for l in reversed([l for l in loops if l.name in spatial]):
        if tile and math.prod(extents[t.name] for t in tile) * extents[l.name] > ACC_TILE:
            break
        tile.insert(0, l)
    best: tuple[tuple[int, int], Schedule] | None = None
    fallback: tuple[tuple[int, int], Schedule] | None = None
    for plan in _plans([r.name for r in reduction], extents):
        trial = _trial(sch)
        try:
            _apply(trial, name, plan, [t.name for t in tile], part, memory)
        except ScheduleError:
            continue
        est = estimate(trial.func, part)
        key = (est.cycles, plan.lanes)
        if est.resources.dsp <= dsps and (best is None or key < best[0]):
            best = (key, trial)
        if fallback is None or (est.resources.dsp, plan.lanes) < fallback[0]:
            fallback = ((est.resources.dsp, plan.lanes), trial)
    chosen = best or fallback
    if chosen is None:
        return False
    sch.func, sch.trace = chosen[1].func, chosen[1].trace
    return True


def _trial(sch: Schedule) -> Schedule:
    trial = Schedule(sch.func)
    trial.trace = sch.trace
    return trial


def _plans(reduction: list[str], extents: dict[str, int]) -> list[_Plan]:
    """Every cut of the reduction loops (outermost first) into serial and unrolled parts: the
    innermost loops whole, the next one by each divisor of its extent, up to MAX_LANES."""
    plans = [_Plan(tuple(reduction), (), None, 1)]
    for m in range(len(reduction) - 1, -1, -1):
        rest = math.prod(extents[r] for r in reduction[m + 1:])
        extent = extents[reduction[m]]
        for u in range(2, extent + 1):
            if extent % u or u * rest > MAX_LANES:
                continue
            outer, inner = tuple(reduction[:m]), tuple(reduction[m:])
            if u == extent:
                plans.append(_Plan(outer, inner, None, u * rest))
            else:
                plans.append(_Plan(outer + (f"{reduction[m]}_0",), (f"{reduction[m]}_1",) + inner[1:],
                                   (reduction[m], u), u * rest))
        if rest * extent > MAX_LANES:
            break
    return plans


def _apply(sch: Schedule, name: str, plan: _Plan, tile: list[str], part: FpgaPart,
           memory: tuple[int, int]) -> None:
    """Cut the reduction as ``plan`` says, tile the accumulator over ``tile``, pipeline and
    unroll, and move the operands read more than once a cycle on chip."""
    block = BlockRef(name)
    ref = {l.name: l for l in sch.get_loops(block)}
    if plan.split is not None:
        sch.split(ref[plan.split[0]], [None, plan.split[1]])
    sch.tile_accumulator(block, *(LoopRef(name, t) for t in tile))
    if plan.inner:
        sch.reorder(*(LoopRef(name, n) for n in (*plan.outer, *tile, *plan.inner)))
    for suffix in ("_init", "_store"):
        _pipeline_fused(sch, name, [LoopRef(name, t + suffix) for t in tile])
    loop = sch.fuse(*(LoopRef(name, t) for t in tile)) if len(tile) > 1 else LoopRef(name, tile[0])
    sch.pipeline(loop, 1)
    for n in plan.inner:
        sch.unroll(LoopRef(name, n))
    _cache_operands(sch, name, loop, part, memory)


def _cache_operands(sch: Schedule, name: str, loop: LoopRef, part: FpgaPart, memory: tuple[int, int]) -> None:
    """Copy each argument the pipelined ``loop`` reads on several lanes into BRAM (or URAM),
    partitioned along the dimensions the lanes walk, while the budget lasts."""
    pipelined = next(s for s in walk(_block(sch, name)) if isinstance(s, For) and s.var.name == loop.name)
    lanes = {s.var: s.extent for s in walk(pipelined.body) if isinstance(s, For)}
    params = {b.name for b in sch.func.params}
    reads: dict[str, tuple[Buffer, list[int]]] = {}
    for s in walk(pipelined.body):
        for e in _loads(s):
            if e.buffer.name not in params or e.buffer.name == _block(sch, name).writes.name:
                continue
            factors = [min(extent, math.prod(n for v, n in lanes.items() if v in _vars_of(i)))
                       for extent, i in zip(e.buffer.shape, e.indices)]
            old = reads.get(e.buffer.name, (e.buffer, [1] * len(factors)))[1]
            reads[e.buffer.name] = (e.buffer, [max(a, b) for a, b in zip(old, factors)])
    used = estimate(sch.func, part).resources
    used_bram, used_uram = used.bram_18k, used.uram
    for buffer_name, (buffer, factors) in reads.items():
        if math.prod(factors) <= 1:
            continue  # one element an iteration: its AXI channel keeps up
        partitions = tuple(Partition(d, "cyclic", f) for d, f in enumerate(factors) if f > 1)
        for scope in ("bram", "uram"):
            cost = buffer_estimate(Buffer(buffer.name, buffer.shape, buffer.dtype, scope), partitions)
            if scope == "bram" and used_bram + cost.bram_18k <= memory[0]:
                used_bram += cost.bram_18k
                break
            if scope == "uram" and used_uram + cost.uram <= memory[1]:
                used_uram += cost.uram
                break
        else:
            continue  # too large for the chip: it stays off-chip
        copy = sch.cache_read(BlockRef(name), buffer_name, scope)
        for p in partitions:
            sch.partition(copy.name, p.dim, p.kind, p.factor)
        _pipeline_fused(sch, copy.name, [l for l in sch.get_loops(copy) if l.block == copy.name])


def _loads(stmt: Stmt) -> list[Load]:
    """The reads in ``stmt`` itself (not in statements under it)."""
    found: list[Load] = []
    if isinstance(stmt, Store):
        for x in (*stmt.indices, stmt.value):
            found += [e for e in exprs_of(x) if isinstance(e, Load)]
    elif isinstance(stmt, IfThenElse):
        found += [e for e in exprs_of(stmt.cond) if isinstance(e, Load)]
    return found


def _vars_of(expr: Expr) -> set[Var]:
    return {e for e in exprs_of(expr) if isinstance(e, Var)}
