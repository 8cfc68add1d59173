"""The NVPTX renderer: kernels written in the tensor IR (or lowered and given the cuda
default schedule) render to PTX that ptxas assembles for sm_80 and sm_90, with the launch
their bound loops say; their meaning is checked with the interpreter against numpy. No
GPU runs them here: the runtime through the CUDA driver is not built yet (issue 14)."""

from __future__ import annotations

from math import erf

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import (
    Allocate, Barrier, Buffer, For, ForKind, IfThenElse, PrimFunc, Stmt, Store, Var, call, cast, lt, run_func, seq,
)
from hetero.core.ir.tir.expr import as_expr, eq
from hetero.core.ir.tir.stmt import Evaluate, walk
from hetero.core.lower import lower_node
from hetero.errors import CodegenError
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda.ptxas import INSTALL_HINT, assemble, find_ptxas
from hetero.plugins.cuda.render import emit_ptx_in_child, render_ptx
from hetero.plugins.cuda.schedules import default_schedule

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)
A = Buffer("A", (64,), "float32")
B = Buffer("B", (64,), "float32")


def bound(var: Var, extent: int, axis: str, body: Stmt) -> For:
    return For(var, extent, body, ForKind.THREAD_BINDING, axis)


def grid(out: Buffer, value, blocks: int = 2, threads: int = 32) -> PrimFunc:  # noqa: ANN001 - value(i)
    """``out[i] = value(i)`` over ``blocks`` blocks of ``threads`` threads."""
    b, t = Var("b"), Var("t")
    i = b * threads + t
    return PrimFunc("k", (A, out), bound(b, blocks, "blockIdx.x", bound(t, threads, "threadIdx.x",
                                                                        Store(out, (i,), value(i)))))


def block_sum() -> PrimFunc:
    """S[b] = sum of A's 32 elements of block b: a tree reduction in shared memory."""
    b, t = Var("b"), Var("t")
    S = Buffer("S", (2,), "float32")
    tile = Buffer("T", (32,), "float32", "shared")
    steps: list[Stmt] = [Store(tile, (t,), A[b * 32 + t]), Barrier("shared")]
    for half in (16, 8, 4, 2, 1):
        steps += [IfThenElse(lt(t, half), Store(tile, (t,), tile[t] + tile[t + half])), Barrier("shared")]
    steps.append(IfThenElse(eq(t, 0), Store(S, (b,), tile[0])))
    return PrimFunc("block_sum", (A, S), bound(b, 2, "blockIdx.x", Allocate(tile, bound(t, 32, "threadIdx.x",
                                                                                       seq(*steps)))))


def lowered_add() -> tuple[PrimFunc, PrimFunc]:
    """Add of two (5, 70) tensors, lowered, and with the cuda default schedule (a100)."""
    g = GraphBuilder("g")
    g.output(g.Add(g.input("x", (5, 70)), g.input("y", (5, 70)), name="n"))
    func = lower_node(g.build().node("n"))
    return func, default_schedule(func, GPU_PRESETS["a100"]).func


def _bound_extents(func: PrimFunc) -> dict[str, int]:
    return {s.thread_axis: s.extent for s in walk(func.body) if isinstance(s, For) and s.kind is ForKind.THREAD_BINDING}


def _assembles(kernel) -> dict[str, int]:  # noqa: ANN001 - a RenderedKernel
    """ptxas's registers per thread for sm_80 and sm_90 (PTX for sm_80 assembles for both)."""
    return {arch: assemble(kernel.ptx, arch, kernel.name).registers for arch in ("sm_80", "sm_90")}


rng = np.random.default_rng(0)
a = rng.standard_normal(64).astype(np.float32)


@needs_ptxas
def test_an_elementwise_add_scheduled_for_the_gpu_renders_with_its_bound_launch() -> None:
    func, scheduled = lowered_add()
    kernel = render_ptx(scheduled)
    extents = _bound_extents(scheduled)
    assert kernel.launch.grid == (extents["blockIdx.x"], 1, 1) and kernel.launch.block == (extents["threadIdx.x"], 1, 1)
    assert kernel.launch.grid[0] * kernel.launch.block[0] >= 350 and kernel.shared_bytes == 0
    assert [p.name for p in kernel.params] == [p.name for p in func.params]
    assert ".visible .entry " in kernel.ptx and "ptr addrspace(1) noalias" in kernel.llvm_ir
    assert "%ctaid.x" in kernel.ptx and "%tid.x" in kernel.ptx
    assert all(r > 0 for r in _assembles(kernel).values())
    x, y = rng.standard_normal((5, 70)).astype(np.float32), rng.standard_normal((5, 70)).astype(np.float32)
    out = next(p for p in func.params if p.name not in ("x", "y"))
    got = run_func(scheduled, {"x": x, "y": y, out.name: np.zeros(out.shape, out.dtype)})[out.name]
    np.testing.assert_allclose(got, x + y, rtol=1e-6)


