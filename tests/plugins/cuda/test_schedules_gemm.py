"""The cuda backend's tiled schedule for matrix products: shared-memory tiles and register
tiles that keep each function's meaning (the tensor-IR interpreter runs the block's
threads together, meeting at the barriers), and kernels that ptxas assembles for sm_80
and sm_90 with their tiles in shared memory and their accumulators in registers.

Meaning is checked two ways. Against the interpreter on the unscheduled lowering the
results are equal bit for bit: each output still sums its K terms in order, one at a
time (the tiles change where the operands are read from, not the order of the
additions; terms past a ragged K are skipped, not added as zeros). Against numpy's
matmul the tolerance is float32's for a reordered sum: numpy blocks its sums, so the
two differ by rounding, about K * 2**-24 of the terms' magnitudes (K <= 64, standard
normal operands: under 1e-5), checked at 1e-4.

Interpreter work is kept under about 100k multiply-adds a test: the 64 x 64 tile is
interpreted over K = 24 (two reduction steps, the second ragged), the classifier's Gemm
at K = 64; their full sizes (64 x 64 x 64, 1 x 512 x 1000) and 1024 x 1024 x 1024
are assembled only.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import Allocate, Barrier, For, ForKind, PrimFunc, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.core.lower import lower_group, lower_node
from hetero.core.schedule import Schedule
from hetero.core.schedule.tree import block_names
from hetero.plugins.cuda.build import build_kernel
from hetero.plugin import GPU_PRESETS, GpuSpec
from hetero.plugins.cuda.ptxas import INSTALL_HINT, PtxasReport, assemble, check_limits, find_ptxas
from hetero.plugins.cuda.render import render_ptx
from hetero.plugins.cuda.schedules import default_schedule
from hetero.plugins.cuda.schedules_gemm import GemmTiling, _matrix_view, choose_tiling, plan_gemm, schedule_gemm

#: One multiprocessor: the grid need not fill a device, so small products get the full
#: 64 x 64 tile of 16 x 16 threads with 4 x 4 registers each.
ONE_SM = replace(GPU_PRESETS["a100"], sms=1)

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)


def _lowered(op: str, *shapes: tuple[int, ...], **attrs: object) -> PrimFunc:
    """The lowering of one ``op`` node ``n`` on inputs ``a``, ``b``... of ``shapes``."""
    g = GraphBuilder("g")
    g.output(getattr(g, op)(*(g.input("abc"[k], shape) for k, shape in enumerate(shapes)), name="n", **attrs))
    return lower_node(g.build().node("n"))


def _matmul(a: tuple[int, ...], b: tuple[int, ...]) -> PrimFunc:
    return _lowered("MatMul", a, b)


def _gemm(m: int, k: int, n: int, **attrs: object) -> PrimFunc:
    """A classifier's Gemm: ``a`` (m x k) by the transposed weight ``b`` (n x k), plus bias ``c``."""
    g = GraphBuilder("g")
    g.output(g.Gemm(g.input("a", (m, k)), g.input("b", (n, k)), g.input("c", (n,)), name="n", transB=1,
                    **attrs))
    return lower_node(g.build().node("n"))


def _conv(x: tuple[int, ...], w: tuple[int, ...], **attrs: object) -> PrimFunc:
    g = GraphBuilder("g")
    g.output(g.Conv(g.input("x", x), g.input("w", w), g.input("bias", (w[0],)), name="n", **attrs))
    return lower_node(g.build().node("n"))


def _tiled(func: PrimFunc, spec: GpuSpec) -> Schedule:
    sch = Schedule(func)
    assert schedule_gemm(sch, "n", spec)
    verify_func(sch.func)
    return sch


def _inputs(func: PrimFunc) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {b.name: rng.standard_normal(b.shape).astype(np.float32) if b.name != "n"
            else np.zeros(b.shape, np.float32) for b in func.params}


def _bound(func: PrimFunc) -> dict[str, int]:
    return {s.thread_axis: s.extent for s in walk(func.body)
            if isinstance(s, For) and s.kind is ForKind.THREAD_BINDING}


def _shared(func: PrimFunc) -> list[Allocate]:
    return [s for s in walk(func.body) if isinstance(s, Allocate) and s.buffer.scope == "shared"]


def _assembled(func: PrimFunc, spec: GpuSpec) -> PtxasReport:
    """The tiled kernel assembled for ``spec``, within its limits (as build_kernel checks)."""
    kernel = render_ptx(_tiled(func, spec).func, arch=spec.arch)
    report = assemble(kernel.ptx, spec.arch, kernel.name)
    check_limits(report, kernel.launch.threads_per_block, spec.max_registers_per_thread, spec.shared_per_block,
                 registers_per_block=spec.registers_per_sm)
    assert report.shared_bytes == kernel.shared_bytes
    return report


