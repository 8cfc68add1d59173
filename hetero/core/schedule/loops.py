"""Loop-nest surgery behind the loop primitives: split, reorder, fuse, loop kinds,
pipelining and annotations.

Each function takes the function body and the path of the loop(s) to change, checks
the primitive's preconditions (raising ScheduleError with the caller's ``label`` for
the loop), and returns the new body. :class:`~hetero.core.schedule.schedule.Schedule`
documents the behaviour with before/after loop nests.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from typing import Any

from hetero.core.ir.tir import registry
from hetero.core.ir.tir.expr import Expr, Var, as_expr, logical_and, lt
from hetero.core.ir.tir.stmt import Allocate, For, ForKind, IfThenElse, Stmt, annotate
from hetero.core.ir.tir.visit import exprs_of, substitute_stmt
from hetero.core.schedule.tree import (
    Path,
    buffers_allocated,
    enclosing_loops,
    fresh_var,
    node_at,
    paths,
    replace_at,
    stores,
)
from hetero.errors import ScheduleError, VerificationError


def resolve_factors(extent: int, factors: Sequence[int | None], label: str) -> list[int]:
    """``factors`` with the one ``None`` (if any) inferred so that they cover ``extent``."""
    if not factors:
        raise ScheduleError(f"cannot split {label}: give at least one factor")
    bad = [f for f in factors if f is not None and (isinstance(f, bool) or not isinstance(f, int) or f < 1)]
    if bad:
        raise ScheduleError(f"cannot split {label}: factors must be positive integers or None, got {bad}")
    if sum(f is None for f in factors) > 1:
        raise ScheduleError(f"cannot split {label}: at most one factor may be None (inferred)")
    known = math.prod(f for f in factors if f is not None)
    resolved = [f if f is not None else -(-extent // known) for f in factors]
    if math.prod(resolved) < extent:
        raise ScheduleError(f"cannot split {label} of extent {extent}: factors {list(factors)} multiply "
                            f"to {math.prod(resolved)}, fewer than the loop's iterations; make one None")
    return resolved


def _guard(body: Stmt, cond: Expr) -> Stmt:
    """``body`` run only where ``cond`` holds, the test pushed below perfectly nested loops.

    Pushing it down keeps the loops above perfectly nested, so they can still be
    reordered and fused; ``cond`` reads only outer variables, so the meaning holds.
    """
    if isinstance(body, For):
        return dataclasses.replace(body, body=_guard(body.body, cond))
    if isinstance(body, IfThenElse) and body.otherwise is None:
        return IfThenElse(logical_and(body.cond, cond), body.then)
    return IfThenElse(cond, body)


def split_loop(root: Stmt, path: Path, factors: Sequence[int | None], used: set[str],
               label: str) -> tuple[Stmt, list[str]]:
    """Split the loop at ``path`` into one loop per factor; return the body and their names."""
    loop = node_at(root, path)
    assert isinstance(loop, For)
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(f"cannot split {label}: it is already {loop.kind.value}; split loops before "
                            "setting their kind")
    resolved = resolve_factors(loop.extent, factors, label)
    new_vars = [fresh_var(f"{loop.var.name}_{k}", used) for k in range(len(resolved))]
    index: Expr = as_expr(0)
    for var, factor in zip(new_vars, resolved):
        index = index * factor + var
    body = substitute_stmt(loop.body, {loop.var: index})
    if math.prod(resolved) > loop.extent:
        body = _guard(body, lt(index, loop.extent))
    for var, factor in reversed(list(zip(new_vars, resolved))):
        body = For(var, factor, body)
    return replace_at(root, path, body), [v.name for v in new_vars]


def reorder_loops(root: Stmt, loop_paths: Sequence[Path], labels: Sequence[str]) -> Stmt:
    """Permute loops of one perfect nest into the order given; other loops stay put."""
    if len(set(loop_paths)) != len(loop_paths):
        raise ScheduleError(f"cannot reorder {', '.join(labels)}: a loop is named twice")
    outer = min(loop_paths, key=len)
    wanted = set(loop_paths)
    chain: list[tuple[Path, For]] = []
    path, loop = outer, node_at(root, outer)
    while True:
        assert isinstance(loop, For)
        chain.append((path, loop))
        if wanted <= {p for p, _ in chain}:
            break
        if not isinstance(loop.body, For):
            raise ScheduleError(f"cannot reorder {', '.join(labels)}: they are not one perfect nest "
                                f"(below loop {loop.var.name} comes a {type(loop.body).__name__}, not a loop)")
        path, loop = path + (0,), loop.body
    slots = [k for k, (p, _) in enumerate(chain) if p in wanted]
    fors = [f for _, f in chain]
    for slot, p in zip(slots, loop_paths):
        fors[slot] = node_at(root, p)  # type: ignore[assignment]
    body = chain[-1][1].body
    for f in reversed(fors):
        body = dataclasses.replace(f, body=body)
    return replace_at(root, outer, body)


def fuse_loops(root: Stmt, loop_paths: Sequence[Path], used: set[str],
               labels: Sequence[str]) -> tuple[Stmt, str]:
    """Fuse perfectly nested loops (outermost first) into one; return the body and its name."""
    if len(loop_paths) < 2:
        raise ScheduleError(f"cannot fuse {', '.join(labels)}: give two or more loops")
    for (p, q), label in zip(itertools.pairwise(loop_paths), labels[1:]):
        if q != p + (0,):
            raise ScheduleError(f"cannot fuse {', '.join(labels)}: {label} is not the only statement "
                                "directly inside the loop before it (list perfectly nested loops, outermost first)")
    loops = [node_at(root, p) for p in loop_paths]
    for loop, label in zip(loops, labels):
        assert isinstance(loop, For)
        if loop.kind is not ForKind.SERIAL:
            raise ScheduleError(f"cannot fuse {label}: it is {loop.kind.value}; fuse loops before setting their kind")
    fused = fresh_var("_".join(f.var.name for f in loops) + "_fused", used)  # type: ignore[attr-defined]
    extents = [f.extent for f in loops]  # type: ignore[attr-defined]
    mapping: dict[Var, Expr] = {}
    for k, loop in enumerate(loops):
        index = fused // math.prod(extents[k + 1:])
        mapping[loop.var] = index % extents[k] if k else index  # type: ignore[attr-defined]
    body = substitute_stmt(loops[-1].body, mapping)  # type: ignore[attr-defined]
    return replace_at(root, loop_paths[0], For(fused, math.prod(extents), body)), fused.name


def _check_independent(loop: For, kind: ForKind, label: str) -> None:
    """Iterations of ``loop`` must write different elements of every buffer that outlives one."""
    private = buffers_allocated(loop.body)
    for _, store in stores(loop.body):
        if store.buffer.name in private:
            continue
        if not any(e == loop.var for i in store.indices for e in exprs_of(i)):
            raise ScheduleError(
                f"cannot make {label} {kind.value}: the store to {store.buffer.name} does not index by "
                f"{loop.var.name}, so its iterations would write the same element (a reduction or a shared "
                "temporary); choose a loop whose variable every store uses")


def set_loop_kind(root: Stmt, path: Path, kind: ForKind, label: str, thread_axis: str | None = None) -> Stmt:
    """Give the loop at ``path`` a kind, checking that its iterations may run that way."""
    loop = node_at(root, path)
    assert isinstance(loop, For)
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(f"cannot make {label} {kind.value}: it is already {loop.kind.value}")
    if kind is ForKind.VECTORIZED:
        inner = [s.var.name for _, s in paths(loop.body) if isinstance(s, For)]
        if inner:
            raise ScheduleError(f"cannot vectorize {label}: it contains loop {inner[0]}; vectorize an "
                                "innermost loop (split it off first)")
    if kind is ForKind.THREAD_BINDING:
        if thread_axis is None or thread_axis not in registry.THREAD_AXES:
            raise ScheduleError(f"cannot bind {label} to {thread_axis!r}: "
                                f"{registry.unknown_thread_axis(str(thread_axis))}")
        nest = [f for _, f in enclosing_loops(root, path)] + [s for _, s in paths(loop.body) if isinstance(s, For)]
        taken = [f.var.name for f in nest if f.thread_axis == thread_axis]
        if taken:
            raise ScheduleError(f"cannot bind {label} to {thread_axis}: loop {taken[0]} in the same nest "
                                "is already bound to it")
    if kind in (ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.THREAD_BINDING):
        _check_independent(loop, kind, label)
    return replace_at(root, path, dataclasses.replace(loop, kind=kind, thread_axis=thread_axis))


def check_annotation(key: str, value: Any, on: str, label: str) -> None:
    """Raise ScheduleError unless ``key`` is a registered annotation for ``on`` and
    ``value`` passes its check."""
    try:
        entry = registry.annotation_key(key, on)
    except VerificationError as exc:
        raise ScheduleError(f"cannot annotate {label}: {exc}") from None
    problem = entry.check(value)
    if problem is not None:
        raise ScheduleError(f"cannot annotate {label} with {key}: it {problem}")


def annotate_loop(root: Stmt, path: Path, key: str, value: Any, label: str) -> Stmt:
    """Set the annotation ``key`` of the loop at ``path`` to ``value``."""
    loop = node_at(root, path)
    assert isinstance(loop, For)
    check_annotation(key, value, "loop", label)
    if key == "ii" and loop.kind is not ForKind.PIPELINED:
        raise ScheduleError(f"cannot annotate {label} with an initiation interval: it is {loop.kind.value}, "
                            "not pipelined (use pipeline(loop, ii=...))")
    return replace_at(root, path, annotate(loop, key, value))


def annotate_allocation(root: Stmt, path: Path, key: str, value: Any, label: str) -> Stmt:
    """Set the annotation ``key`` of the allocation at ``path`` to ``value``."""
    alloc = node_at(root, path)
    assert isinstance(alloc, Allocate)
    check_annotation(key, value, "buffer", label)
    if key == "partition":
        for part in value:
            problem = part.problem(alloc.buffer)
            if problem is not None:
                raise ScheduleError(f"cannot partition {label}: {problem}")
    return replace_at(root, path, annotate(alloc, key, value))


def pipeline_loop(root: Stmt, path: Path, ii: int, label: str) -> Stmt:
    """Make the serial loop at ``path`` pipelined with initiation interval ``ii``."""
    loop = node_at(root, path)
    assert isinstance(loop, For)
    if loop.kind is not ForKind.SERIAL:
        raise ScheduleError(f"cannot pipeline {label}: it is already {loop.kind.value}")
    check_annotation("ii", ii, "loop", label)
    return replace_at(root, path, annotate(dataclasses.replace(loop, kind=ForKind.PIPELINED), "ii", ii))
