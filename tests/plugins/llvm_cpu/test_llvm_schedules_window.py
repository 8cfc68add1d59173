"""llvm_cpu's schedules for what the register-tiled micro-kernel does not take: grouped
and depthwise Conv (the spatial tile), pooling, elementwise ops and data movement
(the innermost loop vectorized), and the work threshold below which a block stays
off the thread pool. Numbers are compared with each op's reference.

Tolerances: a float32 sum of k products, reordered and fused into FMAs, differs from
the float64 reference by at most about k * eps * sum(|a| * |b|) (Higham 3.1).
MaxPool, Relu, Add and Transpose involve at most one rounding, the same one numpy
makes, so they must match exactly; AveragePool's sum of at most k*k terms and its
division are bounded like a sum of products with unit weights.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.tir.stmt import For, ForKind, PrimFunc, walk
from hetero.core.lower import lower_group, lower_node
from hetero.core.passes.fuse import fuse_epilogues
from hetero.core.schedule.tree import block_names
from hetero.plugins.llvm_cpu import CompiledKernel, host_features, host_triple
from hetero.plugins.llvm_cpu.schedules import PARALLEL_MIN_WORK, default_schedule
from hetero.plugins.llvm_cpu.schedules_tiled import plan_tile
from hetero.plugins.llvm_cpu.schedules_window import plan_window

RNG = np.random.default_rng(11)
EPS = float(np.finfo(np.float32).eps)


def _lowered(gb: GraphBuilder) -> PrimFunc:
    nodes = list(fuse_epilogues(gb.build()).nodes)
    return lower_group(nodes, "k") if len(nodes) > 1 else lower_node(nodes[0])


def _compiled(gb: GraphBuilder, feeds: dict[str, np.ndarray], threads: int) -> tuple[np.ndarray, np.ndarray]:
    """(hetero's output, the reference's output) of the graph's one output."""
    graph = gb.build()
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads)
    got = next(iter(exe.run(feeds).values()))
    want = next(iter(hetero.run_reference(graph, feeds).values()))
    return got, want


def _kinds(func: PrimFunc) -> dict[str, ForKind]:
    return {s.var.name: s.kind for s in walk(func.body) if isinstance(s, For)}


