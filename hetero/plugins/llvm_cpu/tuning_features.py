"""Task-independent features of a scheduled llvm_cpu kernel, for the tuner's cost model.

A candidate's knob values mean nothing outside its own task (factor 8 of one
convolution's loop is not factor 8 of a matmul's); what its schedule makes of the
hardware does: how many of a vector register's lanes the vectorized loop fills, how
many accumulators the register tile holds against the register file, how evenly the
parallel loop shares out over the threads, how long the innermost reduction runs
between loads and stores of the tile, and how many bytes one register tile and one
thread's share touch against L1 and L2. Those are read off the replayed function's loop
nest, so a model trained on records of one kernel ranks the candidates of another.

The *compute statement* is the store run most often (a convolution's multiply-add, not
its zero-fill, padding or weight packing): every loop-nest feature is read on the loops around it. A
loop carries a reduction when its variable comes from a reduction iterator of the
block (``c1_rc`` or the ``c1_rc_0``, ``c1_rc_1`` a split makes of it). A footprint is
the box of each buffer the compute statement reads, from interval bounds of its
indices over the loops inside (clamps and divisions included); an index the bounds do
not cover counts as its whole dimension, so the figure is rough, never more than the
buffer. Register-scoped buffers (the accumulators) are not memory traffic and do not count.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass

from hetero.plugin.schedule import REJECTIONS, Trace, TuningTask
from hetero.plugin.tir import (
    Allocate, Binary, Block, Buffer, Cast, Const, Expr, For, ForKind, IfThenElse, IterKind, Load, PrimFunc, Seq,
    Stmt, Store, Var,
)
from hetero.plugins.llvm_cpu import tuning
from hetero.plugins.llvm_cpu.host import HostCpu, host

#: The features, in order (their count is the vector's fixed length).
NAMES = (
    "log2 flops",
    "vector lanes / register lanes",
    "padded lanes / lanes",
    "log2 unrolled extent",
    "accumulator registers / vector registers",
    "accumulator registers / accumulators that hide FMA latency",
    "log2 parallel extent",
    "parallel balance (iterations / threads x rounds)",
    "log2 innermost reduction extent",
    "log2 reduction extent",
    "log2 register tile bytes",
    "register tile bytes / L1",
    "log2 thread share bytes",
    "thread share bytes / L2",
    "log2 flops per register tile byte",
    "log2 (1 + other stores / compute stores)",
)

#: Scopes that live in registers: no cache traffic.
REGISTER_SCOPES = frozenset({"local"})

Interval = tuple[int, int]


@dataclass(frozen=True)
class _Nest:
    """A store with the loops around it (outermost first) and the names of its block's
    reduction iterators."""

    store: Store
    loops: tuple[For, ...]
    reductions: frozenset[str]

    @property
    def trips(self) -> int:
        return math.prod(loop.extent for loop in self.loops)

    def reduces(self, loop: For) -> bool:
        name = loop.var.name
        return any(name == r or name.startswith(r + "_") for r in self.reductions)


def tuning_features(task: TuningTask, trace: Trace) -> list[float] | None:
    """:data:`NAMES` for ``trace`` replayed on ``task``'s function; None when it does not replay."""
    try:
        func = tuning.replay(task, trace)
    except REJECTIONS:
        return None
    return features(func, task.flops, task.payload.threads, host())


def features(func: PrimFunc, flops: float, threads: int, cpu: HostCpu) -> list[float]:
    """:data:`NAMES` of a scheduled ``func`` doing ``flops`` a run on ``threads`` of ``cpu``."""
    nests = list(_nests(func.body, (), frozenset()))
    if not nests:
        return [_log2(flops)] + [0.0] * (len(NAMES) - 1)
    # Ties go to a reduction's nest: a weight-packing stage of a batch-1 matmul runs as
    # often as its multiply-add, but once at load time, not on every call.
    main = max(nests, key=lambda n: (n.trips, any(n.reduces(loop) for loop in n.loops)))
    loops = main.loops
    lanes = _product(loops, ForKind.VECTORIZED)
    register_lanes = max(1, cpu.lanes(main.store.buffer.dtype.itemsize))
    rows = math.ceil(lanes / register_lanes)  # vector registers one row of the tile takes
    unrolled = _product(loops, ForKind.UNROLLED)
    accumulators = unrolled * rows
    parallel = _product(loops, ForKind.PARALLEL)
    rounds = math.ceil(parallel / max(1, threads))
    reductions = [k for k, loop in enumerate(loops) if main.reduces(loop)]
    # A register tile: its whole reduction (from the outermost reduction loop in), or the
    # unrolled and vectorized loops alone where nothing is reduced.
    tile_from = reductions[0] if reductions else _tail(loops)
    tile_bytes = _footprint(main, loops[tile_from:])
    share_from = max((k + 1 for k, loop in enumerate(loops) if loop.kind is ForKind.PARALLEL), default=0)
    share_bytes = _footprint(main, loops[share_from:])
    tile_flops = 2.0 * math.prod(loop.extent for loop in loops[tile_from:])
    other = sum(n.trips for n in nests) - main.trips
    return [
        _log2(flops),
        lanes / register_lanes,
        rows * register_lanes / lanes,
        _log2(unrolled),
        accumulators / max(1, cpu.vector_registers),
        accumulators / max(1, cpu.min_accumulators),
        _log2(parallel),
        parallel / (rounds * max(1, threads)),
        _log2(loops[reductions[-1]].extent if reductions else 1),
        _log2(math.prod(loops[k].extent for k in reductions)),
        _log2(tile_bytes),
        tile_bytes / max(1, cpu.l1d_bytes),
        _log2(share_bytes),
        share_bytes / max(1, cpu.l2_bytes),
        _log2(tile_flops / max(1, tile_bytes)),
        _log2(1.0 + other / max(1, main.trips)),
    ]


