"""Stages that read only constants run once, when compiling, instead of on every call.

A schedule may add stages that copy an operand into a faster layout (the panels of
:meth:`~hetero.core.schedule.Schedule.pack`). When that operand is a graph constant
(a weight), the copy is the same on every call: :class:`ConstantPacker` takes each
such stage out of the kernel, compiles it alone, runs it once on the constant, and
makes its result a parameter of the kernel, bound to a new constant. The kernel then
reads the packed weight directly, and a raw weight that no kernel reads any more is
neither kept nor saved. The stage is compiled as :data:`~hetero.plugins.llvm_cpu.jit.RUNS_ONCE`
code: fast to build rather than fast to run, since it runs only this once.

Before (weight ``W`` a constant)::

    func k(a, W, y) {
      alloc W_packed global { block W_packed { ... W[...] ... }  block y { ... W_packed ... } }
    }

After::

    func k(a, W_packed, y) { block y { ... W_packed ... } }     # W_packed computed once
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
import dataclasses
from dataclasses import dataclass

import numpy as np

from hetero.plugin.schedule import unique_name
from hetero.plugin.tir import (
    Allocate, Block, Buffer, IfThenElse, Load, PrimFunc, Seq, Stmt, Store, canonical_names, exprs_of, seq, walk,
)
from hetero.plugins.llvm_cpu.jit import RUNS_ONCE
from hetero.plugins.llvm_cpu.kernel import compile_kernel
from hetero.plugins.llvm_cpu.schedules import default_schedule


@dataclass(frozen=True)
class _Hoisted:
    """One stage taken out of a kernel: the buffer it fills and the stage itself."""

    buffer: Buffer
    block: Block


def buffers_read(stmt: Stmt) -> set[Buffer]:
    """Every buffer that ``stmt`` loads from."""
    found: set[Buffer] = set()
    for s in walk(stmt):
        roots = (*s.indices, s.value) if isinstance(s, Store) else (s.cond,) if isinstance(s, IfThenElse) else ()
        for root in roots:
            found.update(e.buffer for e in exprs_of(root) if isinstance(e, Load))
    return found


def _buffers_written(stmt: Stmt) -> set[Buffer]:
    return {s.buffer for s in walk(stmt) if isinstance(s, Store)}


def _hoist(stmt: Stmt, known: set[Buffer], hoisted: list[_Hoisted]) -> Stmt:
    """``stmt`` without the stages that read only ``known`` buffers, appending each to
    ``hoisted``; a hoisted stage's buffer becomes known, so a stage that reads it
    hoists too.

    Only stages at the top of the function move: one inside a loop runs per iteration,
    and its inputs may depend on the loop."""
    if isinstance(stmt, Seq):
        return seq(*(_hoist(s, known, hoisted) for s in stmt.stmts))
    if not isinstance(stmt, Allocate):
        return stmt
    # Inner allocations first: lower() nests one Allocate per stage around a single
    # sequence of stages, so this buffer's stage is at the top of this body only once
    # the inner allocations have been hoisted away.
    body = _hoist(stmt.body, known, hoisted)
    stages = body.stmts if isinstance(body, Seq) else (body,)
    for stage in stages:
        if len(stages) > 1 and _fills_from(stage, stmt.buffer, known):
            hoisted.append(_Hoisted(stmt.buffer, stage))
            known.add(stmt.buffer)
            return _hoist(seq(*(s for s in stages if s is not stage)), known, hoisted)
    return dataclasses.replace(stmt, body=body)


def _fills_from(stage: Stmt, buffer: Buffer, known: set[Buffer]) -> bool:
    """Whether ``stage`` is a block that writes only the global ``buffer`` (and memory it
    allocates itself: a reduction's accumulator, such as the int8 kernels' per-channel
    weight sums), from ``known`` buffers alone."""
    if not (isinstance(stage, Block) and stage.writes == buffer and buffer.scope == "global"):
        return False
    own = _allocated(stage)
    return _buffers_written(stage) - own == {buffer} and buffers_read(stage) - own <= known


def _allocated(stmt: Stmt) -> set[Buffer]:
    return {s.buffer for s in walk(stmt) if isinstance(s, Allocate)}


class ConstantPacker:
    """Hoists constant-only stages out of the kernels of one compiled part.

    ``constants`` maps graph value names to their data; :attr:`constants` grows by the
    packed arrays, each named ``"{label}/{buffer}"`` after the kernel that first needed
    it (made unique against ``taken``, the part's other value names). Equal stages over
    the same constants (a weight two kernels pack alike) are computed and stored once.
    """

    def __init__(self, constants: Mapping[str, np.ndarray], threads: int, taken: Iterable[str] = ()) -> None:
        self.constants: dict[str, np.ndarray] = dict(constants)
        self.threads = threads
        self._taken = set(taken) | set(constants)
        self._done: dict[tuple[str, tuple[str, ...]], str] = {}

    def apply(self, func: PrimFunc, inputs: tuple[str, ...], label: str) -> tuple[PrimFunc, tuple[str, ...]]:
        """``func`` (whose first ``len(inputs)`` parameters are the values ``inputs``)
        with its constant-only stages computed, and the value names of its new inputs."""
        n_in = len(inputs)
        names = {b: name for b, name in zip(func.params[:n_in], inputs)}
        known = {b for b, name in names.items() if name in self.constants}
        hoisted: list[_Hoisted] = []
        body, before = _hoist(func.body, known, hoisted), -1
        # A stage reading one hoisted in this pass (a weight's panels of its words) sits
        # inside it and was seen first: go again until nothing more moves.
        while len(hoisted) != before:
            before = len(hoisted)
            body = _hoist(body, known, hoisted)
        if not hoisted:
            return func, inputs
        for item in hoisted:
            names[item.buffer] = self._evaluate(item, names, label)
        read = buffers_read(body)
        kept = tuple(b for b in func.params[:n_in] if b in read)
        packed = tuple(item.buffer for item in hoisted if item.buffer in read)
        params = kept + packed + func.params[n_in:]
        return PrimFunc(func.name, params, body, func.attrs), tuple(names[b] for b in kept + packed)

    def _evaluate(self, item: _Hoisted, names: Mapping[Buffer, str], label: str) -> str:
        """Run ``item``'s stage once on the constants it reads; the new constant's name."""
        sources = tuple(sorted(buffers_read(item.block) - _allocated(item.block), key=lambda b: b.name))
        stage = PrimFunc(item.block.name, sources + (item.buffer,), item.block, ((RUNS_ONCE, True),))
        schedule = default_schedule(stage, self.threads)
        canonical = canonical_names(schedule.func)
        key = (canonical.name, tuple(names[b] for b in sources))
        if key not in self._done:
            kernel = compile_kernel(canonical, self.threads, schedule.trace)
            out = np.empty(item.buffer.shape, item.buffer.dtype)
            kernel(*(self.constants[names[b]] for b in sources), out)
            name = unique_name(f"{label}/{item.buffer.name}", self._taken)
            self._taken.add(name)
            self.constants[name] = out
            self._done[key] = name
        return self._done[key]
