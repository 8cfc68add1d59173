"""The surgery behind :meth:`~hetero.core.schedule.schedule.Schedule.rfactor`: a reduction
folded in parallel lanes into a buffer of partials, then combined by a tree.

Lowering keeps a reduction in a one-element accumulator
(:func:`hetero.core.ir.tir.compute.lower`)::

    for <lanes>:                        # spatial loops (an output element each)
      [if <guard>:]                     # from a split that overshot the outputs
        alloc acc: f32[1] local {
          acc[0] = init
          for r in range(T):            # the lane: the outermost reduction loop
            <acc[0] = acc[0] (+) source>
          <epilogue reading acc[0]>     # Y[i] = acc[0] / n

:func:`rfactor` makes the lane a loop of its own over a buffer of partials ``P``
(one per lane and per iteration of ``r``, in the scope asked), then halves it in
log2 steps, and runs the epilogue on ``P[..., 0]``::

    alloc P: f32[<lanes>, T] shared {
      for <lanes>: for r: [if guard:]  alloc acc { acc[0] = identity; <r's body>; P[.., r] = acc[0] }
      for <lanes>: for r_1: if [guard and] r_1 < 128:  P[.., r_1] = P[.., r_1] (+) P[.., r_1 + 128]
      ...                                                             (strides 128, 64, ... 1)
      for <lanes>: [if guard:] <epilogue with acc[0] read as init (+) P[.., 0]>

Each step is a loop nest of its own, so the steps mean the same whether their loops
run serially or as threads (a step writes ``P[t]`` for ``t < s`` and reads ``P[t + s]``,
which no iteration of it writes): binding them to hardware axes is left to
:meth:`~hetero.core.schedule.schedule.Schedule.bind`, and a renderer that runs each
statement's threads to completion before the next (a barrier between them) keeps it.
The partials start from the combiner's identity, not the stage's ``init``, so a lane
with no term to fold adds nothing; the stage's ``init`` is folded in once, at the end.
A sum changes only by reassociation (the terms are added in another order); a maximum
or minimum (NaN-propagating, as the tensor IR defines them) and a product of integers
do not change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import math

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Binary, Expr, Load, Var, binary, const, logical_and, lt
from hetero.core.ir.tir.stmt import Allocate, Block, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store, seq
from hetero.core.ir.tir.visit import exprs_of, map_stmt, substitute, substitute_stmt
from hetero.core.schedule.tree import Path, buffers_allocated, fresh_var, node_at, paths, replace_at, unique_name
from hetero.errors import ScheduleError

#: The binary ops that fold a term into an accumulator and may be reassociated.
COMBINERS = ("add", "mul", "max", "min")
# A step's body from its lane variables, its copy of the reduction loop's variable (None
# for the last step), the guard over those lanes, and the map from the original lanes.
_BodyOf = Callable[[tuple[Var, ...], Var | None, Expr | None, dict[Var, Expr]], Stmt]


@dataclass(frozen=True)
class Accumulation:
    """A one-accumulator reduction as lowering writes it, found under a loop nest.

    ``lanes`` are the loops from where the search started down to the accumulator,
    ``guards`` the conditions (no else branch) between them, ``acc`` the accumulator,
    ``init`` its first value, ``update`` the outermost reduction loop, ``combiner`` the
    binary op that folds each term in, and ``epilogue`` the statements after the loop.
    """

    lanes: tuple[For, ...]
    guards: tuple[Expr, ...]
    acc: Buffer
    init: Expr
    update: For
    combiner: str
    epilogue: tuple[Stmt, ...]


def find_accumulation(stmt: Stmt) -> Accumulation | str:
    """The reduction under ``stmt`` (loops and guards down to the accumulator), or the
    reason there is none of the lowering's form."""
    lanes: list[For] = []
    guards: list[Expr] = []
    while isinstance(stmt, (For, IfThenElse)):
        if isinstance(stmt, For):
            lanes.append(stmt)
            stmt = stmt.body
        elif stmt.otherwise is not None:
            return "a branch with an else part sits above the accumulator"
        else:
            guards.append(stmt.cond)
            stmt = stmt.then
    if not isinstance(stmt, Allocate) or stmt.buffer.size != 1 or not isinstance(stmt.body, Seq):
        return "no one-element accumulator under the loops (a stage of several reductions, or none)"
    acc, parts = stmt.buffer, stmt.body.stmts
    if len(parts) < 3 or not isinstance(parts[0], Store) or parts[0].buffer != acc \
            or not isinstance(parts[1], For):
        return f"accumulator {acc.name} is not set, then folded by a loop, then read"
    init, update, epilogue = parts[0].value, parts[1], parts[2:]
    folds = [s for _, s in paths(update) if isinstance(s, Store) and s.buffer == acc]
    if len(folds) != 1 or len([s for _, s in paths(update) if isinstance(s, Store)]) != 1:
        return f"the loop {update.var.name} does more than fold one term into {acc.name}"
    combiner = _combiner(folds[0], acc)
    if combiner is None:
        return f"{acc.name} is not folded by one of {', '.join(COMBINERS)} of itself and a term"
    if any(isinstance(s, Store) and s.buffer == acc for e in epilogue for _, s in paths(e)):
        return f"the statements after the loop {update.var.name} write {acc.name} again"
    return Accumulation(tuple(lanes), tuple(guards), acc, init, update, combiner, tuple(epilogue))


