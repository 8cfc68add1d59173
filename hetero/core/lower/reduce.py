"""Lowering the reductions (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
ReduceL2, ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) and ArgMax, ArgMin.

Each is one stage whose element is a reduction over the reduced axes, kept in a
local accumulator by :func:`hetero.core.ir.tir.compute.lower`. Half-precision floats
accumulate in float32, as every fast library does; float32 accumulates in float32,
within a few roundings of the reference's float64 sum (the tests bound the gap).
Integer sums wrap in their own dtype, as the reference's do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from collections.abc import Callable

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import Tensor, extern, max_, min_, prod_, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    Expr, Var, call, cast, const, eq, gt, logical_and, logical_or, ne, select,
)
from hetero.core.ir.tir.stmt import Allocate, For, IfThenElse, Stmt, Store, seq
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd, serial_nest
from hetero.core.lower.registry import Lowering, lowers

_FLOAT32 = np.dtype("float32")
INDEX = np.dtype("int64")


def accumulator_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a sum of ``dtype`` elements is kept in: float32 for narrower floats."""
    return _FLOAT32 if dtype.kind == "f" and dtype.itemsize < 4 else dtype


def _identity(combiner: str, dtype: np.dtype) -> float | int:
    if combiner == "sum":
        return 0
    if dtype.kind == "f":
        return -np.inf if combiner == "max" else np.inf
    info = np.iinfo(dtype)
    return int(info.min if combiner == "max" else info.max)


