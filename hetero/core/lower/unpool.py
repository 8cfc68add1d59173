"""Lowering the inverses of sliding windows (meanings: :mod:`hetero.core.ir.ops.unpool`).

Col2Im is a gather, as ConvTranspose's lowering is: each image element sums the taps
whose block position is whole, ``t = o + pad_begin - tap * dilation`` a multiple of the
stride with ``t / stride`` among the block positions. Every output is written once; a
tap off the grid reads a clamped position under a ``select``.

MaxUnpool is a scatter, a stage written as loops: it zeroes the output, then writes
each element of X, in order, at its index decoded into the output's shape (clamped:
indices out of range are refused on the host before the kernel runs).
"""

from __future__ import annotations

import math
from typing import Any

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import Tensor, extern, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    INDEX, Expr, cast, const, eq, ge, logical_and, lt, maximum, minimum, select,
)
from hetero.core.ir.tir.stmt import Stmt, Store, seq
from hetero.core.ir.ops.unpool import blocks
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd, serial_nest
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers


def _row_major(parts: list[Expr], dims: tuple[int, ...]) -> Expr:
    flat: Expr = parts[0]
    for part, dim in zip(parts[1:], dims[1:]):
        flat = flat * dim + part
    return flat


@lowers("Col2Im")
def lower_col2im(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                 names: list[str]) -> list[Tensor]:
    """image[n, c, o...] = sum over the taps landing on o of cols[n, c * K + tap, block]."""
    x = inputs[0]
    assert x is not None
    out, block, count = out_types[0].shape, tuple(attrs["block_shape"]), blocks(attrs)
    acc, kernel = accumulator_dtype(x.dtype), math.prod(block)
    taps = [reduce_axis(k, f"{names[0]}_k{i}") for i, k in enumerate(block)]

    def element(idx: Indices) -> Expr:
        batch, c, o = idx[0], idx[1], idx[2:]
        position: list[Expr] = []
        inside: Expr | None = None
        for i, tap in enumerate(taps):
            stride, dilation, begin = attrs["strides"][i], attrs["dilations"][i], attrs["pads"][i]
            t = o[i] + begin - tap.var * dilation
            checks = [ge(t, 0)] if begin - (block[i] - 1) * dilation < 0 else []
            if stride > 1:
                checks.append(eq(t % stride, 0))
            p = t // stride if stride > 1 else t
            if (out[2 + i] - 1 + begin) // stride >= count[i]:
                checks.append(lt(p, count[i]))
            position.append(maximum(minimum(p, count[i] - 1), 0) if checks else p)
            for check in checks:
                inside = check if inside is None else logical_and(inside, check)
        row = c * kernel + _row_major([t.var for t in taps], block)
        v = cast(x[(batch, row, _row_major(position, count))], acc)
        return cast(sum_(v if inside is None else select(inside, v, const(0, acc)), taps), x.dtype)

    return [compute_nd(out, element, names[0])]


@lowers("MaxUnpool")
def lower_max_unpool(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Zeros, then X[e] at I[e] decoded into the output's shape, e in row-major order."""
    x, indices = inputs
    assert x is not None and indices is not None
    out, name = out_types[0].shape, names[0]
    size = math.prod(out)

    def build(y: Buffer) -> Stmt:
        zero = serial_nest(out, f"{name}_z", lambda p: Store(y, p, const(0, x.dtype)))

        def write(e: Indices) -> Stmt:
            flat = maximum(minimum(cast(indices.buffer[e], INDEX), size - 1), 0)
            at = tuple(flat // math.prod(out[d + 1:]) % dim for d, dim in enumerate(out))
            return Store(y, at, x.buffer[e])

        return seq(zero, serial_nest(x.shape, f"{name}_e", write))

    return [extern(out, x.dtype, name, (x, indices), build)]
