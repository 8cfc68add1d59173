"""llvm_cpu's register-tiled schedule: compiled MatMul, Gemm and Conv (with fused
epilogues) over shapes the tile divides and shapes it does not, against each op's
reference; and the micro-kernel's shape in the machine code.

Tolerance: a float32 sum of k products, reordered and fused into FMAs, differs from
the float64 reference by at most about k * eps * sum(|a| * |b|) (Higham 3.1); the
bound below uses that magnitude elementwise.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.tir import Allocate, walk
from hetero.core.lower import lower_group, lower_node
from hetero.core.passes.fuse import fuse_epilogues
from hetero.core.schedule.tree import block_names
from hetero.plugins.llvm_cpu import CompiledKernel, host_features, host_triple
from hetero.plugins.llvm_cpu.schedules import default_schedule
from hetero.plugins.llvm_cpu.schedules_tiled import MIN_ACCUMULATORS, VECTOR, plan_tile

RNG = np.random.default_rng(5)
EPS = float(np.finfo(np.float32).eps)


def _run(gb: GraphBuilder, feeds: dict[str, np.ndarray], threads: int) -> np.ndarray:
    """The graph's one output through llvm_cpu, after checking it gets the tiled schedule."""
    graph = gb.build()
    fused = fuse_epilogues(graph)
    nodes = list(fused.nodes)
    func = lower_group(nodes, "k") if len(nodes) > 1 else lower_node(nodes[0])
    assert any(plan_tile(func, name) is not None for name in block_names(func.body)), \
        "the anchor did not get the tiled schedule"
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads)
    return next(iter(exe.run(feeds).values()))


def _check(got: np.ndarray, want: np.ndarray, magnitude: np.ndarray, terms: int) -> None:
    bound = (terms + 2) * EPS * magnitude + 1e-30
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


@pytest.mark.parametrize("m, k, n, threads", [(64, 48, 96, 1), (13, 7, 37, 2), (1, 20, 1000, 2), (9, 33, 17, 1)])
def test_matmul_matches_numpy(m: int, k: int, n: int, threads: int) -> None:
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    gb = GraphBuilder("mm")
    gb.output(gb.MatMul(gb.input("a", (m, k)), b))
    out = _run(gb, {"a": a}, threads)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    _check(out, a64 @ b64, np.abs(a64) @ np.abs(b64), k)


def test_gemm_trans_b_with_bias_matches_numpy() -> None:
    """ResNet's classifier form: Y = A @ B.T + C, 1000 outputs (not a multiple of 32)."""
    a = RNG.standard_normal((2, 64)).astype(np.float32)
    b = RNG.standard_normal((1000, 64)).astype(np.float32)
    c = RNG.standard_normal(1000).astype(np.float32)
    gb = GraphBuilder("gemm")
    gb.output(gb.Gemm(gb.input("a", (2, 64)), b, c, transB=1))
    out = _run(gb, {"a": a}, 2)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    _check(out, a64 @ b64.T + c, np.abs(a64) @ np.abs(b64.T) + np.abs(c), 64)


def _conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """(conv, conv of absolute values) in float64, by explicit windows."""
    n, c, h, _ = x.shape
    k, _, r, _ = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = (h + 2 * pad - r) // stride + 1
    cols = np.stack([xp[:, :, i:i + stride * out:stride, j:j + stride * out:stride]
                     for i in range(r) for j in range(r)], axis=2)  # n, c, r*r, out, out
    wf = w.astype(np.float64).reshape(k, c, r * r)
    return (np.einsum("ncqhw,kcq->nkhw", cols, wf), np.einsum("ncqhw,kcq->nkhw", np.abs(cols), np.abs(wf)))


@pytest.mark.parametrize("c, k, h, r, stride, pad, threads", [
    (8, 32, 9, 3, 1, 1, 2), (3, 16, 11, 7, 2, 3, 1), (16, 40, 7, 1, 1, 0, 2), (5, 64, 6, 3, 2, 1, 1),
])
def test_conv_relu_matches_reference(c: int, k: int, h: int, r: int, stride: int, pad: int, threads: int) -> None:
    x = RNG.standard_normal((1, c, h, h)).astype(np.float32)
    w = RNG.standard_normal((k, c, r, r)).astype(np.float32)
    bias = RNG.standard_normal(k).astype(np.float32)
    gb = GraphBuilder("conv")
    y = gb.Conv(gb.input("x", x.shape), w, bias, pads=(pad,) * 4, strides=(stride, stride))
    gb.output(gb.Relu(y))
    out = _run(gb, {"x": x}, threads)
    want, magnitude = _conv_reference(x, w, stride, pad)
    want = np.maximum(want + bias.reshape(1, -1, 1, 1), 0.0)
    _check(out, want, magnitude + np.abs(bias).reshape(1, -1, 1, 1), c * r * r)


@pytest.mark.skipif(not (host_triple().startswith("x86_64") and host_features().get("avx512f")),
                    reason="the 32-lane tile is two AVX-512 vectors")
