"""The loop nest every reduction block is lowered to, found once for the schedules that tile it.

A lowered reduction block reads::

    block Y { for i { for j {            # the spatial loops
      alloc Y_acc: f32[1] local {        # the scalar accumulator
        Y_acc[0] = init
        for r { Y_acc[0] = Y_acc[0] + ... }   # the reduction loops
        Y[i, j] = epilogue(Y_acc[0])
    } } } }
"""

from __future__ import annotations

from dataclasses import dataclass

from hetero.plugin.schedule import find_block, node_at
from hetero.plugin.tir import Allocate, Block, For, PrimFunc, Seq, Stmt


@dataclass(frozen=True)
class ReductionNest:
    """A block's perfectly nested spatial loops around one scalar accumulator."""

    spatial: tuple[For, ...]
    accumulator: Allocate
    update: For  # the reduction loops, the accumulation at their innermost

    @property
    def update_body(self) -> Stmt:
        """The statement inside every reduction loop."""
        body: Stmt = self.update
        while isinstance(body, For):
            body = body.body
        return body


def reduction_nest(func: PrimFunc, block_name: str) -> ReductionNest | None:
    """The reduction nest of ``block_name``, or None if the block is not shaped like one."""
    path = find_block(func.body, block_name)
    if path is None:
        return None
    block = node_at(func.body, path)
    assert isinstance(block, Block)
    spatial: list[For] = []
    inner = block.body
    while isinstance(inner, For):
        spatial.append(inner)
        inner = inner.body
    if not (isinstance(inner, Allocate) and inner.buffer.shape == (1,) and inner.buffer.scope == "local"
            and isinstance(inner.body, Seq) and len(inner.body.stmts) == 3
            and isinstance(inner.body.stmts[1], For)):
        return None
    return ReductionNest(tuple(spatial), inner, inner.body.stmts[1])
