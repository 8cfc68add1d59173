"""Small compute definitions to schedule, and the check that a schedule kept their numbers."""

from __future__ import annotations

from textwrap import dedent

import numpy as np

from hetero.core.ir.tir import (
    PrimFunc,
    compute,
    lower,
    maximum,
    placeholder,
    reduce_axis,
    run_func,
    sum_,
    verify_func,
)


def matmul() -> PrimFunc:
    """Y = relu(X @ W), 6x8 by 8x5: extents that 4 does not divide."""
    x = placeholder((6, 8), "float32", "X")
    w = placeholder((8, 5), "float32", "W")
    r = reduce_axis(8, "r")
    y = compute((6, 5), lambda i, j: maximum(sum_(x[i, r] * w[r, j], r), 0.0), "Y")
    return lower("matmul", [x, w], [y])


def add() -> PrimFunc:
    """C = A + B, elementwise on 6x10."""
    a = placeholder((6, 10), "float32", "A")
    b = placeholder((6, 10), "float32", "B")
    c = compute((6, 10), lambda i, j: a[i, j] + b[i, j], "C")
    return lower("add", [a, b], [c])


def conv() -> PrimFunc:
    """A 1-d convolution: Y[o, x] = sum over c, k of X[c, x + k] * W[o, c, k]."""
    x = placeholder((3, 10), "float32", "X")
    w = placeholder((4, 3, 3), "float32", "W")
    c = reduce_axis(3, "c")
    k = reduce_axis(3, "k")
    y = compute((4, 8), lambda o, p: sum_(x[c, p + k.var] * w[o, c, k], [c, k]), "Y")
    return lower("conv", [x, w], [y])


def chain() -> PrimFunc:
    """B = A * 2 + 1 (an intermediate stage), C[i] = B[i] + B[i + 2]."""
    a = placeholder((12,), "float32", "A")
    b = compute((12,), lambda i: a[i] * 2.0 + 1.0, "B")
    c = compute((10,), lambda i: b[i] + b[i + 2], "C")
    return lower("chain", [a], [c])


def inputs_for(func: PrimFunc, seed: int = 0) -> dict[str, np.ndarray]:
    """Small integers stored as floats: every sum is exact, whatever order it runs in."""
    rng = np.random.default_rng(seed)
    return {b.name: rng.integers(-3, 4, b.shape).astype(b.dtype) for b in func.params}


def same_numbers(before: PrimFunc, after: PrimFunc) -> None:
    """``after`` verifies and computes exactly what ``before`` does."""
    verify_func(after)
    data = inputs_for(before)
    want, got = run_func(before, data), run_func(after, data)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"buffer {name}")



def body_of(func: PrimFunc) -> str:
    """The printed function without its signature line, dedented for comparison."""
    return dedent("\n".join(str(func).splitlines()[1:-1]))
