"""Canonical names: functions equal up to naming become equal, so they compile once."""

from __future__ import annotations

import dataclasses
import hashlib

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Expr, Load
from hetero.core.ir.tir.stmt import Allocate, Block, PrimFunc, Stmt, Store, walk
from hetero.core.ir.tir.visit import map_stmt


def canonical_names(func: PrimFunc) -> PrimFunc:
    """``func`` with its buffers renamed ``b0, b1, ...`` in order of appearance (parameters
    first), its blocks ``s0, s1, ...``, and itself named after a digest of the result;
    loop variables are kept.

    Two nodes with the same op, shapes, dtypes and attributes give the same function.
    """
    order: dict[Buffer, Buffer] = {}

    def rename(b: Buffer) -> Buffer:
        if b not in order:
            order[b] = dataclasses.replace(b, name=f"b{len(order)}")
        return order[b]

    for b in func.params:
        rename(b)
    for s in walk(func.body):
        if isinstance(s, (Allocate,)):
            rename(s.buffer)

    def expr(e: Expr) -> Expr | None:
        return Load(rename(e.buffer), e.indices, e.dtype) if isinstance(e, Load) else None

    blocks: dict[str, str] = {}
    for s in walk(func.body):
        if isinstance(s, Block):
            blocks.setdefault(s.name, f"s{len(blocks)}")

    def stmt(s: Stmt) -> Stmt | None:
        if isinstance(s, Store):
            return dataclasses.replace(s, buffer=rename(s.buffer))
        if isinstance(s, Allocate):
            return dataclasses.replace(s, buffer=rename(s.buffer))
        if isinstance(s, Block):
            return dataclasses.replace(s, name=blocks[s.name], writes=rename(s.writes))
        return None

    body = map_stmt(func.body, stmt, expr)
    params = tuple(order[b] for b in func.params)
    digest = hashlib.sha1(repr((params, body)).encode()).hexdigest()[:12]
    return PrimFunc(f"k_{digest}", params, body, func.attrs)