def _lower_reduce(combiner: str, mean: bool = False) -> Lowering:
    reducers = {"sum": sum_, "max": max_, "min": min_}

    def lower_reduce(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
        x = inputs[0]
        assert x is not None
        out, axes, keep = out_types[0], attrs["axes"], bool(attrs["keepdims"])
        acc = accumulator_dtype(x.dtype) if combiner == "sum" else x.dtype
        count = int(np.prod([x.shape[a] for a in axes]))
        rs = {a: reduce_axis(x.shape[a], f"r{a}") for a in axes}

        def element(i: Indices) -> Expr:
            if count == 0:
                # An empty reduction has no loop to run: its value is the identity
                # (and a mean of nothing is 0/0).
                total: Expr = const(_identity(combiner, acc), acc)
            else:
                kept = iter(i)
                source = tuple(
                    rs[a].var if a in rs else (i[a] if keep else next(kept))
                    for a in range(len(x.shape))
                )
                total = reducers[combiner](cast(x[source], acc), list(rs.values()))
            if mean:
                # Integer division truncates toward zero, the reference's integer mean;
                # max(count, 1) keeps an empty integer mean 0 rather than a division by 0.
                total = total / const(count if acc.kind == "f" else max(count, 1), acc)
            return cast(total, out.dtype)

        return [compute_nd(out.shape, element, names[0], out.dtype)]

    return lower_reduce


lowers("ReduceSum")(_lower_reduce("sum"))
lowers("ReduceMean")(_lower_reduce("sum", mean=True))
lowers("ReduceMax")(_lower_reduce("max"))
lowers("ReduceMin")(_lower_reduce("min"))


def _source(x: Tensor, axes: tuple[int, ...], keep: bool, rs: dict[int, Any], i: Indices
            ) -> tuple[Expr, ...]:
    """The input index that reduction variables ``rs`` and output index ``i`` address."""
    kept = iter(i)
    return tuple(rs[a].var if a in rs else (i[a] if keep else next(kept))
                 for a in range(len(x.shape)))


def _lower_fold(combiner: str, term: Callable[[Expr], Expr], finish: Callable[[Expr], Expr],
                empty: float) -> Lowering:
    """A one-stage reduction: ``finish(combiner of term(x) over axes)``, in the accumulator
    dtype; ``empty`` is the value over an empty set."""
    reducers = {"sum": sum_, "prod": prod_}

    def lower(inputs: list[Tensor | None], attrs: dict[str, Any],
              out_types: list[TensorType], names: list[str]) -> list[Tensor]:
        x = inputs[0]
        assert x is not None
        out, axes, keep = out_types[0], attrs["axes"], bool(attrs["keepdims"])
        acc = accumulator_dtype(x.dtype)
        count = int(np.prod([x.shape[a] for a in axes]))
        rs = {a: reduce_axis(x.shape[a], f"r{a}") for a in axes}

        def element(i: Indices) -> Expr:
            if count == 0:
                return const(empty, out.dtype)
            total = reducers[combiner](term(cast(x[_source(x, axes, keep, rs, i)], acc)),
                                       list(rs.values()))
            return cast(finish(total), out.dtype)

        return [compute_nd(out.shape, element, names[0], out.dtype)]

    return lower


def _same(e: Expr) -> Expr:
    return e


lowers("ReduceProd")(_lower_fold("prod", _same, _same, 1))
lowers("ReduceL1")(_lower_fold("sum", lambda e: call("abs", e), _same, 0))
lowers("ReduceSumSquare")(_lower_fold("sum", lambda e: e * e, _same, 0))
lowers("ReduceL2")(_lower_fold("sum", lambda e: e * e, lambda t: call("sqrt", t), 0))
lowers("ReduceLogSum")(_lower_fold("sum", _same, lambda t: call("log", t), -np.inf))


@lowers("ReduceLogSumExp")
def lower_reduce_log_sum_exp(inputs: list[Tensor | None], attrs: dict[str, Any],
                             out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """log(sum(exp(x - m))) + m, m the maximum (0 where it is infinite, as the reference).

    The maximum is its own stage, computed once per output element.
    """
    x = inputs[0]
    assert x is not None
    out, axes, keep = out_types[0], attrs["axes"], bool(attrs["keepdims"])
    acc = accumulator_dtype(x.dtype)
    if int(np.prod([x.shape[a] for a in axes])) == 0:
        return [compute_nd(out.shape, lambda i: const(-np.inf, out.dtype), names[0], out.dtype)]
    rs = {a: reduce_axis(x.shape[a], f"r{a}") for a in axes}
    inf = const(np.inf, acc)

    def peak_element(i: Indices) -> Expr:
        m = max_(cast(x[_source(x, axes, keep, rs, i)], acc), list(rs.values()))
        return select(logical_or(eq(m, inf), eq(m, -inf)), const(0, acc), m)

    peak = compute_nd(out.shape, peak_element, f"{names[0]}_max", acc)

    def element(i: Indices) -> Expr:
        m = peak[i]
        total = sum_(call("exp", cast(x[_source(x, axes, keep, rs, i)], acc) - m),
                     list(rs.values()))
        return cast(call("log", total) + m, out.dtype)

    return [compute_nd(out.shape, element, names[0], out.dtype)]


def _lower_arg(largest: bool) -> Lowering:
    def lower_arg(inputs: list[Tensor | None], attrs: dict[str, Any],
                  out_types: list[TensorType], names: list[str]) -> list[Tensor]:
        """The extreme (NaN-propagating max or min) in one stage, then the first (or last)
        index holding it, or holding a NaN when the extreme is NaN."""
        x = inputs[0]
        assert x is not None
        out, axis, keep = out_types[0], attrs["axis"], bool(attrs["keepdims"])
        last, size = bool(attrs["select_last_index"]), x.shape[axis]
        r = reduce_axis(size, f"{names[0]}_r")
        rs = {axis: r}
        extreme = max_ if largest else min_
        peak = compute_nd(out.shape, lambda i: extreme(x[_source(x, (axis,), keep, rs, i)], r),
                          f"{names[0]}_peak", x.dtype)
        index = cast(r.var, INDEX)

        def element(i: Indices) -> Expr:
            v = x[_source(x, (axis,), keep, rs, i)]
            hit = eq(v, peak[i])
            if x.dtype.kind == "f":
                hit = logical_or(hit, ne(v, v))  # only a NaN differs from itself
            if last:
                return max_(select(hit, index, const(-1, INDEX)), r)
            return min_(select(hit, index, const(size, INDEX)), r)

        return [compute_nd(out.shape, element, names[0], INDEX)]

    return lower_arg


lowers("ArgMax")(_lower_arg(largest=True))
lowers("ArgMin")(_lower_arg(largest=False))


@lowers("Det")
def lower_det(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
    """Gaussian elimination with partial pivoting in float64, one matrix at a time (a
    serial stage): the product of the pivots, negated once per row swap."""
    x = inputs[0]
    assert x is not None
    n, name = x.shape[-1], names[0]
    f64, i64 = np.dtype("float64"), np.dtype("int64")
    k, r, c = Var(f"{name}_k"), Var(f"{name}_r"), Var(f"{name}_c")

    def build(out: Buffer) -> Stmt:
        a = Buffer(f"{name}_lu", (n, n), f64, "local")
        det, best = Buffer(f"{name}_det", (1,), f64, "local"), Buffer(f"{name}_best", (1,), f64, "local")
        piv, tmp = Buffer(f"{name}_piv", (1,), i64, "local"), Buffer(f"{name}_tmp", (1,), f64, "local")
        zero = const(0, i64)

        def matrix(p: Indices) -> Stmt:
            load = For(r, n, For(c, n, Store(a, (r, c), cast(x.buffer[tuple(p) + (r, c)], f64))))
            find = seq(Store(piv, (zero,), k), Store(best, (zero,), call("abs", a[k, k])),
                       For(r, n, IfThenElse(logical_and(gt(r, k), gt(call("abs", a[r, k]), best[zero])),
                                            seq(Store(best, (zero,), call("abs", a[r, k])),
                                                Store(piv, (zero,), r)))))
            swap = IfThenElse(ne(piv[zero], k), seq(
                For(c, n, seq(Store(tmp, (zero,), a[k, c]), Store(a, (k, c), a[piv[zero], c]),
                              Store(a, (piv[zero], c), tmp[zero]))),
                Store(det, (zero,), -det[zero])))
            update_row = seq(
                Store(tmp, (zero,), a[r, k] / a[k, k]),
                For(c, n, IfThenElse(gt(c, k), Store(a, (r, c), a[r, c] - tmp[zero] * a[k, c]))))
            eliminate = IfThenElse(ne(a[k, k], const(0.0, f64)), For(r, n, IfThenElse(gt(r, k), update_row)))
            step = seq(find, swap, Store(det, (zero,), det[zero] * a[k, k]), eliminate)
            body = seq(load, Store(det, (zero,), const(1.0, f64)), For(k, n, step),
                       Store(out, tuple(p), cast(det[zero], x.dtype)))
            for buffer in (tmp, piv, best, det, a):
                body = Allocate(buffer, body)
            return body

        return serial_nest(x.shape[:-2], f"{name}_p", matrix)

    return [extern(x.shape[:-2], x.dtype, name, (x,), build)]
