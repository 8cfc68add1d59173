"""Lowering ReduceSum, ReduceMean, ReduceMax and ReduceMin.

Each is one stage whose element is a reduction over the reduced axes, kept in a
local accumulator by :func:`hetero.core.ir.tir.compute.lower`. Half-precision floats
accumulate in float32, as every fast library does; float32 accumulates in float32,
within a few roundings of the reference's float64 sum (the tests bound the gap).
Integer sums wrap in their own dtype, as the reference's do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, max_, min_, reduce_axis, sum_
from hetero.core.ir.tir.expr import Expr, cast, const
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.registry import Lowering, lowers

_FLOAT32 = np.dtype("float32")


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