def _conv_graph(c: int, k: int, h: int, r: int, stride: int, pad: int, group: int,
                relu: bool) -> tuple[GraphBuilder, np.ndarray, np.ndarray, np.ndarray]:
    x = RNG.standard_normal((1, c, h, h)).astype(np.float32)
    w = RNG.standard_normal((k, c // group, r, r)).astype(np.float32)
    b = RNG.standard_normal(k).astype(np.float32)
    gb = GraphBuilder("conv")
    y = gb.Conv(gb.input("x", x.shape), w, b, pads=(pad,) * 4, strides=(stride, stride), group=group)
    gb.output(gb.Relu(y) if relu else y)
    return gb, x, w, b


def _conv_magnitude(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int, group: int) -> np.ndarray:
    """The reference of the conv of absolute values plus |bias|: the error bound's scale."""
    gb = GraphBuilder("abs")
    gb.output(gb.Conv(gb.input("x", x.shape), np.abs(w), np.abs(b), pads=(pad,) * 4,
                      strides=(stride, stride), group=group))
    return next(iter(hetero.run_reference(gb.build(), {"x": np.abs(x)}).values())).astype(np.float64)


@pytest.mark.parametrize("c, k, h, r, stride, pad, group, relu, threads", [
    (32, 32, 7, 1, 1, 0, 4, True, 1),      # ShuffleNet's grouped 1x1 at 7x7: lanes = the whole row
    (24, 36, 40, 1, 1, 0, 3, False, 2),    # rows of 40 split into lane tiles of 10
    (8, 8, 13, 3, 1, 0, 8, True, 2),       # unpadded depthwise, 11 rows: a guarded row tile
    (12, 12, 14, 3, 2, 1, 12, False, 1),   # padded stride-2 depthwise (the plain schedule)
    (6, 12, 11, 3, 1, 1, 3, True, 2),      # padded grouped 3x3
])
def test_grouped_conv_matches_reference(c: int, k: int, h: int, r: int, stride: int, pad: int, group: int,
                                        relu: bool, threads: int) -> None:
    gb, x, w, b = _conv_graph(c, k, h, r, stride, pad, group, relu)
    got, want = _compiled(gb, {"x": x}, threads)
    bound = (c // group * r * r + 2) * EPS * _conv_magnitude(x, w, b, stride, pad, group) + 1e-30
    assert got.shape == want.shape
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


def test_grouped_1x1_conv_gets_the_vectorized_spatial_tile() -> None:
    gb, *_ = _conv_graph(32, 32, 7, 1, 1, 0, 4, True)
    func = _lowered(gb)
    (name,) = block_names(func.body)
    assert plan_tile(func, name) is None, "the micro-kernel now takes grouped conv; this test is moot"
    assert plan_window(func, name) is not None
    kinds = _kinds(default_schedule(func, 1).func)
    lanes = [n for n, kind in kinds.items() if kind is ForKind.VECTORIZED]
    rows = [n for n, kind in kinds.items() if kind is ForKind.UNROLLED]
    assert len(lanes) == 3 and len(rows) == 3  # init, update and store copies of the tile loops


def test_padded_window_keeps_the_plain_schedule() -> None:
    """A padded window's clamped, selected reads would make every lane a gather."""
    gb, *_ = _conv_graph(12, 12, 14, 3, 2, 1, 12, False)
    func = _lowered(gb)
    assert all(plan_window(func, name) is None for name in block_names(func.body))


@pytest.mark.skipif(not (host_triple().startswith("x86_64") and host_features().get("avx2")),
                    reason="checks x86 vector registers")
def test_grouped_conv_machine_code_uses_vector_fma() -> None:
    gb, *_ = _conv_graph(32, 32, 16, 1, 1, 0, 4, False)
    asm = CompiledKernel(default_schedule(_lowered(gb), 1).func, 1).assembly
    assert re.search(r"vfmadd\w+ps\s+[^\n]*[yz]mm", asm), "no vector FMA in the grouped conv"


@pytest.mark.parametrize("op, kernel, stride, pads, ceil_mode, extra, threads", [
    ("MaxPool", 3, 2, (1, 1, 1, 1), 0, {}, 1),
    ("MaxPool", 3, 2, (0, 0, 0, 0), 1, {}, 2),
    ("MaxPool", 2, 1, (0, 0, 0, 0), 0, {}, 1),                       # contiguous: spatial tile
    ("AveragePool", 3, 1, (1, 1, 1, 1), 0, {"count_include_pad": 0}, 2),
    ("AveragePool", 3, 2, (1, 0, 1, 0), 1, {"count_include_pad": 1}, 1),
    ("AveragePool", 2, 1, (0, 0, 0, 0), 0, {}, 2),                   # contiguous: spatial tile
])
def test_pool_matches_reference(op: str, kernel: int, stride: int, pads: tuple[int, ...], ceil_mode: int,
                                extra: dict[str, int], threads: int) -> None:
    x = RNG.standard_normal((2, 5, 13, 13)).astype(np.float32)
    gb = GraphBuilder("pool")
    gb.output(getattr(gb, op)(gb.input("x", x.shape), kernel_shape=(kernel, kernel), pads=pads,
                              strides=(stride, stride), ceil_mode=ceil_mode, **extra))
    got, want = _compiled(gb, {"x": x}, threads)
    assert got.shape == want.shape
    if op == "MaxPool":
        np.testing.assert_array_equal(got, want)
    else:
        magnitude = next(iter(hetero.run_reference(gb.build(), {"x": np.abs(x)}).values()))
        bound = (kernel * kernel + 2) * EPS * magnitude.astype(np.float64) + 1e-30
        assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


def test_contiguous_pool_gets_the_spatial_tile() -> None:
    gb = GraphBuilder("pool")
    gb.output(gb.MaxPool(gb.input("x", (1, 4, 12, 12)), kernel_shape=(2, 2)))
    func = _lowered(gb)
    assert all(plan_window(func, name) is not None for name in block_names(func.body))
    assert ForKind.VECTORIZED in _kinds(default_schedule(func, 1).func).values()


def test_broadcast_add_relu_matches_numpy_and_vectorizes() -> None:
    x = RNG.standard_normal((2, 6, 5, 12)).astype(np.float32)
    bias = RNG.standard_normal((6, 1, 1)).astype(np.float32)
    row = RNG.standard_normal(12).astype(np.float32)
    gb = GraphBuilder("ew")
    gb.output(gb.Relu(gb.Add(gb.Add(gb.input("x", x.shape), bias), row)))
    got, _ = _compiled(gb, {"x": x}, 2)
    np.testing.assert_array_equal(got, np.maximum(x + bias + row, 0.0))
    func = default_schedule(_lowered(gb), 1).func
    innermost = [s for s in walk(func.body) if isinstance(s, For) and not isinstance(s.body, For)]
    assert innermost and all(s.kind is ForKind.VECTORIZED for s in innermost)


@pytest.mark.parametrize("perm", [(0, 2, 1, 3), (0, 1, 3, 2)])
def test_transpose_matches_numpy_and_vectorizes(perm: tuple[int, ...]) -> None:
    """The innermost loop walks the output's last axis, so it is vectorized whichever
    input axis that reads (a gather where the transpose moves the last axis)."""
    x = RNG.standard_normal((2, 3, 8, 10)).astype(np.float32)
    gb = GraphBuilder("t")
    gb.output(gb.Transpose(gb.input("x", x.shape), perm=perm))
    got, _ = _compiled(gb, {"x": x}, 1)
    np.testing.assert_array_equal(got, x.transpose(perm))
    kinds = _kinds(default_schedule(_lowered(gb), 1).func)
    assert ForKind.VECTORIZED in kinds.values()


def test_small_blocks_stay_off_the_thread_pool() -> None:
    """Under PARALLEL_MIN_WORK iterations a block runs on the calling thread; above, in parallel."""
    small, large = GraphBuilder("small"), GraphBuilder("large")
    small.output(small.Relu(small.input("x", (1, 8, 16, 16))))
    large.output(large.Relu(large.input("x", (1, 64, 256, 256))))
    assert 8 * 16 * 16 < PARALLEL_MIN_WORK <= 64 * 256 * 256 // 16
    assert ForKind.PARALLEL not in _kinds(default_schedule(_lowered(small), 2).func).values()
    assert ForKind.PARALLEL in _kinds(default_schedule(_lowered(large), 2).func).values()
    assert ForKind.PARALLEL not in _kinds(default_schedule(_lowered(large), 1).func).values()


def test_a_strided_read_counts_its_work_per_lane() -> None:
    """A vectorized loop that reads with a stride (a transpose) loads lane by lane, so its
    work counts per element: a transpose with fewer vectors than PARALLEL_MIN_WORK but
    more elements runs in parallel, and a contiguous copy of the same size does not."""
    shape = (64, 512)
    assert shape[0] * shape[1] // 16 < PARALLEL_MIN_WORK <= shape[0] * shape[1]
    strided, contiguous = GraphBuilder("strided"), GraphBuilder("contiguous")
    strided.output(strided.Transpose(strided.input("x", shape), perm=(1, 0)))
    contiguous.output(contiguous.Relu(contiguous.input("x", shape)))
    transposed = _kinds(default_schedule(_lowered(strided), 2).func).values()
    assert ForKind.VECTORIZED in transposed and ForKind.PARALLEL in transposed
    assert ForKind.PARALLEL not in _kinds(default_schedule(_lowered(contiguous), 2).func).values()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got, _ = _compiled(strided, {"x": x}, 2)
    np.testing.assert_array_equal(got, x.T)