def test_matmul_inner_loop_is_register_tiled_fma() -> None:
    """The reduction loop holds zmm FMAs and no load or store of the accumulators:
    every memory operand in it is the packed panel or a broadcast of A."""
    gb = GraphBuilder("mm")
    gb.output(gb.MatMul(gb.input("a", (64, 64)), np.ones((64, 64), np.float32)))
    body = _fma_loop(CompiledKernel(default_schedule(lower_node(gb.build().nodes[0]), 1).func, 1).assembly)
    assert len(re.findall(r"vfmadd231ps\s+[^\n]*zmm", body)) >= 16
    assert not re.search(r"vmovups\s+%zmm\d+, ", body), "an accumulator is stored inside the k loop"


def _fma_loop(asm: str) -> str:
    """The body of the innermost loop of ``asm`` that issues FMAs."""
    bodies = []
    for label in re.findall(r"^(\.LBB\w+):", asm, flags=re.M):
        loop = re.search(rf"^{re.escape(label)}:(.*?)^\s+j\w+\s+{re.escape(label)}$", asm, flags=re.S | re.M)
        if loop is not None:  # a backward jump to the label: a loop
            bodies.append(loop.group(1))
    inner = [b for b in bodies if "vfmadd231ps" in b]
    assert inner, "no loop with FMAs"
    return min(inner, key=len)


@pytest.mark.parametrize("m, k, n, threads", [(1, 37, 83, 1), (2, 45, 70, 2), (3, 29, 101, 1), (1, 300, 1000, 2)])
def test_few_row_gemm_matches_numpy(m: int, k: int, n: int, threads: int) -> None:
    """Batch-1..3 classifiers (AlexNet, VGG): K and N not multiples of a vector."""
    a = RNG.standard_normal((m, k)).astype(np.float32)
    w = RNG.standard_normal((n, k)).astype(np.float32)
    c = RNG.standard_normal(n).astype(np.float32)
    gb = GraphBuilder("gemv")
    gb.output(gb.Relu(gb.Gemm(gb.input("a", (m, k)), w, c, transB=1)))
    out = _run(gb, {"a": a}, threads)
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    _check(out, np.maximum(a64 @ w64.T + c, 0), np.abs(a64) @ np.abs(w64.T) + np.abs(c), k)


@pytest.mark.skipif(VECTOR != 16, reason="the tile sizes below are for 16-lane (AVX-512) vectors")
@pytest.mark.parametrize("m, n, tile", [(1, 1000, (1, 64)), (2, 300, (2, 32)), (3, 300, (3, 32)),
                                        (1, 40, (1, 40)), (8, 300, (8, 32))])
def test_few_row_tiles_widen_to_keep_vector_accumulators(m: int, n: int, tile: tuple[int, int]) -> None:
    """A one-row tile spans more lanes, so each reduction step of every tile still
    issues at least MIN_ACCUMULATORS independent vector FMAs (where N allows)."""
    gb = GraphBuilder("gemv")
    gb.output(gb.Gemm(gb.input("a", (m, 24)), np.ones((n, 24), np.float32), transB=1))
    func = default_schedule(lower_node(gb.build().nodes[0]), 1).func
    shapes = [s.buffer.shape for s in walk(func.body) if isinstance(s, Allocate) and s.buffer.scope == "local"]
    assert shapes == [tile]
    assert tile[0] * tile[1] >= min(MIN_ACCUMULATORS * VECTOR, tile[0] * n)


@pytest.mark.skipif(not (host_triple().startswith("x86_64") and host_features().get("avx512f")),
                    reason="counts AVX-512 accumulators")
def test_gemv_inner_loop_streams_four_vectors_in_registers() -> None:
    """M = 1: each step of the k loop is one broadcast of A and four zmm FMAs on the
    packed weight, with the accumulators in registers."""
    gb = GraphBuilder("gemv")
    gb.output(gb.Gemm(gb.input("a", (1, 256)), np.ones((512, 256), np.float32), transB=1))
    body = _fma_loop(CompiledKernel(default_schedule(lower_node(gb.build().nodes[0]), 1).func, 1).assembly)
    assert len(re.findall(r"vfmadd231ps\s+[^\n]*zmm", body)) >= 4
    assert not re.search(r"vmovups\s+%zmm\d+, ", body), "an accumulator is stored inside the k loop"


@pytest.mark.parametrize("n, k, threads", [(1500, 150, 2), (1500, 150, 1), (40, 7, 2)])
def test_topk_on_one_long_row_compiles_and_matches_numpy(n: int, k: int, threads: int) -> None:
    """Faster R-CNN's RPN: TopK over one row of 1,500 scores. The row loop holds a serial
    walk, not one perfect nest, so parallelising must not fuse into it."""
    x = RNG.permutation(n).astype(np.float32)[None, :]
    gb = GraphBuilder("topk")
    values, _ = gb.TopK(gb.input("x", (1, n)), k=k, axis=1, largest=1)
    gb.output(values)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=threads)
    np.testing.assert_array_equal(exe.run({"x": x})[values.name], np.sort(x, axis=1)[:, ::-1][:, :k])
