"""One kernel's way from the tensor IR to C: schedule, legalise, print.

The schedule is deliberately modest; each step is a schedule primitive, which checks its
own preconditions, so a step that does not apply is skipped rather than wrong:

- in every block, the innermost loop is vectorized where it is the block's own, walks the
  one store under it contiguously (its last index is the loop variable), reads nothing of
  the buffer it writes, and has at least :data:`MIN_VECTOR_EXTENT` iterations: the C says
  so with ``#pragma GCC ivdep`` (``omp simd`` under OpenMP) and ``-O2`` makes vectors;
- with OpenMP, a block with at least :data:`PARALLEL_MIN_WORK` innermost iterations gets
  its leading data-parallel loops fused until there are :data:`MIN_PARALLEL_EXTENT`
  iterations to share, and that loop runs in parallel.

Reductions stay serial in the lowering's order, so a kernel sums as the interpreter does.
Legalisation (:func:`~hetero.plugin.tir.legalize` with :data:`NATIVE`, nothing native
beyond the primitives) turns the IR's semantics (floored division, NaN-propagating
min/max, storage types) into operations C has; the kit's C printer does the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from hetero.plugin import ScheduleError
from hetero.plugin.codegen import CFunction, print_c_func
from hetero.plugin.parts import StageDump
from hetero.plugin.schedule import LoopRef, Schedule, affine, block_names, find_block, node_at
from hetero.plugin.tir import (
    Block, For, ForKind, Load, Native, PrimFunc, Store, exprs_of, format_func, legalize, mentions, stores_in_loops,
)

#: What the C printer maps beyond the primitives: nothing.
NATIVE = Native()
MIN_VECTOR_EXTENT = 4
#: An OpenMP parallel region costs a few microseconds; below this many iterations it does not pay.
PARALLEL_MIN_WORK = 1 << 14
MIN_PARALLEL_EXTENT = 64


def schedule(func: PrimFunc, openmp: bool) -> Schedule:
    """``func`` scheduled for the C target (see the module's docstring)."""
    sch = Schedule(func)
    for name in block_names(func.body):
        _vectorize_innermost(sch, name)
        if openmp and _work(sch.func, name) >= PARALLEL_MIN_WORK:
            _parallelize(sch, name)
    return sch


@dataclass(frozen=True)
class Kernel:
    """One kernel's stages: the scheduled and the legalised function, and its C."""

    scheduled: Schedule
    legalized: PrimFunc
    function: CFunction

    def dump(self, dump: StageDump, file: str) -> None:
        """Write the stages this module makes as ``file`` in each stage's folder."""
        dump.write("scheduled", file, "tir", format_func(self.scheduled.func))
        dump.write("legalized", file, "tir", format_func(self.legalized))
        dump.write("code", file, "c", self.function.code)
        dump.write("report", file, "txt", f"schedule trace:\n{self.scheduled.trace}")


def build_kernel(func: PrimFunc, openmp: bool) -> Kernel:
    """``func`` (canonically named) scheduled, legalised and printed as the C function of
    the same name."""
    sch = schedule(func, openmp)
    legal = legalize(sch.func, NATIVE)
    return Kernel(sch, legal, print_c_func(legal, func.name, openmp=openmp))


def _block(func: PrimFunc, name: str) -> Block:
    block = node_at(func.body, find_block(func.body, name))
    assert isinstance(block, Block)
    return block


def _vectorize_innermost(sch: Schedule, name: str) -> None:
    inner, loop = _block(sch.func, name).body, None
    while isinstance(inner, For):
        loop, inner = inner, inner.body
    if (loop is None or not isinstance(inner, Store) or loop.kind is not ForKind.SERIAL
            or loop.extent < MIN_VECTOR_EXTENT or affine(inner.indices[-1]) != ({loop.var: 1}, 0)
            or any(mentions(i, loop.var) for i in inner.indices[:-1])
            or any(isinstance(e, Load) and e.buffer == inner.buffer for e in exprs_of(inner.value))):
        return
    try:
        sch.vectorize(LoopRef(name, loop.var.name))
    except ScheduleError:
        pass  # the primitive's own check refused it: the loop stays serial


def _work(func: PrimFunc, name: str) -> int:
    """How many times the block's innermost statements run."""
    return sum(math.prod(loop.extent for loop in loops) for _, loops in stores_in_loops(_block(func, name).body))


def _parallelize(sch: Schedule, name: str) -> None:
    loops = sch.get_loops(sch.get_block(name))
    if not loops or any(loop.block != name for loop in loops):
        return  # a block computed inside another's loops runs in that one's thread
    leading: list[LoopRef] = []
    extent = 1
    for loop in loops:
        if extent >= MIN_PARALLEL_EXTENT or not _data_parallel(sch, loop):
            break
        leading.append(loop)
        extent *= sch.extent(loop)
    if extent < 2:
        return
    try:
        outer = sch.fuse(*leading) if len(leading) > 1 else leading[0]
    except ScheduleError:
        outer = leading[0]  # not perfectly nested: the outermost loop alone
    if sch.extent(outer) >= 2:
        sch.parallel(outer)


def _data_parallel(sch: Schedule, loop: LoopRef) -> bool:
    """Whether ``loop``'s iterations write disjoint elements (the primitive tried on a copy)."""
    try:
        Schedule(sch.func).parallel(loop)
    except ScheduleError:
        return False
    return True


__all__ = ["MIN_PARALLEL_EXTENT", "MIN_VECTOR_EXTENT", "NATIVE", "PARALLEL_MIN_WORK", "Kernel", "build_kernel",
           "schedule"]
