"""Lowering TopK (meaning: :mod:`hetero.core.ir.ops.topk`) as an insertion into a sorted row.

Each row is walked once, serially (an :func:`~hetero.core.ir.tir.compute.extern` stage):
the output row of indices holds the best ``k`` seen so far, sorted in TopK's total
order, and a local row the values they hold. A candidate that does not come before the
current ``k``-th is dropped with one comparison against that value; one that does moves
every kept index (and value) it beats one place down and takes the place of the last it
beats (no early exit in the IR: a sweep over the ``k`` slots).
That is ``n`` comparisons per row for typical data, ``n * k`` at worst (rows already
sorted the wrong way). The values are then ``X`` read at the indices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import Tensor, extern
from hetero.core.ir.tir.expr import (
    Expr, Not, Var, const, eq, gt, logical_and, logical_or, lt, minimum, ne,
)
from hetero.core.ir.tir.stmt import Allocate, For, IfThenElse, Stmt, Store, seq
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd, serial_nest
from hetero.core.lower.registry import lowers

_INT64 = np.dtype("int64")
#: The largest row of kept values held on the stack; a larger one is a workspace.
_STACK_BYTES = 64 * 1024


def _comes_before(a: Expr, b: Expr, a_pos: Expr, b_pos: Expr, largest: bool) -> Expr:
    """Whether value ``a`` at ``a_pos`` precedes ``b`` at ``b_pos`` in TopK's order."""
    ahead = gt(a, b) if largest else lt(a, b)
    same = eq(a, b)
    if a.dtype.kind == "f":
        a_nan, b_nan = ne(a, a), ne(b, b)
        # NaN is above every number: it leads a largest selection, trails a smallest one.
        nan_ahead = logical_and(a_nan, Not(b_nan)) if largest else logical_and(Not(a_nan), b_nan)
        ahead = logical_or(ahead, nan_ahead)
        same = logical_or(same, logical_and(a_nan, b_nan))
    return logical_or(ahead, logical_and(same, lt(a_pos, b_pos)))



@lowers("TopK")
def lower_topk(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """The indices by insertion, row by row; then the values gathered at them."""
    x = inputs[0]
    assert x is not None
    axis, largest, k = attrs["axis"], bool(attrs["largest"]), attrs["k"]
    out = out_types[0].shape
    n, name = x.shape[axis], names[1]
    j, t = Var(f"{name}_j"), Var(f"{name}_t")

    def build(kept: Buffer) -> Stmt:
        def row(p: Indices) -> Stmt:
            def at(i: Expr) -> tuple[Expr, ...]:
                return tuple(p[:axis]) + (i,) + tuple(p[axis:])

            candidate = x.buffer[at(j)]

            def beats(slot: Expr) -> Expr:
                return _comes_before(candidate, held[(slot,)], j, kept[at(slot)], largest)

            slot = const(k - 1, _INT64) - t
            move = IfThenElse(gt(t, 0), seq(Store(kept, at(slot + 1), kept[at(slot)]),
                                            Store(held, (slot + 1,), held[(slot,)])))
            sweep = For(t, k, IfThenElse(logical_and(lt(slot, j), beats(slot)),
                                         seq(move, Store(kept, at(slot), j), Store(held, (slot,), candidate))))
            first = minimum(j, k - 1)
            append = IfThenElse(lt(j, k), seq(Store(kept, at(first), j), Store(held, (first,), candidate)))
            # Once k are kept, a later candidate never wins a tie with the k-th (it comes
            # later), so one comparison with that value, in a register, decides.
            last = held[(const(k - 1, _INT64),)]
            enters = logical_or(lt(j, k), _comes_before(candidate, last, j, j, largest))
            clear = For(t, k, Store(held, (t,), const(0, x.dtype)))  # no read of undefined values
            return Allocate(held, seq(clear, For(j, n, seq(append, IfThenElse(enters, sweep)))))

        # The kept values, in order: on the stack unless k makes them large.
        scope = "local" if k * x.dtype.itemsize <= _STACK_BYTES else "global"
        held = Buffer(f"{name}_held", (k,), x.dtype, scope)
        return serial_nest(x.shape[:axis] + x.shape[axis + 1:], f"{name}_p", row)

    indices = extern(out, _INT64, name, (x,), build)

    def value(idx: Indices) -> Expr:
        return x[tuple(idx[:axis]) + (indices[idx],) + tuple(idx[axis + 1:])]

    return [compute_nd(out, value, names[0]), indices]