def _combiner(fold: Store, acc: Buffer) -> str | None:
    """The op of ``acc[0] = acc[0] op term`` (either side), if ``term`` does not read ``acc``."""
    value = fold.value
    if not isinstance(value, Binary) or value.op not in COMBINERS:
        return None
    own = Load(acc, fold.indices, acc.dtype)
    term = value.b if value.a == own else value.a if value.b == own else None
    if term is None or any(isinstance(e, Load) and e.buffer == acc for e in exprs_of(term)):
        return None
    return value.op


def identity(combiner: str, dtype: np.dtype) -> Expr:
    """The value that ``combiner`` leaves any other unchanged, in ``dtype``."""
    if combiner == "add":
        return const(0, dtype)
    if combiner == "mul":
        return const(1, dtype)
    if dtype.kind == "f":
        return const(-np.inf if combiner == "max" else np.inf, dtype)
    if dtype.kind == "b":
        return const(combiner == "min", dtype)
    info = np.iinfo(dtype)
    return const(info.min if combiner == "max" else info.max, dtype)


@dataclass(frozen=True)
class RFactored:
    """The loops :func:`rfactor` leaves, by name: ``lanes[k]`` every copy of the k-th
    loop above the accumulator (the original first), ``reduction`` every copy of the
    lane loop (the partials' loop first, then one a tree step)."""

    lanes: tuple[tuple[str, ...], ...]
    reduction: tuple[str, ...]


