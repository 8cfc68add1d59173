"""Block-level surgery behind the stage primitives: cache_read, cache_operand, cache_write,
compute_at, compute_inline, and the binding of a shared stage's loop to its block's threads.

Each function takes the function, the path of the block to change, checks the
primitive's preconditions (raising ScheduleError naming the block) and returns the
new body. Buffers keep their full shape: a stage computed at a loop fills only the
region that loop needs, but shrinking its buffer to that region is a later pass.

The exception is a stage shared by a block's threads (TVM's rule for a buffer whose
scope spans them): a ``shared`` buffer computed at a loop inside ``threadIdx.*`` loops
is filled for every thread of the block, so its region is relaxed over those thread
loops (they count as inner loops, not fixed ones); the buffer then shrinks to that
region, its allocation moves just outside the outermost relaxed thread loop (where a
GPU block's shared memory lives), and the attach loop's body becomes ``copy; barrier;
body; barrier``, the first barrier so that every thread sees the whole copy, the
second so that no thread overwrites it for the next iteration while another still
reads it. The copy's loops are then spread over those threads by
:func:`bind_to_enclosing_axis`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from hetero.core.ir.tir.buffer import SCOPES, Buffer
from hetero.core.ir.tir.expr import Binary, Const, Expr, Load, Var, as_expr, const, ge, logical_and, lt
from hetero.core.ir.tir.stmt import (
    Allocate,
    Barrier,
    Block,
    BlockIter,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    seq,
)
from hetero.core.ir.tir.visit import exprs_of, map_stmt, substitute, substitute_stmt
from hetero.core.schedule.region import Range, affine, read_region
from hetero.core.schedule.tree import (
    Path,
    block_names,
    buffers_allocated,
    enclosing_loops,
    fresh_var,
    loop_var_names,
    node_at,
    owner_block,
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


def _reads(e: Expr) -> set[Buffer]:
    return {x.buffer for x in exprs_of(e) if isinstance(x, Load)}


def cache_operand(func: PrimFunc, path: Path, buffer_name: str, loop_paths: list[Path],
                  scope: str) -> tuple[Stmt, str]:
    """Compute the operand of the block at ``path`` that reads ``buffer_name`` into a new
    buffer in ``scope`` indexed by the loops at ``loop_paths``, before the block."""
    root = func.body
    block = node_at(root, path)
    assert isinstance(block, Block)
    label = f"cache_operand of {buffer_name} for block {block.name}"
    values = [s.value for _, s in stores(block)]
    read = {b.name: b for v in values for b in _reads(v)}
    if buffer_name not in read:
        raise ScheduleError(f"{label}: the block does not read {buffer_name}{did_you_mean(buffer_name, read)}")
    source = read[buffer_name]
    if scope not in SCOPES:
        raise ScheduleError(f"{label}: unknown memory scope {scope!r}{did_you_mean(scope, SCOPES)}; "
                            f"scopes are {', '.join(SCOPES)}")
    if enclosing_loops(root, path):
        raise ScheduleError(f"{label}: the block sits inside a loop; cache an operand before compute_at")
    if any(s.buffer == source for _, s in stores(block)):
        raise ScheduleError(f"{label}: the block also writes {buffer_name}; a copy of its operand would go stale")
    largest = _largest_operands(values, source)
    if len(largest) > 1:
        # An epilogue may read the buffer too (a residual add of the block's own input):
        # the operand of the block's update (a store that reads what it writes) is meant.
        updates = [st.value for _, st in stores(block) if st.buffer in _reads(st.value)]
        in_updates = _largest_operands(updates, source)
        largest = in_updates if len(in_updates) == 1 else largest
    if len(largest) != 1:
        raise ScheduleError(f"{label}: the block reads {buffer_name} in {len(largest)} different operands; "
                            "one operand (the largest expression reading only that buffer) can be cached")
    [operand] = largest
    loops = [node_at(root, p) for p in loop_paths]
    assert all(isinstance(f, For) for f in loops)
    names = [f.var.name for f in loops]  # type: ignore[attr-defined]
    if len(set(names)) != len(names):
        raise ScheduleError(f"{label}: a loop is named twice")
    free = {e for e in exprs_of(operand) if isinstance(e, Var)}
    missing = sorted(v.name for v in free if v.name not in names)
    if missing:
        raise ScheduleError(f"{label}: its operand uses loop {missing[0]}; name every loop it uses "
                            f"(it uses {', '.join(sorted(v.name for v in free))})")
    shape = tuple(f.extent for f in loops)  # type: ignore[attr-defined]
    new = Buffer(unique_name(f"{source.name}_{scope}", _all_names(func)), shape, operand.dtype, scope)
    used = {f.var.name for _, f in enclosing_loops(root, path)} | loop_var_names(block)
    axes = [fresh_var(f"ax{d}", used) for d in range(len(shape))]
    body: Stmt = Store(new, tuple(axes), substitute(operand, {f.var: a for f, a in zip(loops, axes)}))  # type: ignore[attr-defined]
    for var, extent in reversed(list(zip(axes, shape))):
        body = For(var, extent, body)
    copy = Block(new.name, body, new, tuple(BlockIter(v, n, IterKind.SPATIAL) for v, n in zip(axes, shape)))
    at = Load(new, tuple(f.var for f in loops), operand.dtype)  # type: ignore[attr-defined]
    consumer = map_stmt(block, expr_fn=lambda e: at if e == operand else None)
    return replace_at(root, path, Allocate(new, seq(copy, consumer))), new.name


def _largest_operands(values: list[Expr], source: Buffer) -> set[Expr]:
    """The largest expressions of ``values`` that read ``source`` and nothing else."""
    found = {e for v in values for e in exprs_of(v) if _reads(e) == {source}}
    return {e for e in found if not any(e != c and e in set(exprs_of(c)) for c in found)}


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


#: The thread axes whose loops a buffer of each scope is shared across: a stage in that
#: scope computed inside such loops is computed for all their iterations together.
SHARED_ACROSS = {"shared": ("threadIdx.",)}


def _unclamped(index: Expr) -> tuple[Expr, int | None]:
    """``index`` without a clamp ``min(e, c)`` into a buffer (as tile_accumulator writes
    reads past a ragged split), and ``c``; or ``index`` and None."""
    if isinstance(index, Binary) and index.op == "min" and isinstance(index.b, Const) and index.b.dtype.kind in "iu":
        return index.a, int(index.b.value)
    return index, None


def _affine_expr(form: tuple[dict[Var, int], int], order: list[Var]) -> Expr:
    """The expression of an affine form, its variables in ``order``."""
    terms, c = form
    out: Expr = as_expr(c)
    for v in sorted(terms, key=order.index):
        out = out + (v if terms[v] == 1 else v * terms[v])
    return out


def _local_index(index: Expr, start: Expr, extent: int, order: list[Var]) -> Expr:
    """``index - start``, simplified where both are affine."""
    if extent == 1:
        return const(0, index.dtype)
    a, b = affine(index), affine(start)
    if a is None or b is None:
        return index - start
    terms = dict(a[0])
    for v, k in b[0].items():
        terms[v] = terms.get(v, 0) - k
    return _affine_expr(({v: k for v, k in terms.items() if k}, a[1] - b[1]), order)


def _check_clamps(reads: list[tuple[Expr, ...]], region: list[Range], outer: dict[Var, int], label: str) -> None:
    """A clamped read ``min(e, c)`` stays inside the region only if ``c`` is never below
    the region's start; raise ScheduleError where that is not proven."""
    for index in reads:
        for d, e in enumerate(index):
            _, clamp = _unclamped(e)
            if clamp is None:
                continue
            form = affine(region[d].start)
            assert form is not None
            highest = form[1] + sum(k * (outer[v] - 1) for v, k in form[0].items() if k > 0)
            if highest > clamp:
                raise ScheduleError(f"{label}: index {d} of a read is clamped to {clamp}, below the start "
                                    f"of the region ({highest} at most), so the clamped reads may leave it")


