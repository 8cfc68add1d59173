"""llvm_cpu's vectorisable float32 exp, tanh and erf (hetero.plugins.llvm_cpu.vecmath) against float64."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hetero
from hetero.core.ir.graph import Graph


def _run(op: str, x: np.ndarray) -> np.ndarray:
    g = Graph(op.lower())
    v = g.add_input("x", x.shape, x.dtype.name)
    g.set_outputs([g.add_node(op, [v]).output])
    exe = hetero.compile(g, targets=["llvm_cpu"], num_threads=1)
    return exe.run({"x": x})[g.outputs[0].name]


def _exp_on_llvm_cpu(x: np.ndarray) -> np.ndarray:
    return _run("Exp", x)


def test_exp_f32_is_within_2_ulp_over_the_whole_float_range() -> None:
    # Every 1,021st bit pattern: about 4.2 million floats of every sign and exponent.
    bits = np.arange(0, 2**32, 1021, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    got = _exp_on_llvm_cpu(x)
    with np.errstate(over="ignore"):
        exact = np.exp(x.astype(np.float64))
        rounded = exact.astype(np.float32)
    normal = (rounded >= np.finfo(np.float32).tiny) & np.isfinite(rounded)
    ulps = np.abs(got[normal].astype(np.float64) - exact[normal]) / np.spacing(rounded[normal])
    assert ulps.max() <= 2.0, f"{ulps.max():.2f} ulp at x = {x[normal][ulps.argmax()]!r}"
    # Past ln(FLT_MAX) the answer is +inf; below, denormals round gradually to 0.
    assert np.all(np.isinf(got[np.isinf(rounded)]))
    tiny = ~normal & ~np.isinf(rounded)
    denormal_step = np.float64(np.finfo(np.float32).smallest_subnormal)
    assert np.all(np.abs(got[tiny].astype(np.float64) - exact[tiny]) <= 2 * denormal_step)


def test_exp_f32_edges() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 88.72283, 88.72284, -103.98, -200.0, 1e30,
                  -1e30], np.float32)
    got = _exp_on_llvm_cpu(x)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:5], [np.inf, 0.0, 1.0, 1.0])
    assert np.isfinite(got[5]) and np.isinf(got[6])  # either side of ln(FLT_MAX)
    np.testing.assert_array_equal(got[7:], [0.0, 0.0, np.inf, 0.0])


@pytest.mark.parametrize("op, exact", [("Tanh", np.tanh), ("Erf", np.vectorize(math.erf))])
def test_tanh_and_erf_f32_are_within_4_eps(op: str, exact) -> None:
    # Dense where the functions bend, then every 1,021st float32 of the whole range.
    dense = np.linspace(-10, 10, 400_001, dtype=np.float32)
    bits = np.arange(0, 2**32, 1021 * 16, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([dense, bits[np.isfinite(bits)], np.array([np.inf, -np.inf, 0, -0.0], np.float32)])
    got = _run(op, x).astype(np.float64)
    want = exact(x.astype(np.float64))
    eps = np.finfo(np.float32).eps
    # Relative where the result is away from 0, absolute near it (tanh, erf ~ x there).
    err = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(np.float32).tiny)
    assert err.max() <= 4 * eps, f"{err.max() / eps:.2f} eps at x = {x[err.argmax()]!r}"
    assert np.isnan(_run(op, np.array([np.nan], np.float32))[0])
