"""Affine index analysis: which part of a buffer a loop's iterations touch.

``compute_at`` needs, for one iteration of a consumer loop, the box of a producer's
buffer that the iterations inside it read. Where every index is affine in the loop
variables (``i_0 * 4 + i_1 + r``), that box has a start that depends only on the
outer variables and an extent that is a constant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hetero.core.ir.tir.expr import Binary, Const, Expr, Var, as_expr

#: An affine form: coefficients of variables, and a constant.
Affine = tuple[dict[Var, int], int]


def affine(e: Expr) -> Affine | None:
    """``e`` as ``sum(coef * var) + const`` over integer variables, or None if it is not."""
    if isinstance(e, Var) and e.dtype.kind in "iu":
        return {e: 1}, 0
    if isinstance(e, Const) and e.dtype.kind in "iu":
        return {}, int(e.value)
    if not isinstance(e, Binary) or e.op not in ("add", "sub", "mul"):
        return None
    a, b = affine(e.a), affine(e.b)
    if a is None or b is None:
        return None
    if e.op == "mul":
        if a[0] and b[0]:
            return None
        (terms, c), k = (a, b[1]) if not b[0] else (b, a[1])
        return {v: k * coef for v, coef in terms.items() if k * coef}, c * k
    sign = 1 if e.op == "add" else -1
    terms = dict(a[0])
    for v, coef in b[0].items():
        terms[v] = terms.get(v, 0) + sign * coef
    return {v: coef for v, coef in terms.items() if coef}, a[1] + sign * b[1]


def _span(terms: Mapping[Var, int], extents: Mapping[Var, int]) -> tuple[int, int]:
    """The least and greatest value of ``sum(coef * var)`` over the loops' ranges."""
    lo = sum(coef * (extents[v] - 1) for v, coef in terms.items() if coef < 0)
    hi = sum(coef * (extents[v] - 1) for v, coef in terms.items() if coef > 0)
    return lo, hi


@dataclass(frozen=True)
class Range:
    """One dimension of a region: ``start`` (in outer variables) and a constant ``extent``;
    ``may_underflow``/``may_overflow`` say whether it can leave ``[0, dim)``."""

    start: Expr
    extent: int
    may_underflow: bool
    may_overflow: bool


def read_region(indices: Sequence[tuple[Expr, ...]], shape: tuple[int, ...], outer: Sequence[tuple[Var, int]],
                inner: Mapping[Var, int]) -> list[Range] | str:
    """The box of a buffer of ``shape`` read at ``indices`` while the ``inner`` loops run
    and the ``outer`` loops (outermost first) hold one value; or why it cannot be found."""
    outer_extents = dict(outer)
    order = {v: k for k, (v, _) in enumerate(outer)}
    region = []
    for d, dim in enumerate(shape):
        outer_terms: dict[Var, int] | None = None
        lows, highs = [], []
        for index in indices:
            form = affine(index[d])
            if form is None:
                return f"index {d} of a read is not affine in the loop variables"
            terms, c = form
            unknown = [v.name for v in terms if v not in inner and v not in outer_extents]
            if unknown:
                return f"index {d} of a read uses {unknown[0]}, which is not a loop around the read"
            mine = {v: k for v, k in terms.items() if v in outer_extents}
            if outer_terms is not None and mine != outer_terms:
                return f"reads differ in how index {d} depends on the outer loops"
            outer_terms = mine
            lo, hi = _span({v: k for v, k in terms.items() if v in inner}, inner)
            lows.append(c + lo)
            highs.append(c + hi)
        assert outer_terms is not None
        start: Expr = as_expr(0)
        for v in sorted(outer_terms, key=order.__getitem__):
            start = start + v * outer_terms[v]
        offset = min(lows)
        start = start - (-offset) if offset < 0 else start + offset
        lo, hi = _span(outer_terms, outer_extents)
        region.append(Range(start, max(highs) - min(lows) + 1, lo + min(lows) < 0, hi + max(highs) > dim - 1))
    return region
