"""Block-level surgery behind the stage primitives: cache_read, cache_write, compute_at,
compute_inline.

Each function takes the function, the path of the block to change, checks the
primitive's preconditions (raising ScheduleError naming the block) and returns the
new body. Buffers keep their full shape: a stage computed at a loop fills only the
region that loop needs, but shrinking its buffer to that region is a later pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from hetero.core.ir.tir.buffer import SCOPES, Buffer
from hetero.core.ir.tir.expr import Expr, Load, Var, ge, logical_and, lt
from hetero.core.ir.tir.stmt import (
    Allocate,
    Block,
    BlockIter,
    For,
    IfThenElse,
    IterKind,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    seq,
)
from hetero.core.ir.tir.visit import exprs_of, map_stmt, substitute, substitute_stmt
from hetero.core.schedule.region import read_region
from hetero.core.schedule.tree import (
    Path,
    block_names,
    enclosing_loops,
    fresh_var,
    node_at,
    paths,
    remove_at,
    replace_at,
    stores,
    unique_name,
)
from hetero.errors import ScheduleError, did_you_mean


def _exprs_of_stmt(s: Stmt) -> Iterator[Expr]:
    """The expressions a statement itself holds (not those of statements under it)."""
    if isinstance(s, Store):
        for e in (*s.indices, s.value):
            yield from exprs_of(e)
    elif isinstance(s, IfThenElse):
        yield from exprs_of(s.cond)


def _loads(root: Stmt, buffer: Buffer) -> Iterator[tuple[Path, Load]]:
    """Every read of ``buffer`` under ``root``, with the path of the statement holding it."""
    for path, s in paths(root):
        for e in _exprs_of_stmt(s):
            if isinstance(e, Load) and e.buffer == buffer:
                yield path, e


def _redirect(stmt: Stmt, old: Buffer, new: Buffer, writes: bool) -> Stmt:
    """``stmt`` reading (and, if ``writes``, writing) ``new`` where it used ``old``."""

    def load(e: Expr) -> Expr | None:
        return Load(new, e.indices, e.dtype) if isinstance(e, Load) and e.buffer == old else None

    def store(s: Stmt) -> Stmt | None:
        return dataclasses.replace(s, buffer=new) if writes and isinstance(s, Store) and s.buffer == old else None

    return map_stmt(stmt, store, load)


def _copy_block(name: str, src: Buffer, dst: Buffer, used: set[str]) -> Block:
    """A block copying every element of ``src`` into ``dst``."""
    axes = [fresh_var(f"ax{d}", used) for d in range(len(src.shape))]
    body: Stmt = Store(dst, tuple(axes), src[tuple(axes)])
    for var, extent in reversed(list(zip(axes, src.shape))):
        body = For(var, extent, body)
    return Block(name, body, dst, tuple(BlockIter(v, n, IterKind.SPATIAL) for v, n in zip(axes, src.shape)))


def _all_names(func: PrimFunc) -> set[str]:
    """Names of every buffer and block of ``func``: a new stage's name must be none of them."""
    allocated = {s.buffer.name for _, s in paths(func.body) if isinstance(s, Allocate)}
    return {b.name for b in func.params} | allocated | set(block_names(func.body))


def _check_scope(label: str, buffer: Buffer, scope: str) -> None:
    if scope not in SCOPES:
        raise ScheduleError(f"{label}: unknown memory scope {scope!r}{did_you_mean(scope, SCOPES)}; "
                            f"scopes are {', '.join(SCOPES)}")
    if scope == buffer.scope:
        raise ScheduleError(f"{label}: buffer {buffer.name} is already in {scope} scope")


