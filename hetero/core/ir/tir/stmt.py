"""Tensor-IR statements and functions.

A :class:`PrimFunc` is a loop nest over buffers: ``For`` loops with a kind,
``Store``, ``Allocate``, ``Seq``, ``IfThenElse``, ``Block`` (a stage), ``Barrier``
(threads wait for each other) and ``Evaluate`` (a call made for its effect).
Statements are immutable; schedules and passes build new ones with
:func:`dataclasses.replace`.

Loops and allocations carry ``annotations``: ``(key, value)`` pairs whose keys are
registered with their meaning in :mod:`hetero.core.ir.tir.registry` (built in: a
loop's initiation interval ``ii`` and ``unroll_factor``; an allocation's
``partition``). :func:`annotate` sets one; a renderer that does not know a key may
ignore it, as a hint, but the verifier checks every value.
"""

from __future__ import annotations

from collections.abc import Iterator
import dataclasses
from dataclasses import dataclass, field
import enum
from typing import Any, TypeVar

from hetero.core.ir.tir.buffer import Buffer, Partition
from hetero.core.ir.tir.expr import Call, Expr, Var


class ForKind(enum.Enum):
    """How a loop maps onto hardware; renderers decide what each means for them."""

    SERIAL = "serial"
    PARALLEL = "parallel"  # iterations run on several cores
    VECTORIZED = "vectorized"  # iterations become SIMD lanes
    UNROLLED = "unrolled"  # the body is repeated `extent` times
    THREAD_BINDING = "thread_binding"  # bound to a hardware axis (thread_axis)
    PIPELINED = "pipelined"  # iterations overlap (HLS II=1, software pipelining)


class IterKind(enum.Enum):
    """What a block's iterator is to its computation."""

    SPATIAL = "spatial"  # indexes the output: iterations write different elements
    REDUCTION = "reduction"  # folded into one element: iterations combine into it


@dataclass(frozen=True, eq=True)
class BlockIter:
    """One iterator of a block's definition: ``var`` over ``range(extent)``, of ``kind``."""

    var: Var
    extent: int
    kind: IterKind


Annotations = tuple[tuple[str, Any], ...]


class Stmt:
    """Base of all statements."""


@dataclass(frozen=True, eq=True)
class Store(Stmt):
    """``buffer[indices] = value``."""

    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, eq=True)
class For(Stmt):
    """``for var in range(extent): body``, run as ``kind`` says.

    ``thread_axis`` names the hardware axis of a THREAD_BINDING loop
    ("blockIdx.x", "threadIdx.x", ...: the registered thread axes); ``annotations``
    carry renderer hints under registered keys (``ii``: the initiation interval of a
    PIPELINED loop; ``unroll_factor``: unroll by that much), read with
    :meth:`annotation` and set with :func:`annotate`.
    """

    var: Var
    extent: int
    body: Stmt
    kind: ForKind = ForKind.SERIAL
    thread_axis: str | None = None
    annotations: Annotations = ()

    def annotation(self, key: str, default: Any = None) -> Any:
        """The value annotated under ``key``, or ``default``."""
        return dict(self.annotations).get(key, default)


@dataclass(frozen=True, eq=True)
class Seq(Stmt):
    """Statements run one after the other."""

    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=True)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@dataclass(frozen=True, eq=True)
class Allocate(Stmt):
    """``buffer`` exists (in its scope) while ``body`` runs.

    ``annotations`` carry hints under registered buffer keys; ``partition`` (a tuple of
    :class:`~hetero.core.ir.tir.buffer.Partition`, at most one a dimension) splits the
    buffer into banks, as HLS's ARRAY_PARTITION does, so that a pipelined loop can read
    several elements a cycle.
    """

    buffer: Buffer
    body: Stmt
    annotations: Annotations = ()

    def annotation(self, key: str, default: Any = None) -> Any:
        """The value annotated under ``key``, or ``default``."""
        return dict(self.annotations).get(key, default)

    @property
    def partitions(self) -> tuple[Partition, ...]:
        """How the buffer is split into banks, by dimension (none: one bank)."""
        return tuple(self.annotation("partition", ()))