def _nests(stmt: Stmt, loops: tuple[For, ...], reductions: frozenset[str]) -> Iterator[_Nest]:
    """Every store under ``stmt`` with its enclosing loops and its block's reduction iterators."""
    if isinstance(stmt, Store):
        yield _Nest(stmt, loops, reductions)
    elif isinstance(stmt, For):
        yield from _nests(stmt.body, loops + (stmt,), reductions)
    elif isinstance(stmt, Block):
        names = frozenset(i.var.name for i in stmt.iters if i.kind is IterKind.REDUCTION)
        yield from _nests(stmt.body, loops, names)
    elif isinstance(stmt, Allocate):
        yield from _nests(stmt.body, loops, reductions)
    elif isinstance(stmt, Seq):
        for s in stmt.stmts:
            yield from _nests(s, loops, reductions)
    elif isinstance(stmt, IfThenElse):
        yield from _nests(stmt.then, loops, reductions)
        if stmt.otherwise is not None:
            yield from _nests(stmt.otherwise, loops, reductions)


def _product(loops: tuple[For, ...], kind: ForKind) -> int:
    return math.prod(loop.extent for loop in loops if loop.kind is kind)


def _tail(loops: tuple[For, ...]) -> int:
    """Where the innermost run of unrolled and vectorized loops begins."""
    k = len(loops)
    while k > 0 and loops[k - 1].kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
        k -= 1
    return k


def _footprint(nest: _Nest, inner: tuple[For, ...]) -> int:
    """Bytes of the memory buffers the compute statement reads or writes while ``inner``
    run, the loops outside them holding one value."""
    extents = {loop.var: loop.extent for loop in inner}
    accesses: dict[Buffer, list[tuple[Expr, ...]]] = {nest.store.buffer: [nest.store.indices]}
    for buffer, indices in _loads(nest.store.value):
        accesses.setdefault(buffer, []).append(indices)
    return sum(buffer.dtype.itemsize * math.prod(_span(seen, d, dim, extents) for d, dim in enumerate(buffer.shape))
               for buffer, seen in accesses.items() if buffer.scope not in REGISTER_SCOPES)


def _span(seen: list[tuple[Expr, ...]], d: int, dim: int, extents: dict[Var, int]) -> int:
    """Elements of dimension ``d`` (of size ``dim``) that the accesses ``seen`` touch."""
    bounds = [_bounds(indices[d], extents) if d < len(indices) else None for indices in seen]
    if any(b is None for b in bounds):
        return dim
    low = min(b[0] for b in bounds if b is not None)
    high = max(b[1] for b in bounds if b is not None)
    return max(1, min(dim, high - low + 1))


def _bounds(expr: Expr, extents: dict[Var, int]) -> Interval | None:
    """Least and greatest value of the index ``expr`` as the loops of ``extents`` run and
    every other variable holds 0 (an outer loop's one value: only the width matters);
    None where the arithmetic is not one these bounds follow."""
    if isinstance(expr, Var):
        return (0, extents.get(expr, 1) - 1)
    if isinstance(expr, Const):
        return (int(expr.value), int(expr.value)) if expr.dtype.kind in "iu" else None
    if isinstance(expr, Cast):
        return _bounds(expr.a, extents) if expr.dtype.kind in "iu" else None
    if not isinstance(expr, Binary):
        return None
    a, b = _bounds(expr.a, extents), _bounds(expr.b, extents)
    if a is None or b is None:
        return None
    return _combine(expr.op, a, b)


def _combine(op: str, a: Interval, b: Interval) -> Interval | None:
    """Interval arithmetic for the index ops."""
    if op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if op == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if op == "mul":
        corners = [x * y for x in a for y in b]
        return (min(corners), max(corners))
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op in ("floordiv", "mod") and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == "floordiv":
            return (a[0] // c, a[1] // c)
        return (a[0] % c, a[1] % c) if a[0] // c == a[1] // c else (0, c - 1)
    return None


def _loads(expr: Expr) -> Iterator[tuple[Buffer, tuple[Expr, ...]]]:
    """Every load in ``expr`` (not those inside another load's indices) as (buffer, indices)."""
    if isinstance(expr, Load):
        yield expr.buffer, expr.indices
        return
    for child in _children(expr):
        yield from _loads(child)


def _children(expr: Expr) -> Iterator[Expr]:
    """The expressions directly under ``expr`` (operands, arguments, a condition)."""
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, Expr):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, Expr))


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0