def compute_at(func: PrimFunc, block_path: Path, loop_path: Path, loop_label: str) -> Stmt:
    """Move the block at ``block_path`` to the start of the loop at ``loop_path``,
    computing only the region of its buffer that the loop's iterations read (relaxed
    over the thread loops its buffer's scope is shared across, see the module)."""
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
    around = enclosing_loops(root, loop_path)
    axes = SHARED_ACROSS.get(produced.scope, ())
    relaxed = [(p, f) for p, f in around if f.thread_axis is not None and f.thread_axis.startswith(axes)] \
        if axes else []
    relaxed_vars = {f.var for _, f in relaxed}
    outer = [(f.var, f.extent) for _, f in around if f.var not in relaxed_vars] + [(loop.var, loop.extent)]
    inner_loops = {s.var: s.extent for _, s in paths(loop.body) if isinstance(s, For)}
    inner_loops.update({f.var: f.extent for _, f in relaxed})
    indices = [tuple(_unclamped(i)[0] for i in e.indices) for _, e in reads]
    region = read_region(indices, produced.shape, outer, inner_loops)
    if isinstance(region, str):
        raise ScheduleError(f"{label}: {region}; compute_at supports reads at the loop's index plus a constant "
                            "or an affine offset (i_0 * 4 + i_1 + r)")
    _check_clamps([e.indices for _, e in reads], region, dict(outer), label)
    used = {f.var.name for _, f in around} | {loop.var.name}
    mapping: dict[Var, Expr] = {}
    conds: list[Expr] = []
    kept: list[For] = []
    local: list[Expr] = []
    for f, rng, dim in zip(loops, region, produced.shape):
        if rng.extent == 1:
            mapping[f.var] = rng.start
            index = rng.start
            local.append(const(0, f.var.dtype))
        else:
            var = fresh_var(f.var.name, used)
            kept.append(dataclasses.replace(f, var=var, extent=rng.extent))
            mapping[f.var] = index = rng.start + var
            local.append(var)
        if rng.may_underflow:
            conds.append(ge(index, 0))
        if rng.may_overflow:
            conds.append(lt(index, dim))
    inner = substitute_stmt(inner, mapping)
    target = produced
    if relaxed:
        target = Buffer(produced.name, tuple(r.extent for r in region), produced.dtype, produced.scope)
        inner = map_stmt(inner, lambda s: Store(target, tuple(local), s.value)
                         if isinstance(s, Store) and s.buffer == produced else None)
    body = _rename_clashes(inner, used)
    if conds:
        cond = conds[0]
        for c in conds[1:]:
            cond = logical_and(cond, c)
        body = IfThenElse(cond, body)
    for f in reversed(kept):
        body = dataclasses.replace(f, body=body)
    moved = dataclasses.replace(block, body=body, writes=target)
    if not relaxed:
        root = replace_at(root, loop_path, dataclasses.replace(loop, body=seq(moved, loop.body)))
        return remove_at(root, block_path)
    order = [v for v, _ in outer] + [f.var for _, f in relaxed] + list(inner_loops)
    starts = [r.start for r in region]

    def shrink(e: Expr) -> Expr | None:
        if not (isinstance(e, Load) and e.buffer == produced):
            return None
        return Load(target, tuple(_local_index(i, s, r.extent, order)
                                  for i, s, r in zip(e.indices, starts, region)), e.dtype)

    root = replace_at(root, loop_path, dataclasses.replace(
        loop, body=_shared_step(moved, map_stmt(loop.body, expr_fn=shrink))))
    root = remove_at(root, block_path)
    return _move_allocation(root, produced, target, relaxed[0][1].var, label)


