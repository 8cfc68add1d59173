"""Loop-nest surgery behind the register-tiling primitives: tile_accumulator and pack.

A lowered reduction keeps one scalar accumulator per output element
(``alloc acc(1); acc = init; for r: acc += ...; Y[...] = epilogue(acc)``), with the
reduction loop innermost. A fast CPU or GPU kernel instead holds a whole tile of
outputs in registers and runs the reduction around the tile (the micro-kernel of
BLIS and TVM), reading the second operand from a packed copy whose tile-wide rows
are contiguous. :func:`tile_accumulator` and :func:`pack` make those two changes;
:class:`~hetero.core.schedule.schedule.Schedule` documents them with before/after
loop nests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import (
    Compare, Const, Expr, Load, Logical, Var, as_expr, const, lt, minimum, select,
)
from hetero.core.ir.tir.stmt import (
    Allocate, Block, BlockIter, For, ForKind, IfThenElse, IterKind, PrimFunc, Seq, Stmt, Store, seq,
)
from hetero.core.ir.tir.visit import ExprFn, exprs_of, map_expr, map_stmt, substitute_stmt
from hetero.core.schedule.region import affine
from hetero.core.schedule.stages import _all_names, _exprs_of_stmt, _loads
from hetero.core.schedule.tree import (
    Path, enclosing_loops, fresh_var, node_at, paths, replace_at, stores, unique_name,
)
from hetero.errors import ScheduleError


def _nest(loops: Sequence[For], body: Stmt) -> Stmt:
    """``loops`` (outermost first) around ``body``, each keeping its kind and hints."""
    for f in reversed(loops):
        body = dataclasses.replace(f, body=body)
    return body


def _split_guard(cond: Expr, label: str) -> list[tuple[Expr, int]]:
    """The ``(index, extent)`` pairs of a split's guard ``index < extent and ...``."""
    if isinstance(cond, Logical) and cond.op == "and":
        return _split_guard(cond.a, label) + _split_guard(cond.b, label)
    if isinstance(cond, Compare) and cond.op == "lt" and isinstance(cond.b, Const):
        return [(cond.a, int(cond.b.value))]
    raise ScheduleError(f"{label}: the accumulator is guarded by a condition that is not a split's "
                        "bound check (index < extent); tile loops that a split made")


def tile_accumulator(func: PrimFunc, block_path: Path, loop_paths: Sequence[Path], used: set[str],
                     label: str) -> Stmt:
    """Give the block's scalar accumulator one element per iteration of the tile loops at
    ``loop_paths`` and move the reduction loops outside them."""
    root = func.body
    block = node_at(root, block_path)
    assert isinstance(block, Block)
    chain: list[tuple[Path, For]] = []
    path, inner = block_path + (0,), block.body
    while isinstance(inner, For):
        chain.append((path, inner))
        path, inner = path + (0,), inner.body
    t = len(loop_paths)
    if not t or [p for p, _ in chain[-t:]] != list(loop_paths) or t > len(chain):
        names = ", ".join(f.var.name for _, f in chain)
        raise ScheduleError(f"{label}: the tile loops must be the innermost loops of the block's nest "
                            f"({names}) directly around its accumulator, listed outermost first")
    tile = [f for _, f in chain[-t:]]
    for f in tile:
        if f.kind is not ForKind.SERIAL:
            raise ScheduleError(f"{label}: loop {f.var.name} is {f.kind.value}; tile the accumulator "
                                "before setting loop kinds")
    guard: Expr | None = None
    if isinstance(inner, IfThenElse) and inner.otherwise is None:
        guard, inner = inner.cond, inner.then
    if not (isinstance(inner, Allocate) and inner.buffer.scope == "local" and inner.buffer.shape == (1,)
            and isinstance(inner.body, Seq) and len(inner.body.stmts) == 3):
        raise ScheduleError(f"{label}: below the tile loops there must be one scalar local accumulator "
                            "(alloc acc(1): init; reduction loops; store), as lowering a single "
                            "reduction makes; this block holds something else")
    acc = inner.buffer
    init, update, final = inner.body.stmts
    reduction: list[For] = []
    while isinstance(update, For):
        reduction.append(update)
        update = update.body
    zero = (const(0, "int64"),)
    if not (isinstance(init, Store) and init.buffer == acc and isinstance(update, Store)
            and update.buffer == acc and update.indices == zero and reduction):
        raise ScheduleError(f"{label}: the accumulator {acc.name} must be set, then updated inside "
                            "reduction loops, then read by the block's store")
    written = {s.buffer for _, s in stores(final)}
    read = {e.buffer for s in (init, update) for e in exprs_of(s.value) if isinstance(e, Load)}
    if written & read:
        name = next(iter(written & read)).name
        raise ScheduleError(f"{label}: the reduction reads {name}, which the block's store writes; "
                            "moving the reduction outside the tile would read it before it is written")
    tiled = dataclasses.replace(acc, shape=tuple(f.extent for f in tile))
    here = tuple(f.var for f in tile)

    def to_tile(indices: tuple[Expr, ...]) -> ExprFn:
        def fn(e: Expr) -> Expr | None:
            return Load(tiled, indices, e.dtype) if isinstance(e, Load) and e.buffer == acc else None
        return fn

    # Where a split overshoots, the extra lanes still compute (the guard keeps only the
    # store): clamping their indices keeps every read inside its buffer.
    clamps = {e: minimum(e, n - 1) for e, n in (_split_guard(guard, label) if guard is not None else [])}
    value = map_expr(update.value, to_tile(here))
    value = map_expr(value, lambda e: clamps.get(e))
    body_update = _nest(reduction, _nest(tile, Store(tiled, here, value)))

    def copy(suffix: str, stmt: Stmt) -> Stmt:
        fresh = [fresh_var(f"{f.var.name}_{suffix}", used) for f in tile]
        renamed = substitute_stmt(map_stmt(stmt, expr_fn=to_tile(here)), dict(zip(here, fresh)))
        return _nest([dataclasses.replace(f, var=v) for f, v in zip(tile, fresh)], renamed)

    body_init = copy("init", Store(tiled, here, init.value))
    body_store = copy("store", final if guard is None else IfThenElse(guard, final))
    new = Allocate(tiled, seq(body_init, body_update, body_store))
    return replace_at(root, loop_paths[0], new)


