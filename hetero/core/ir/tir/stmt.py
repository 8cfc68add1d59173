"""Tensor-IR statements and functions.

A :class:`PrimFunc` is a loop nest over buffers: ``For`` loops with a kind,
``Store``, ``Allocate``, ``Seq`` and ``IfThenElse``. Statements are immutable;
schedules and passes build new ones with :func:`dataclasses.replace`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
import enum
from typing import Any

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Expr, Var


class ForKind(enum.Enum):
    """How a loop maps onto hardware; renderers decide what each means for them."""

    SERIAL = "serial"
    PARALLEL = "parallel"  # iterations run on several cores
    VECTORIZED = "vectorized"  # iterations become SIMD lanes
    UNROLLED = "unrolled"  # the body is repeated `extent` times
    THREAD_BINDING = "thread_binding"  # bound to a hardware axis (thread_axis)
    PIPELINED = "pipelined"  # iterations overlap (HLS II=1, software pipelining)


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
    ("blockIdx.x", "threadIdx.x", ...); ``annotations`` carry renderer hints.
    """

    var: Var
    extent: int
    body: Stmt
    kind: ForKind = ForKind.SERIAL
    thread_axis: str | None = None
    annotations: tuple[tuple[str, Any], ...] = ()


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
    """``buffer`` exists (in its scope) while ``body`` runs."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=True)
class Block(Stmt):
    """A named computation stage (one compute definition), the unit schedules address.

    ``body`` holds the stage's loop nest; ``writes`` names the buffer it produces.
    """

    name: str
    body: Stmt
    writes: Buffer


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


def _str_stmt(self: Stmt) -> str:
    from hetero.core.ir.tir.printer import format_stmt

    return "\n".join(format_stmt(self))


def _str_func(self: PrimFunc) -> str:
    from hetero.core.ir.tir.printer import format_func

    return format_func(self)


Stmt.__str__ = _str_stmt  # type: ignore[method-assign]
PrimFunc.__str__ = _str_func  # type: ignore[method-assign]