@dataclass(frozen=True, eq=True)
class Block(Stmt):
    """A named computation stage (one compute definition), the unit schedules address.

    ``body`` holds the stage's loop nest; ``writes`` names the buffer it produces;
    ``iters`` are the iterators of its definition, each spatial (an output dimension)
    or a reduction (an axis its value is folded over), as lowering knew them (empty for
    a stage written as statements). Schedule primitives change the loops, not the
    definition, so they keep ``iters``: a tuner reads there which axes it may run in
    parallel and which carry a reduction.
    """

    name: str
    body: Stmt
    writes: Buffer
    iters: tuple[BlockIter, ...] = ()


@dataclass(frozen=True, eq=True)
class Barrier(Stmt):
    """Every thread sharing memory of ``scope`` waits here until all have arrived, and
    their writes to it before the barrier are seen by their reads after it
    (``__syncthreads()`` for ``"shared"``). Every thread of a group must reach it as
    often as the others: not under a branch only some of them take."""

    scope: str


@dataclass(frozen=True, eq=True)
class Evaluate(Stmt):
    """``call`` made for its effect; its value is dropped (a registered intrinsic)."""

    call: Call


_Annotated = TypeVar("_Annotated", For, Allocate)


@dataclass(frozen=True)
class PrimFunc:
    """A kernel: ``params`` are its buffers (inputs, then outputs), ``body`` its code."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt
    attrs: tuple[tuple[str, Any], ...] = field(default=())

    def attr(self, key: str, default: Any = None) -> Any:
        return dict(self.attrs).get(key, default)


def seq(*stmts: Stmt) -> Stmt:
    """A Seq of ``stmts`` with nested Seqs flattened; one statement stands alone."""
    flat: list[Stmt] = []
    for s in stmts:
        flat.extend(s.stmts if isinstance(s, Seq) else (s,))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def annotate(stmt: _Annotated, key: str, value: Any) -> _Annotated:
    """``stmt`` (a loop or an allocation) with ``key`` set to ``value`` (replacing any
    earlier value of ``key``); keys keep their first position."""
    pairs = dict(stmt.annotations)
    pairs[key] = value
    return dataclasses.replace(stmt, annotations=tuple(pairs.items()))


def walk(stmt: Stmt) -> Iterator[Stmt]:
    """Every statement under ``stmt``, pre-order."""
    yield stmt
    if isinstance(stmt, (For, Allocate, Block)):
        yield from walk(stmt.body)
    elif isinstance(stmt, Seq):
        for s in stmt.stmts:
            yield from walk(s)
    elif isinstance(stmt, IfThenElse):
        yield from walk(stmt.then)
        if stmt.otherwise is not None:
            yield from walk(stmt.otherwise)


def stores_in_loops(stmt: Stmt, loops: tuple[For, ...] = ()) -> Iterator[tuple[Store, tuple[For, ...]]]:
    """Every store under ``stmt`` with the loops around it there, outermost first (after
    ``loops``): what counts a kernel's work, each store running once per iteration of its
    loops."""
    if isinstance(stmt, Store):
        yield stmt, loops
    elif isinstance(stmt, For):
        yield from stores_in_loops(stmt.body, loops + (stmt,))
    elif isinstance(stmt, (Allocate, Block)):
        yield from stores_in_loops(stmt.body, loops)
    elif isinstance(stmt, Seq):
        for s in stmt.stmts:
            yield from stores_in_loops(s, loops)
    elif isinstance(stmt, IfThenElse):
        yield from stores_in_loops(stmt.then, loops)
        if stmt.otherwise is not None:
            yield from stores_in_loops(stmt.otherwise, loops)


def _str_stmt(self: Stmt) -> str:
    from hetero.core.ir.tir.printer import format_stmt

    return "\n".join(format_stmt(self))


def _str_func(self: PrimFunc) -> str:
    from hetero.core.ir.tir.printer import format_func

    return format_func(self)


Stmt.__str__ = _str_stmt  # type: ignore[method-assign]
PrimFunc.__str__ = _str_func  # type: ignore[method-assign]