@needs_ptxas
def test_exp_and_tanh_come_from_libdevice_internalised() -> None:
    func = grid(B, lambda i: call("exp", A[i]) + call("tanh", A[i]))
    for arch in ("sm_80", "sm_90"):
        kernel = render_ptx(func, arch)
        assert f".target {arch}" in kernel.ptx
        assert "__nv_expf" in kernel.llvm_ir and "__nv_tanhf" in kernel.llvm_ir
        assert "__nv_" not in kernel.ptx  # inlined: no libdevice function survives as a PTX function
        assert len(kernel.ptx) < 64 * 1024
        assert kernel.launch.grid == (2, 1, 1) and kernel.launch.block == (32, 1, 1)
        assert assemble(kernel.ptx, arch, kernel.name).registers > 0
    got = run_func(func, {"A": a, "B": np.zeros(64, np.float32)})["B"]
    np.testing.assert_allclose(got, np.exp(a) + np.tanh(a), rtol=1e-5)


@needs_ptxas
def test_a_float16_cast_renders_and_rounds_as_numpy() -> None:
    H = Buffer("H", (64,), "float16")
    func = grid(H, lambda i: cast(A[i] * 3.0, "float16"))
    kernel = render_ptx(func)
    assert "cvt.rn.f16.f32" in kernel.ptx
    _assembles(kernel)
    got = run_func(func, {"A": a, "H": np.zeros(64, np.float16)})["H"]
    np.testing.assert_array_equal(got, (a * np.float32(3.0)).astype(np.float16))


@needs_ptxas
def test_a_shared_memory_reduction_with_barriers() -> None:
    func = block_sum()
    kernel = render_ptx(func)
    assert kernel.shared_bytes == 32 * 4 and kernel.launch.block == (32, 1, 1)
    assert "addrspace(3)" in kernel.llvm_ir and ".shared" in kernel.ptx
    assert kernel.ptx.count("bar.sync") == 6
    for arch in ("sm_80", "sm_90"):
        report = assemble(kernel.ptx, arch, kernel.name)
        assert report.shared_bytes == 128 and report.registers > 0
    got = run_func(func, {"A": a, "S": np.zeros(2, np.float32)})["S"]
    np.testing.assert_allclose(got, a.reshape(2, 32).sum(axis=1), rtol=1e-5)


@needs_ptxas
def test_a_store_between_blocks_and_threads_runs_in_thread_zero_after_a_barrier() -> None:
    b, t = Var("b"), Var("t")
    S = Buffer("S", (2,), "float32")
    tile = Buffer("T", (32,), "float32", "shared")
    # Thread loops, then a store once per block reading what all threads wrote.
    body = bound(b, 2, "blockIdx.x", Allocate(tile, seq(
        bound(t, 32, "threadIdx.x", Store(tile, (t,), A[b * 32 + t])),
        Store(S, (b,), tile[0] + tile[31]))))
    func = PrimFunc("ends", (A, S), body)
    kernel = render_ptx(func)
    assert "bar.sync" in kernel.ptx and "setp" in kernel.ptx
    _assembles(kernel)
    got = run_func(func, {"A": a, "S": np.zeros(2, np.float32)})["S"]
    np.testing.assert_allclose(got, a.reshape(2, 32)[:, 0] + a.reshape(2, 32)[:, 31], rtol=1e-6)