def _is_shared_copy(s: Stmt) -> bool:
    return isinstance(s, Block) and s.writes.scope in SHARED_ACROSS


def _shared_step(copy: Block, body: Stmt) -> Stmt:
    """``copy; barrier; body; barrier``, or, where ``body`` already starts with shared
    copies and their barrier, ``copy`` joins them."""
    stmts = body.stmts if isinstance(body, Seq) else (body,)
    lead = 0
    while lead < len(stmts) and _is_shared_copy(stmts[lead]):
        lead += 1
    if lead and lead < len(stmts) and isinstance(stmts[lead], Barrier):
        return seq(copy, body)
    tail = () if isinstance(stmts[-1], Barrier) else (Barrier("shared"),)
    return seq(copy, Barrier("shared"), body, *tail)


def _move_allocation(root: Stmt, old: Buffer, new: Buffer, outermost: Var, label: str) -> Stmt:
    """``root`` with the allocation of ``old`` replaced by one of ``new`` just outside the loop of ``outermost``."""
    found = [(p, s) for p, s in paths(root) if isinstance(s, Allocate) and s.buffer == old]
    if len(found) != 1:
        raise ScheduleError(f"{label}: {old.name} must be allocated once in the function to shrink it to the "
                            f"region its block's threads share (found {len(found)} allocations)")
    path, alloc = found[0]
    root = replace_at(root, path, alloc.body)
    [loop_path] = [p for p, s in paths(root) if isinstance(s, For) and s.var == outermost]
    return replace_at(root, loop_path, dataclasses.replace(alloc, buffer=new, body=node_at(root, loop_path)))


def bind_to_enclosing_axis(root: Stmt, path: Path, axis_loop: For, label: str) -> Stmt:
    """The loop at ``path``, a loop of a shared stage computed inside ``axis_loop`` (a loop
    bound to the same thread axis with the same extent), run by those threads: its
    variable becomes ``axis_loop``'s and the loop goes."""
    loop = node_at(root, path)
    assert isinstance(loop, For)
    owner = owner_block(root, path)
    block = node_at(root, owner) if owner is not None else None
    if not (isinstance(block, Block) and block.writes.scope in SHARED_ACROSS and owner is not None
            and any(f.var == axis_loop.var for _, f in enclosing_loops(root, owner))):
        raise ScheduleError(f"{label}: loop {axis_loop.var.name} in the same nest is already bound to it; "
                            "only a loop of a stage in shared memory computed inside that loop may be bound to "
                            "it again (its threads then share the copy)")
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(f"{label}: it is already {loop.kind.value}")
    if loop.extent != axis_loop.extent:
        raise ScheduleError(f"{label}: its extent {loop.extent} differs from the {axis_loop.extent} threads of "
                            f"loop {axis_loop.var.name} on {axis_loop.thread_axis}; split it by that extent first")
    private = buffers_allocated(loop.body)
    if any(s.buffer.name not in private and not any(loop.var in set(exprs_of(i)) for i in s.indices)
           for _, s in stores(loop.body)):
        raise ScheduleError(f"{label}: a store under it does not index by {loop.var.name}, so its threads "
                            "would write the same element")
    return replace_at(root, path, substitute_stmt(loop.body, {loop.var: axis_loop.var}))


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