MEANING = [
    pytest.param(_matmul((64, 24), (24, 64)), ONE_SM, id="64x64 tile, K=24 in two steps"),
    pytest.param(_matmul((37, 29), (29, 53)), ONE_SM, id="37x29x53 ragged in one tile"),
    pytest.param(_matmul((37, 29), (29, 53)), GPU_PRESETS["a100"], id="37x29x53 ragged over many blocks"),
    pytest.param(_gemm(1, 64, 1000, alpha=0.5, beta=2.0), GPU_PRESETS["h200"], id="1x64x1000 Gemm transB bias"),
    pytest.param(_matmul((2, 32, 48), (2, 48, 16)), ONE_SM, id="batched 2x32x48x16"),
    pytest.param(_matmul((2, 8, 16), (16, 24)), GPU_PRESETS["h100"], id="batched A, broadcast B"),
    pytest.param(_matmul((2, 3, 8, 16), (1, 3, 16, 8)), ONE_SM, id="two batch dimensions, one broadcast"),
    pytest.param(_conv((2, 3, 6, 6), (8, 3, 3, 3), pads=[1, 1, 1, 1]), ONE_SM, id="conv 3x3 padded"),
    pytest.param(_conv((1, 4, 7, 7), (6, 4, 3, 3), strides=[2, 2]), GPU_PRESETS["a100"], id="conv strided"),
]


@pytest.mark.parametrize("func, spec", MEANING)
def test_tiled_products_keep_their_meaning(func: PrimFunc, spec: GpuSpec) -> None:
    scheduled = _tiled(func, spec).func
    inputs = _inputs(func)
    want = run_func(func, inputs)["n"]
    got = run_func(scheduled, inputs)["n"]
    np.testing.assert_array_equal(got, want)
    if "a" in inputs:  # a matmul or Gemm: numpy as well
        a, b = inputs["a"], inputs["b"]
        ref = a @ b if "c" not in inputs else 0.5 * (a @ b.T) + 2.0 * inputs["c"]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_the_block_stages_its_tiles_in_shared_memory_between_barriers() -> None:
    sch = _tiled(_matmul((64, 24), (24, 64)), ONE_SM)
    assert _bound(sch.func) == {"blockIdx.y": 1, "blockIdx.x": 1, "threadIdx.y": 16, "threadIdx.x": 16}
    assert sorted(a.buffer.shape for a in _shared(sch.func)) == [(16, 64), (64, 16)]
    [acc] = [s for s in walk(sch.func.body) if isinstance(s, Allocate) and s.buffer.scope == "local"]
    assert acc.buffer.shape == (4, 4)
    [k_outer] = [s for s in walk(sch.func.body) if isinstance(s, For) and s.var.name == "n_k_0"]
    assert k_outer.extent == 2 and sum(isinstance(s, Barrier) for s in walk(k_outer)) == 2


def test_the_trace_records_the_tiling_and_the_staging() -> None:
    sch = _tiled(_matmul((2, 32, 48), (2, 48, 16)), ONE_SM)
    kinds = [i.kind for i in sch.trace.instructions]
    assert kinds[:7] == ["cache_operand", "cache_operand", "split", "split", "reorder", "tile_accumulator", "split"]
    assert kinds.count("compute_at") == 2 and "fuse" in kinds
    assert [i.decisions["factors"] for i in sch.trace.instructions if i.kind == "split"][:3] == [
        [1, 4, 8], [1, 4, 4], [3, 16]]  # rows 4 x 8 threads, columns 4 x 4 threads, K in steps of 16
    assert [i.attrs["thread_axis"] for i in sch.trace.instructions if i.kind == "bind"] == [
        "blockIdx.z", "blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"] + [
        "threadIdx.y", "threadIdx.x"] * 2  # each copy spread over the block's threads


@pytest.mark.parametrize("func, spec", MEANING)
def test_the_trace_replays_to_the_staged_kernel(func: PrimFunc, spec: GpuSpec) -> None:
    sch = _tiled(func, spec)
    replayed = sch.trace.apply(func)
    assert str(replayed) == str(sch.func) and replayed == sch.func
    assert len(_shared(replayed)) == 2


@needs_ptxas
@pytest.mark.parametrize("func", [_matmul((1024, 1024), (1024, 1024)), _gemm(1, 512, 1000),
                                  _conv((1, 16, 14, 14), (32, 16, 3, 3), pads=[1, 1, 1, 1])],
                         ids=["1024^3", "Gemm 1x512x1000", "conv"])
def test_the_replayed_kernel_assembles_with_its_tiles_in_shared_memory(func: PrimFunc) -> None:
    spec = GPU_PRESETS["h200"]
    sch = _tiled(func, spec)
    kernel = render_ptx(sch.trace.apply(func), arch=spec.arch)
    report = assemble(kernel.ptx, spec.arch, kernel.name)
    t = choose_tiling(*_sizes(func), spec)
    assert t is not None and report.shared_bytes == kernel.shared_bytes == t.shared_bytes
    assert report.spill_stores_bytes == report.spill_loads_bytes == report.local_bytes == 0