def cache_read(func: PrimFunc, path: Path, buffer_name: str, scope: str) -> tuple[Stmt, str]:
    """Stage ``buffer_name`` through a copy in ``scope`` read by the block at ``path``."""
    block = node_at(func.body, path)
    assert isinstance(block, Block)
    label = f"cache_read of {buffer_name} for block {block.name}"
    read = {e.buffer.name: e.buffer for _, s in paths(block) for e in _exprs_of_stmt(s) if isinstance(e, Load)}
    if buffer_name not in read:
        raise ScheduleError(f"{label}: the block does not read {buffer_name}{did_you_mean(buffer_name, read)}")
    old = read[buffer_name]
    _check_scope(label, old, scope)
    if any(s.buffer == old for _, s in stores(block)):
        raise ScheduleError(f"{label}: the block also writes {buffer_name}; a read cache would go stale")
    new = Buffer(unique_name(f"{old.name}_{scope}", _all_names(func)), old.shape, old.dtype, scope)
    used = {f.var.name for _, f in enclosing_loops(func.body, path)}
    staged = Allocate(new, seq(_copy_block(new.name, old, new, used), _redirect(block, old, new, writes=False)))
    return replace_at(func.body, path, staged), new.name


def cache_write(func: PrimFunc, path: Path, scope: str) -> tuple[Stmt, str]:
    """Make the block at ``path`` write a buffer in ``scope``, copied out after it."""
    block = node_at(func.body, path)
    assert isinstance(block, Block)
    label = f"cache_write of block {block.name}"
    outer = enclosing_loops(func.body, path)
    if outer:
        raise ScheduleError(f"{label}: the block sits inside loop {outer[-1][1].var.name}, where it may fill "
                            "only part of its buffer; cache_write before compute_at")
    old = block.writes
    _check_scope(label, old, scope)
    new = Buffer(unique_name(f"{old.name}_{scope}", _all_names(func)), old.shape, old.dtype, scope)
    inner = dataclasses.replace(_redirect(block, old, new, writes=True), writes=new)
    staged = Allocate(new, seq(inner, _copy_block(new.name, new, old, set())))
    return replace_at(func.body, path, staged), new.name


def _spatial_nest(block: Block, label: str) -> tuple[list[For], Stmt]:
    """The block's loops over its buffer's dimensions (in order) and the statement inside them."""
    shape = block.writes.shape
    loops: list[For] = []
    body = block.body
    while len(loops) < len(shape) and isinstance(body, For) and body.extent == shape[len(loops)]:
        loops.append(body)
        body = body.body
    axes = tuple(f.var for f in loops)
    if len(loops) < len(shape) or any(s.indices != axes for _, s in stores(body) if s.buffer == block.writes):
        raise ScheduleError(f"{label}: the block's loops must still be one loop per dimension of "
                            f"{block.writes.name} {list(shape)}, storing at exactly those indices; "
                            "apply this primitive before splitting or reordering its loops")
    return loops, body


def _rename_clashes(stmt: Stmt, used: set[str]) -> Stmt:
    """``stmt`` with each loop whose variable name is in ``used`` given a fresh name."""
    renames = {s.var: fresh_var(s.var.name, used) for _, s in paths(stmt)
               if isinstance(s, For) and s.var.name in used}
    stmt = substitute_stmt(stmt, renames)
    return map_stmt(stmt, lambda s: dataclasses.replace(s, var=renames[s.var])
                    if isinstance(s, For) and s.var in renames else None)


