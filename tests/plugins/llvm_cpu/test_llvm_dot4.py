"""llvm_cpu's ``dot4_u8s8``: a loop of it is exact against the tensor IR's reference, and
LLVM's loop vectorizer turns it into ``vpdpbusd`` where the host has AVX-512 VNNI (and
into plain vector arithmetic where it has not)."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import Buffer, For, ForKind, PrimFunc, Store, Var, call, run_func
from hetero.plugins.llvm_cpu import target
from hetero.plugins.llvm_cpu.dot4 import has_vnni
from hetero.plugins.llvm_cpu.kernel import compile_kernel
from hetero.plugins.llvm_cpu.target import emit_assembly, host_features, host_triple

VNNI_HOST = host_triple().startswith("x86_64") and has_vnni(host_features())


def _dot_rows(k: int, n: int) -> PrimFunc:
    """``Y[j] = dot4_u8s8(Y[j], A[r], B[r, j])`` for every ``r``: a lane loop over ``j``
    (vectorized) of sums along ``r``, as an int8 kernel's tile row."""
    a, b, y = Buffer("A", (k,), "int32"), Buffer("B", (k, n), "int32"), Buffer("Y", (n,), "int32")
    r, j = Var("r"), Var("j")
    update = Store(y, (j,), call("dot4_u8s8", y[j], a[r], b[r, j]))
    return PrimFunc("dot_rows", (a, b, y), For(r, k, For(j, n, update, ForKind.VECTORIZED)))


def _check(func: PrimFunc) -> str:
    """Run ``func`` compiled and in the interpreter on random words; the kernel's assembly."""
    rng = np.random.default_rng(8)
    a_, b_, y_ = func.params
    a, b, y = (rng.integers(-2**31, 2**31, p.shape).astype(np.int32) for p in (a_, b_, y_))
    want = run_func(func, {"A": a, "B": b, "Y": y.copy()})["Y"]
    kernel = compile_kernel(func, 1)
    got = y.copy()
    kernel(a, b, got)
    np.testing.assert_array_equal(got, want)
    return kernel.assembly


@pytest.mark.skipif(not VNNI_HOST, reason="the host has no AVX-512 VNNI (avx512vnni, avx512vl, avx512bw)")
def test_a_lane_loop_of_dot4_is_vpdpbusd_on_a_vnni_host() -> None:
    # 37 lanes: 16-lane vectors, then 4 (xmm), then a scalar remainder.
    assert "vpdpbusd" in _check(_dot_rows(5, 37))


def test_without_vnni_dot4_is_plain_arithmetic_and_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    features = {**host_features(), "avx512vnni": False, "avxvnni": False}
    monkeypatch.setattr(target, "host_features", lambda: features)
    assert "vpdpbusd" not in _check(_dot_rows(3, 29))  # a shape of its own: no cached compile


@pytest.mark.parametrize("cpu", ["haswell", "generic"])
def test_ahead_of_time_code_for_another_cpu_is_plain_arithmetic(cpu: str) -> None:
    """The host's vpdpbusd versions are not rendered into code built for other CPUs."""
    assembly = emit_assembly(_dot_rows(4, 16), "x86_64-unknown-linux-gnu", cpu)
    assert "vpdpbusd" not in assembly and "hetero.dot4_u8s8.v" not in assembly