def _sizes(func: PrimFunc) -> tuple[int, int, int, int]:
    """M, N, K and the batch of the matrix view of ``func``'s block ``n``."""
    sch = Schedule(func)
    plan = _matrix_view(sch, "n")
    assert plan is not None
    return plan.row.extent, plan.col.extent, plan.red.extent, 1


@pytest.mark.parametrize("func", [
    _conv((1, 4, 6, 6), (4, 2, 3, 3), group=2),
    _lowered("ReduceSum", (4, 6), axes=[1]),
    _matmul((8,), (8, 4)),
], ids=["grouped conv", "ReduceSum", "vector-matrix (one spatial loop)"])
def test_other_stages_are_left_to_the_default_binding(func: PrimFunc) -> None:
    sch = Schedule(func)
    assert plan_gemm(func, "n") is None
    assert not schedule_gemm(sch, "n", GPU_PRESETS["a100"])
    assert sch.func == func and len(sch.trace) == 0


def test_tiles_adapt_to_the_problem_and_the_device() -> None:
    h200 = GPU_PRESETS["h200"]
    assert choose_tiling(1024, 1024, 1024, 1, h200) == GemmTiling(tm=4, tn=4, ty=16, tx=16, bk=16)
    one_row = choose_tiling(1, 1000, 512, 1, h200)
    assert one_row is not None and one_row.ty == 1 and one_row.bm == 1  # no wasted rows for batch 1
    assert choose_tiling(64, 64, 4, 1, ONE_SM).bk == 4  # no more reduction steps than K
    wide = choose_tiling(1, 4096, 512, 1, ONE_SM)
    assert wide is not None and wide.bn == 1024 and wide.bk == 8  # (1 + 1024) x 16 floats exceed 48 KiB
    small_shared = replace(ONE_SM, shared_per_block=1024)
    assert choose_tiling(64, 64, 64, 1, small_shared).bk == 2
    assert choose_tiling(64, 64, 64, 1, replace(ONE_SM, shared_per_block=256)) is None


@needs_ptxas
@pytest.mark.parametrize("device", ["a100", "h200"])
@pytest.mark.parametrize("func", [
    _matmul((1024, 1024), (1024, 1024)),
    _matmul((64, 64), (64, 64)),
    _matmul((37, 29), (29, 53)),
    _gemm(1, 512, 1000),
    _matmul((2, 32, 48), (2, 48, 16)),
    _conv((1, 16, 14, 14), (32, 16, 3, 3), pads=[1, 1, 1, 1]),
], ids=["1024^3", "64^3", "37x29x53", "Gemm 1x512x1000", "batched", "conv"])
def test_tiled_kernels_assemble_with_shared_tiles_and_no_spills(func: PrimFunc, device: str) -> None:
    spec = GPU_PRESETS[device]
    report = _assembled(func, spec)
    assert report.arch == spec.arch and report.shared_bytes > 0
    assert report.spill_stores_bytes == report.spill_loads_bytes == report.local_bytes == 0
    assert 0 < report.registers <= spec.max_registers_per_thread


@needs_ptxas
def test_the_default_schedule_tiles_products_and_build_kernel_assembles_them() -> None:
    func = _gemm(1, 512, 1000)
    assert "tile_accumulator" in [i.kind for i in default_schedule(func, GPU_PRESETS["h100"]).trace.instructions]
    built = build_kernel(func, GPU_PRESETS["h100"])
    assert built.kernel.shared_bytes > 0 and built.report.spill_stores_bytes == 0
    relu = default_schedule(_lowered("Relu", (4, 6)), GPU_PRESETS["h100"])
    assert "tile_accumulator" not in [i.kind for i in relu.trace.instructions]


def test_a_convolution_whose_epilogue_adds_its_own_input_still_stages_its_tiles() -> None:
    # ResNet's identity shortcut: relu(conv(x) + x) reads x as the product's operand and in
    # the epilogue; the operand staged is the product's.
    b = GraphBuilder("g")
    x = b.input("x", (1, 4, 6, 6))
    w = np.random.default_rng(0).standard_normal((4, 4, 3, 3)).astype(np.float32)
    b.output(b.Relu(b.Add(b.Conv(x, w, name="conv", pads=[1, 1, 1, 1]), x, name="add"), name="relu"))
    graph = b.build()
    func = lower_group([graph.node("conv"), graph.node("add"), graph.node("relu")], "block")
    [stage] = block_names(func.body)
    sch = Schedule(func)
    assert schedule_gemm(sch, stage, ONE_SM)
    assert len(_shared(sch.func)) == 2
    inputs = _inputs(func)
    out = func.params[-1].name
    np.testing.assert_array_equal(run_func(sch.func, inputs)[out], run_func(func, inputs)[out])
    assert str(sch.trace.apply(func)) == str(sch.func)
