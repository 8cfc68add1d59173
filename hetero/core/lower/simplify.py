"""Index arithmetic simplified by the loops' ranges: ``(a*K + r) // K`` is ``a`` and
``(a*K + r) % K`` is ``r`` where ``0 <= r < K`` over every iteration.

Lowerings that map one element order onto another (Reshape, Flatten, layout changes)
write each input index as the output's flat offset split again by the input's strides,
``offset // stride % dim``. Where the two shapes agree, as often they do (a Reshape
that adds a unit axis), every such index is one of the loop variables, but only the
loops' ranges show it. With the loops nested, LLVM proved that itself; once a schedule
fuses the leading loops for its thread pool (``fused // 224 % 3``), it no longer could,
and every element paid several divisions: SqueezeNet's input reshape ran 20 times
slower on two threads than on one (AMD EPYC, znver4). Simplified here, before any
schedule, every backend gets the plain index.

An example, loops ``i1 < 3``, ``i2 < 224``, ``i3 < 224``::

    (i1*50176 + i2*224 + i3) // 50176 % 3     ->  i1
    (i1*50176 + i2*224 + i3) // 224 % 224     ->  i2
"""

from __future__ import annotations

from typing import Any

from hetero.core.ir.tir.expr import Binary, Const, Expr, Var, const
from hetero.core.ir.tir.functor import StmtExprMutator
from hetero.core.ir.tir.stmt import For, PrimFunc
from hetero.core.schedule.region import affine


def simplify_indices(func: PrimFunc) -> PrimFunc:
    """``func`` with each integer floor division and modulo by a positive constant whose
    dividend is affine in loop variables replaced by its value where the loops' ranges
    decide it; the same object when nothing changed."""
    body = _Simplifier().visit_stmt(func.body)
    return func if body is func.body else PrimFunc(func.name, func.params, body, func.attrs)


class _Simplifier(StmtExprMutator):
    def __init__(self) -> None:
        self.extents: dict[Var, int] = {}

    def visit_For(self, s: Any) -> Any:
        outer = self.extents.get(s.var)
        self.extents[s.var] = s.extent
        try:
            return super().visit_For(s)
        finally:
            if outer is None:
                del self.extents[s.var]
            else:
                self.extents[s.var] = outer

    def visit_Binary(self, e: Any) -> Expr:
        e = super().visit_Binary(e)
        if not isinstance(e, Binary) or e.op not in ("floordiv", "mod") or e.dtype.kind not in "iu":
            return e
        if not isinstance(e.b, Const) or int(e.b.value) <= 0:
            return e
        form = affine(e.a)
        if form is None or any(v not in self.extents or v.dtype != e.dtype for v in form[0]):
            return e
        return _split(form[0], form[1], int(e.b.value), e.op, self.extents, e) or e


def _split(terms: dict[Var, int], constant: int, k: int, op: str, extents: dict[Var, int],
           original: Binary) -> Expr | None:
    """``(sum(terms) + constant) // k`` or ``% k`` as an affine expression, when the part
    of the dividend that is not a multiple of ``k`` stays within one multiple of ``k``."""
    whole = {v: c // k for v, c in terms.items() if c % k == 0}
    rest = {v: c for v, c in terms.items() if c % k}
    base, offset = divmod(constant, k)
    lo = offset + sum(c * (extents[v] - 1) for v, c in rest.items() if c < 0)
    hi = offset + sum(c * (extents[v] - 1) for v, c in rest.items() if c > 0)
    if lo // k != hi // k:
        return None
    carry = lo // k
    if op == "floordiv":
        return _affine_expr(whole, base + carry, original)
    return _affine_expr(rest, offset - carry * k, original)


def _affine_expr(terms: dict[Var, int], constant: int, like: Binary) -> Expr:
    """``sum(coef * var) + constant`` in ``like``'s dtype."""
    out: Expr = const(constant, like.dtype)
    for var, coef in terms.items():
        out = out + (var if coef == 1 else var * const(coef, like.dtype))
    return out
