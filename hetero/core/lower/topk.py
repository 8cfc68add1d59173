"""Lowering TopK (meaning: :mod:`hetero.core.ir.ops.topk`) as a rank selection.

Sorting is data-dependent control flow, which compute definitions do not have; a
selection by rank is not. Each element's rank in its row is how many elements of
the row come before it in TopK's total order (a sum of comparisons); the ranks are
a permutation of ``0..n-1``, so the ``r``-th output's index is the one position
whose rank is ``r`` (a sum that picks exactly one term), and its value is ``X`` read
there. That is ``n`` comparisons per element and ``n`` per output: quadratic in the
row length, fine for the rows TopK meets in detection heads and samplers of a few
thousand, not for sorting a vocabulary.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    Expr, Not, const, eq, gt, logical_and, logical_or, lt, ne, select,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.registry import lowers

_INT64 = np.dtype("int64")


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
    """Ranks, then the index of each rank below k, then the values read at those indices."""
    x = inputs[0]
    assert x is not None
    axis, largest = attrs["axis"], bool(attrs["largest"])
    out = out_types[0].shape
    n = x.shape[axis]

    def along(idx: Indices, i: Expr) -> Indices:
        return tuple(idx[:axis]) + (i,) + tuple(idx[axis + 1:])

    j = reduce_axis(n, f"{names[0]}_j")

    def rank(idx: Indices) -> Expr:
        before = _comes_before(x[along(idx, j.var)], x[idx], j.var, idx[axis], largest)
        return sum_(select(before, const(1, _INT64), const(0, _INT64)), j)

    ranks = compute_nd(x.shape, rank, f"{names[0]}_rank")
    p = reduce_axis(n, f"{names[0]}_p")

    def index(idx: Indices) -> Expr:
        return sum_(select(eq(ranks[along(idx, p.var)], idx[axis]), p.var, const(0, _INT64)), p)

    indices = compute_nd(out, index, names[1])
    values = compute_nd(out, lambda idx: x[along(idx, indices[idx])], names[0])
    return [values, indices]