def _split_index(index: Expr, extents: dict[Var, int], factor: int) -> tuple[Expr, Var] | None:
    """``index`` as ``factor * outer + v`` with ``v`` a loop of extent ``factor``, or None."""
    form = affine(index)
    if form is None:
        return None
    terms, c = form
    inner = [v for v, k in terms.items() if k == 1 and extents.get(v) == factor]
    if len(inner) != 1 or c % factor or any(k % factor for v, k in terms.items() if v is not inner[0]):
        return None
    outer: Expr = as_expr(c // factor)
    for v, k in terms.items():
        if v is not inner[0]:
            outer = outer + v * (k // factor)
    return outer, inner[0]


def pack(func: PrimFunc, block_path: Path, buffer_name: str, axis: int, factor: int) -> tuple[Stmt, str]:
    """Copy ``buffer_name`` into panels of ``factor`` along ``axis`` read by the block at
    ``block_path``; return the body and the packed buffer's (and copy block's) name."""
    root = func.body
    block = node_at(root, block_path)
    assert isinstance(block, Block)
    label = f"pack of {buffer_name} for block {block.name}"
    outer_loops = enclosing_loops(root, block_path)
    if outer_loops:
        raise ScheduleError(f"{label}: the block sits inside loop {outer_loops[-1][1].var.name}, so the "
                            "copy would be repeated; pack before compute_at")
    found = [(p, e) for p, e in _loads(block, _buffer_named(block, buffer_name, label))]
    old = found[0][1].buffer
    if not 0 <= axis < len(old.shape):
        raise ScheduleError(f"{label}: axis {axis} is not one of {old.name}'s {len(old.shape)} axes")
    if factor < 1:
        raise ScheduleError(f"{label}: the panel width must be a positive integer, got {factor}")
    if any(s.buffer == old for _, s in stores(block)):
        raise ScheduleError(f"{label}: the block also writes {old.name}; a packed copy would go stale")
    extents = {s.var: s.extent for _, s in paths(block) if isinstance(s, For)}
    mapping: dict[Load, Load] = {}
    dim = old.shape[axis]
    panels = -(-dim // factor)
    new = Buffer(unique_name(f"{old.name}_packed", _all_names(func)),
                 (panels,) + old.shape[:axis] + old.shape[axis + 1:] + (factor,), old.dtype, "global")
    for _, load in found:
        split = _split_index(load.indices[axis], extents, factor)
        if split is None:
            raise ScheduleError(f"{label}: every read must index axis {axis} as {factor} * outer + v, with v "
                                f"a loop of extent {factor} (split that loop by {factor} first)")
        outer, inner = split
        rest = load.indices[:axis] + load.indices[axis + 1:]
        mapping[load] = Load(new, (outer,) + rest + (inner,), load.dtype)
    redirected = map_stmt(block, expr_fn=lambda e: mapping.get(e) if isinstance(e, Load) else None)
    used = {f.var.name for _, f in paths(block) if isinstance(f, For)}
    axes = [fresh_var(f"ax{d}", used) for d in range(len(new.shape))]
    source = axes[0] * factor + axes[-1]
    index = list(axes[1:-1])
    index.insert(axis, source if dim % factor == 0 else minimum(source, dim - 1))
    value: Expr = old[tuple(index)]
    if dim % factor:
        value = select(lt(source, dim), value, const(0, old.dtype))
    copy: Stmt = Store(new, tuple(axes), value)
    for var, extent in reversed(list(zip(axes, new.shape))):
        copy = For(var, extent, copy)
    iters = tuple(BlockIter(v, n, IterKind.SPATIAL) for v, n in zip(axes, new.shape))
    staged = Allocate(new, seq(Block(new.name, copy, new, iters), redirected))
    return replace_at(root, block_path, staged), new.name


def _buffer_named(block: Block, name: str, label: str) -> Buffer:
    for _, s in paths(block):
        for e in _exprs_of_stmt(s):
            if isinstance(e, Load) and e.buffer.name == name:
                return e.buffer
    raise ScheduleError(f"{label}: the block does not read {name}")

