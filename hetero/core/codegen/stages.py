"""A function's stages: the top-level statements a renderer turns into kernels, in order.

A lowered function is its stages (one compute definition each) under the allocations of
the intermediates they pass on. A renderer that launches a kernel per stage (the GPU,
where the launch boundary is the grid-wide synchronisation) or runs them as entries of
one module (the CPU) splits it here; the intermediates become workspaces that every
stage takes after the function's parameters.
"""

from __future__ import annotations

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.stmt import Allocate, Seq, Stmt


def split_stages(body: Stmt) -> tuple[list[Buffer], list[Stmt]]:
    """The workspaces (top-level allocations, outermost first) and the stages of ``body``."""
    workspaces: list[Buffer] = []
    stages: list[Stmt] = []

    def walk(stmt: Stmt) -> None:
        if isinstance(stmt, Allocate):
            workspaces.append(stmt.buffer)
            walk(stmt.body)
        elif isinstance(stmt, Seq):
            for part in stmt.stmts:
                walk(part)
        else:
            stages.append(stmt)

    walk(body)
    return workspaces, stages
