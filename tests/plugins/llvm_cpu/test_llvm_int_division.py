"""llvm_cpu and the tensor-IR interpreter agree on integer division at its edges: large
int64 operands, every sign, a zero divisor, ``MIN // -1``."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import Buffer, For, PrimFunc, Store, Var, run_func, seq
from hetero.core.ir.tir.expr import binary
from hetero.plugins.llvm_cpu import CompiledKernel


def divisions(dtype: str, n: int) -> PrimFunc:
    """div, floordiv and mod of A by B, elementwise, into Q, F and M."""
    a, b = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    outs = [Buffer(name, (n,), dtype) for name in "QFM"]
    i = Var("i")
    body = seq(*(Store(out, (i,), binary(op, a[i], b[i])) for out, op in zip(outs, ("div", "floordiv", "mod"))))
    return PrimFunc("divisions", (a, b, *outs), For(i, n, body))

PAIRS = {
    "int64": [(2**62 + 12345, 3), (-(2**62 + 5), 3), (2**63 - 1, -(2**31 + 11)), (-7, 2), (7, -2),
              (-7, -2), (5, 0), (-5, 0), (-(2**63), -1), (-(2**63), 10**9 + 7)],
    "int32": [(2**31 - 1, 3), (-7, 2), (7, -2), (5, 0), (-(2**31), -1)],
    "uint64": [(2**64 - 1, 3), (2**64 - 2, 2**64 - 1), (5, 0)],
}


@pytest.mark.parametrize("dtype", sorted(PAIRS))
def test_compiled_division_is_the_interpreters(dtype: str) -> None:
    pairs = PAIRS[dtype]
    func = divisions(dtype, len(pairs))
    a = np.array([p[0] for p in pairs], dtype)
    b = np.array([p[1] for p in pairs], dtype)
    got = CompiledKernel(func).run(A=a, B=b)
    zeros = np.zeros(len(pairs), dtype)
    want = run_func(func, {"A": a, "B": b, "Q": zeros, "F": zeros, "M": zeros})
    for name in "QFM":
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