def compute_at(func: PrimFunc, block_path: Path, loop_path: Path, loop_label: str) -> Stmt:
    """Move the block at ``block_path`` to the start of the loop at ``loop_path``,
    computing only the region of its buffer that the loop's iterations read."""
    root = func.body
    block = node_at(root, block_path)
    assert isinstance(block, Block)
    label = f"compute_at of block {block.name} under {loop_label}"
    produced = block.writes
    if produced in func.params:
        raise ScheduleError(f"{label}: the block writes parameter {produced.name}, which must be filled whole")
    parent = block_path[:-1]
    if not (block_path and isinstance(node_at(root, parent), Seq) and loop_path[:len(parent)] == parent
            and len(loop_path) > len(parent) and loop_path[len(parent)] > block_path[-1]):
        raise ScheduleError(f"{label}: the block must come before the loop in one sequence of statements")
    loops, inner = _spatial_nest(block, label)
    if any(s.buffer == produced for p, s in stores(root) if p[:len(block_path)] != block_path):
        raise ScheduleError(f"{label}: another block also writes {produced.name}")
    reads = list(_loads(root, produced))
    if not reads:
        raise ScheduleError(f"{label}: nothing under the loop reads {produced.name}")
    if any(p[:len(loop_path)] != loop_path for p, _ in reads):
        raise ScheduleError(f"{label}: {produced.name} is also read outside the loop, which needs all of it")
    loop = node_at(root, loop_path)
    assert isinstance(loop, For)
    outer = [(f.var, f.extent) for _, f in enclosing_loops(root, loop_path)] + [(loop.var, loop.extent)]
    inner_loops = {s.var: s.extent for _, s in paths(loop.body) if isinstance(s, For)}
    region = read_region([e.indices for _, e in reads], produced.shape, outer, inner_loops)
    if isinstance(region, str):
        raise ScheduleError(f"{label}: {region}; compute_at supports reads at the loop's index plus a constant "
                            "or an affine offset (i_0 * 4 + i_1 + r)")
    used = {v.name for v, _ in outer}
    mapping: dict[Var, Expr] = {}
    conds: list[Expr] = []
    kept: list[For] = []
    for f, rng, dim in zip(loops, region, produced.shape):
        if rng.extent == 1:
            mapping[f.var] = rng.start
            index = rng.start
        else:
            var = fresh_var(f.var.name, used)
            kept.append(dataclasses.replace(f, var=var, extent=rng.extent))
            mapping[f.var] = index = rng.start + var
        if rng.may_underflow:
            conds.append(ge(index, 0))
        if rng.may_overflow:
            conds.append(lt(index, dim))
    body = _rename_clashes(substitute_stmt(inner, mapping), used)
    if conds:
        cond = conds[0]
        for c in conds[1:]:
            cond = logical_and(cond, c)
        body = IfThenElse(cond, body)
    for f in reversed(kept):
        body = dataclasses.replace(f, body=body)
    moved = dataclasses.replace(block, body=body)
    root = replace_at(root, loop_path, dataclasses.replace(loop, body=seq(moved, loop.body)))
    return remove_at(root, block_path)


def compute_inline(func: PrimFunc, path: Path) -> Stmt:
    """Substitute the block at ``path`` into every read of its buffer and drop it."""
    root = func.body
    block = node_at(root, path)
    assert isinstance(block, Block)
    label = f"compute_inline of block {block.name}"
    produced = block.writes
    if produced in func.params:
        raise ScheduleError(f"{label}: the block writes parameter {produced.name}, which must stay in memory")
    loops, inner = _spatial_nest(block, label)
    if not isinstance(inner, Store):
        raise ScheduleError(f"{label}: the block must be a single store inside its loops "
                            f"(it holds a {type(inner).__name__}, e.g. a reduction)")
    value, axes = inner.value, [f.var for f in loops]
    if any(isinstance(e, Load) and e.buffer == produced for e in exprs_of(value)):
        raise ScheduleError(f"{label}: the block reads its own buffer {produced.name}")
    if any(s.buffer == produced for p, s in stores(root) if p[:len(path)] != path):
        raise ScheduleError(f"{label}: another block also writes {produced.name}")
    sources = {e.buffer for e in exprs_of(value) if isinstance(e, Load)}
    later = [s.buffer.name for p, s in stores(root) if p > path and p[:len(path)] != path and s.buffer in sources]
    if later:
        raise ScheduleError(f"{label}: {later[0]}, which it reads, is written again after it, so the "
                            "inlined value would change")
    if not path or not isinstance(node_at(root, path[:-1]), Seq) or not any(_loads(root, produced)):
        raise ScheduleError(f"{label}: no block reads {produced.name}; there is nothing to inline into")

    def inline(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer == produced:
            return substitute(value, dict(zip(axes, e.indices)))
        return None

    root = remove_at(map_stmt(root, expr_fn=inline), path)
    for p, s in paths(root):
        if isinstance(s, Allocate) and s.buffer == produced:
            return replace_at(root, p, s.body)
    return root