@needs_ptxas
def test_a_serial_loop_around_thread_loops_ends_each_iteration_with_a_barrier() -> None:
    b, t, u, k = Var("b"), Var("t"), Var("u"), Var("k")
    tile = Buffer("T", (32,), "float32", "shared")
    # Each iteration fills the tile reversed, then every thread adds its slot to B: the
    # next iteration may overwrite the tile only after every thread has read it.
    step = seq(bound(t, 32, "threadIdx.x", Store(tile, (t,), A[b * 32 + 31 - t] * cast(k + 1, "float32"))),
               bound(u, 32, "threadIdx.x", Store(B, (b * 32 + u,), B[b * 32 + u] + tile[u])))
    func = PrimFunc("rounds", (A, B), bound(b, 2, "blockIdx.x", Allocate(tile, For(k, 2, step))))
    kernel = render_ptx(func)
    assert kernel.llvm_ir.count("call void @\"llvm.nvvm.barrier.cta.sync.aligned.all\"") == 2
    _assembles(kernel)
    got = run_func(func, {"A": a, "B": np.zeros(64, np.float32)})["B"]
    np.testing.assert_allclose(got, 3 * a.reshape(2, 32)[:, ::-1].reshape(64), rtol=1e-6)


@needs_ptxas
def test_float64_math_calls_libdevice_double_functions() -> None:
    X, Y = Buffer("X", (64,), "float64"), Buffer("Y", (64,), "float64")
    t = Var("t")
    func = PrimFunc("d", (X, Y), bound(t, 64, "threadIdx.x", Store(Y, (t,), call("erf", X[t]) + call("log", X[t]))))
    kernel = render_ptx(func)
    assert "__nv_erf" in kernel.llvm_ir and "__nv_erff" not in kernel.llvm_ir and "__nv_log\"" in kernel.llvm_ir
    _assembles(kernel)
    x = np.abs(rng.standard_normal(64)) + 0.5
    got = run_func(func, {"X": x, "Y": np.zeros(64)})["Y"]
    np.testing.assert_allclose(got, np.array([erf(v) for v in x]) + np.log(x), rtol=1e-12)


def test_constructs_it_does_not_map_are_errors_naming_them() -> None:
    t = Var("t")
    with pytest.raises(CodegenError, match=r"func k: Barrier\('global'\) has no NVPTX rendering"):
        render_ptx(PrimFunc("k", (A, B), bound(t, 32, "threadIdx.x", seq(Store(B, (t,), A[t]), Barrier("global")))))
    with pytest.raises(CodegenError, match="func k: an Evaluate statement"):
        render_ptx(PrimFunc("k", (A, B), bound(t, 32, "threadIdx.x", Evaluate(call("exp", A[t])))))
    tile = Buffer("T", (32,), "float32", "local")
    with pytest.raises(CodegenError, match="local buffer T is allocated outside the loop bound to threadIdx.x"):
        render_ptx(PrimFunc("k", (A, B), Allocate(tile, bound(t, 32, "threadIdx.x", Store(B, (t,), A[t])))))
    shared = Buffer("T", (32,), "float32", "shared")
    with pytest.raises(CodegenError, match="shared buffer T is allocated inside the loop bound to threadIdx.x"):
        render_ptx(PrimFunc("k", (A, B), bound(t, 32, "threadIdx.x", Allocate(shared, Store(B, (t,), A[t])))))
    with pytest.raises(CodegenError, match=r"func k: LLVM emitted PTX .version \d\.\d instead of ISA 9.9"):
        render_ptx(grid(B, lambda i: A[i]), ptx_version=99)
    with pytest.raises(CodegenError, match="2 grids"):
        first, second = grid(B, lambda i: A[i]), grid(B, lambda i: B[i] * 2.0)
        render_ptx(PrimFunc("k", (A, B), seq(first.body, second.body)))
    with pytest.raises(CodegenError, match="store to B sits outside the loop bound to blockIdx.x"):
        render_ptx(PrimFunc("k", (A, B), seq(grid(B, lambda i: A[i]).body, Store(B, (as_expr(0),), A[1]))))


def test_an_llvm_abort_ends_the_child_not_the_caller() -> None:
    # llvm.exp.f32 has no NVPTX selection: LLVM aborts the process that emits it.
    ir_text = """
declare float @llvm.exp.f32(float)
define ptx_kernel void @k(ptr addrspace(1) %a) {
  %v = load float, ptr addrspace(1) %a
  %e = call float @llvm.exp.f32(float %v)
  store float %e, ptr addrspace(1) %a
  ret void
}
"""
    with pytest.raises(CodegenError, match=r"kernel k: LLVM's NVPTX target failed on it") as err:
        emit_ptx_in_child(ir_text, "k", "sm_80", 78, uses_libdevice=False)
    assert "exp" in str(err.value)