def rfactor(func: PrimFunc, block_path: Path, at_path: Path, lane_path: Path, scope: str,
            used: set[str], label: str) -> tuple[Stmt, RFactored]:
    """The body with the reduction of the block at ``block_path`` folded along the loop at
    ``lane_path`` into partials allocated at the start of the loop at ``at_path``, then
    combined by a tree (see the module docstring); and the loops it leaves."""
    root = func.body
    block = node_at(root, block_path)
    at = node_at(root, at_path)
    if not isinstance(block, Block) or not isinstance(at, For) or at_path[:len(block_path)] != block_path:
        raise ScheduleError(f"cannot {label}: the allocation loop must be a loop of the block")
    found = find_accumulation(at.body)
    if isinstance(found, str):
        raise ScheduleError(f"cannot {label}: under loop {at.var.name}, {found}")
    lane = node_at(root, lane_path)
    if lane is not found.update:
        name = lane.var.name if isinstance(lane, For) else "?"
        raise ScheduleError(f"cannot {label}: loop {name} is not the outermost loop "
                            f"that folds {found.acc.name} (loop {found.update.var.name}); reorder it outward first")
    if lane.kind is not ForKind.SERIAL:
        raise ScheduleError(f"cannot {label}: loop {lane.var.name} is already {lane.kind.value}")
    for _, store in (x for e in found.epilogue for x in paths(e)):
        if not isinstance(store, Store):
            continue
        missing = [f.var.name for f in found.lanes
                   if not any(e == f.var for i in store.indices for e in exprs_of(i))]
        if missing:
            raise ScheduleError(f"cannot {label}: the store to {store.buffer.name} after the reduction does not "
                                f"index by loop {missing[0]}, so its iterations are not independent")
    taken = buffers_allocated(root) | {b.name for b in func.params}
    partials = Buffer(unique_name(f"{block.name}_rf", taken), tuple(f.extent for f in found.lanes) + (lane.extent,),
                      found.acc.dtype, scope)
    op = found.combiner

    def nest(step: int, body_of: _BodyOf, with_lane: bool, name: str) -> tuple[Stmt, list[str], str | None]:
        """One step: copies of the lane loops (fresh names after the first step) around
        ``body_of(lane variables, reduction variable)``, the guards inside the innermost."""
        lanes = [f.var if step == 0 else fresh_var(f.var.name, used) for f in found.lanes]
        mapping: dict[Var, Expr] = dict(zip((f.var for f in found.lanes), lanes))
        r = (lane.var if step == 0 else fresh_var(name, used)) if with_lane else None
        guard: Expr | None = None
        for g in found.guards:
            g = substitute(g, mapping)
            guard = g if guard is None else logical_and(guard, g)
        body = body_of(tuple(lanes), r, guard, mapping)
        if r is not None:
            body = For(r, lane.extent, body)
        for f, v in reversed(list(zip(found.lanes, lanes))):
            body = For(v, f.extent, body, f.kind, f.thread_axis, f.annotations)
        return body, [v.name for v in lanes], None if r is None else r.name

    def fold(lanes: tuple[Var, ...], r: Var | None, guard: Expr | None, _: dict[Var, Expr]) -> Stmt:
        zero = (const(0, "int64"),)
        assert r is not None
        body: Stmt = Allocate(found.acc, seq(Store(found.acc, zero, identity(op, found.acc.dtype)), lane.body,
                                             Store(partials, (*lanes, r), Load(found.acc, zero, found.acc.dtype))))
        return body if guard is None else IfThenElse(guard, body)

    def halve(stride: int) -> _BodyOf:
        def step(lanes: tuple[Var, ...], r: Var | None, guard: Expr | None, _: dict[Var, Expr]) -> Stmt:
            assert r is not None
            cond: Expr = lt(r, stride)
            if stride * 2 > lane.extent:  # the extent is not a power of two: the upper half is short
                cond = logical_and(cond, lt(r + stride, lane.extent))
            if guard is not None:
                cond = logical_and(guard, cond)
            here, there = partials[(*lanes, r)], partials[(*lanes, r + stride)]
            return IfThenElse(cond, Store(partials, (*lanes, r), binary(op, here, there)))
        return step

    def finish(lanes: tuple[Var, ...], _r: Var | None, guard: Expr | None, mapping: dict[Var, Expr]) -> Stmt:
        total: Expr = partials[(*lanes, const(0, "int64"))]
        if found.init != identity(op, found.acc.dtype):
            total = binary(op, substitute(found.init, mapping), total)

        def read(e: Expr) -> Expr | None:
            return total if isinstance(e, Load) and e.buffer == found.acc else None

        body = map_stmt(substitute_stmt(seq(*found.epilogue), mapping), expr_fn=read)
        return body if guard is None else IfThenElse(guard, body)

    steps: list[Stmt] = []
    lanes_seen: list[list[str]] = [[] for _ in found.lanes]
    reduction: list[str] = []
    strides = [1 << k for k in reversed(range(math.ceil(math.log2(lane.extent))))] if lane.extent > 1 else []
    plan: list[tuple[_BodyOf, bool]] = [(fold, True)] + [(halve(s), True) for s in strides] + [(finish, False)]
    for k, (body_of, with_lane) in enumerate(plan):
        stmt, lane_names, r_name = nest(k, body_of, with_lane, lane.var.name)
        steps.append(stmt)
        for seen, name in zip(lanes_seen, lane_names):
            seen.append(name)
        if r_name is not None:
            reduction.append(r_name)
    new_at = Allocate(partials, seq(*steps))
    body = replace_at(root, at_path + (0,), new_at)
    return body, RFactored(tuple(tuple(s) for s in lanes_seen), tuple(reduction))

