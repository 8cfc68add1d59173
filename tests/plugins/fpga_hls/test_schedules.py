"""The fpga_hls default schedules: each op family keeps its meaning exactly (the tensor-IR
interpreter on the scheduled function against the unscheduled lowering, bit for bit:
every output still adds its terms one at a time in the original order), and sets the
pipelining, unrolling and partitioning the estimate reads, within the DSP and BRAM budgets.

Shapes are small: the interpreter runs a Python loop per iteration, and each test stays
under about 10k multiply-adds. Integers (the int8 convolution) are exact by nature.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.core.ir.tir.expr import Expr, Load, Var
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import Allocate, For, ForKind, PrimFunc, Stmt, Store, walk
from hetero.core.ir.tir.visit import exprs_of
from hetero.core.ir.tir.verify import verify_func
from hetero.core.lower import lower_group, lower_node
from hetero.plugins.fpga_hls.device import PRESETS
from hetero.plugins.fpga_hls.estimate import estimate
from hetero.plugins.fpga_hls.schedules import default_schedule


def _lowered(op: str, shapes: list[tuple[int, ...]], epilogue: tuple[str, dict] | None = None,
             **attrs: object) -> PrimFunc:
    """One ``op`` node on inputs of ``shapes`` (and an epilogue node fused after it)."""
    g = GraphBuilder("g")
    inputs = [g.input("abcd"[k], s) for k, s in enumerate(shapes)]
    out = getattr(g, op)(*inputs, name="n", **attrs)
    if epilogue is not None:
        out = getattr(g, epilogue[0])(out, name="e", **epilogue[1])
    g.output(out)
    graph = g.build()
    if epilogue is None:
        return lower_node(graph.node("n"))
    return lower_group([graph.node("n"), graph.node("e")], "fused")


FAMILIES = {
    "conv2d": lambda: _lowered("Conv", [(1, 4, 6, 6), (8, 4, 3, 3)], pads=[1, 1, 1, 1]),
    "conv2d_bias_relu": lambda: _lowered("Conv", [(1, 4, 6, 6), (8, 4, 3, 3), (8,)], ("Relu", {}),
                                         pads=[1, 1, 1, 1]),
    "conv2d_clip": lambda: _lowered("Conv", [(1, 3, 5, 5), (4, 3, 3, 3)], ("Clip", {"min": 0.0, "max": 6.0}),
                                    strides=[2, 2], pads=[1, 1, 1, 1]),
    "depthwise": lambda: _lowered("Conv", [(1, 4, 6, 6), (4, 1, 3, 3)], pads=[1, 1, 1, 1], group=4),
    "matmul": lambda: _lowered("MatMul", [(6, 10), (10, 7)]),
    "gemm": lambda: _lowered("Gemm", [(3, 16), (9, 16), (9,)], transB=1),
    "gemm_relu": lambda: _lowered("Gemm", [(3, 16), (9, 16), (9,)], ("Relu", {}), transB=1),
    "maxpool": lambda: _lowered("MaxPool", [(1, 4, 6, 6)], kernel_shape=[2, 2], strides=[2, 2]),
    "avgpool": lambda: _lowered("AveragePool", [(1, 4, 6, 6)], kernel_shape=[3, 3], strides=[1, 1]),
    "global_avgpool": lambda: _lowered("GlobalAveragePool", [(1, 4, 6, 6)]),
    "add": lambda: _lowered("Add", [(2, 3, 4), (4,)]),
    "relu": lambda: _lowered("Relu", [(2, 3, 4)]),
    "clip": lambda: _lowered("Clip", [(2, 3, 4)], min=0.0, max=6.0),
    "add_relu": lambda: _lowered("Add", [(2, 3, 4), (2, 3, 4)], ("Relu", {})),
}
REDUCTIONS = ("conv2d", "conv2d_bias_relu", "conv2d_clip", "depthwise", "matmul", "gemm", "gemm_relu",
              "maxpool", "avgpool", "global_avgpool")


def _inputs(func: PrimFunc, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {b.name: rng.standard_normal(b.shape).astype(b.dtype) for b in func.params}


def _assert_same_meaning(func: PrimFunc, scheduled: PrimFunc) -> None:
    arrays = _inputs(func)
    want, got = run_func(func, arrays), run_func(scheduled, arrays)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def _loops(func: PrimFunc) -> list[For]:
    return [s for s in walk(func.body) if isinstance(s, For)]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_default_schedule_keeps_the_meaning_exactly(family: str) -> None:
    func = FAMILIES[family]()
    sch = default_schedule(func, "u50")
    verify_func(sch.func)
    _assert_same_meaning(func, sch.func)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_loop_nest_is_pipelined_and_reaches_ii_1(family: str) -> None:
    sch = default_schedule(FAMILIES[family](), "u50")
    pipelined = [l for l in _loops(sch.func) if l.kind is ForKind.PIPELINED]
    assert pipelined and all(l.annotation("ii") == 1 for l in pipelined)
    for l in _loops(sch.func):  # every serial loop has a pipelined loop inside it
        if l.kind is ForKind.SERIAL:
            assert any(s.kind is ForKind.PIPELINED for s in walk(l.body) if isinstance(s, For)), l.var.name
    est = estimate(sch, "u50")
    assert all(p.ii == 1 for n in est.nests for p in n.pipelines), est.table()
    assert est.fits().ok


@pytest.mark.parametrize("family", REDUCTIONS)
def test_reductions_unroll_inside_the_pipeline_and_partition_what_the_lanes_read(family: str) -> None:
    sch = default_schedule(FAMILIES[family](), "u50")
    (main,) = [l for l in _loops(sch.func) if l.kind is ForKind.PIPELINED
               and any(s.kind is ForKind.UNROLLED for s in walk(l.body) if isinstance(s, For))] or [None]
    if main is None:  # a pool with no reuse keeps one term a cycle and reads each input once
        assert family == "maxpool"
        return
    unrolled = {s.var: s.extent for s in walk(main.body) if isinstance(s, For)}
    assert all(s.kind is ForKind.UNROLLED for s in walk(main.body) if isinstance(s, For))
    allocs = {s.buffer.name: s for s in walk(sch.func.body) if isinstance(s, Allocate)}
    for alloc in allocs.values():
        if alloc.buffer.scope not in ("bram", "uram"):
            continue
        # every partitioned dimension has as many banks as lanes walk it (at most its extent)
        reads = [e for s in walk(main.body) for e in _reads(s) if e.buffer == alloc.buffer]
        assert reads, alloc.buffer.name
        for p in alloc.partitions:
            lanes = max(math.prod(n for v, n in unrolled.items() if v in _vars(r.indices[p.dim])) for r in reads)
            assert p.kind == "cyclic" and p.factor == min(lanes, alloc.buffer.shape[p.dim]) > 1


def _reads(stmt: Stmt) -> list[Load]:
    """The loads of one store (none for other statements)."""
    if not isinstance(stmt, Store):
        return []
    return [e for x in (stmt.value, *stmt.indices) for e in exprs_of(x) if isinstance(e, Load)]


def _vars(expr: Expr) -> set[Var]:
    return {e for e in exprs_of(expr) if isinstance(e, Var)}


def test_conv_unrolls_its_whole_reduction_and_caches_both_operands_in_partitioned_bram() -> None:
    sch = default_schedule(FAMILIES["conv2d"](), "u50")
    allocs = {s.buffer.name: s for s in walk(sch.func.body) if isinstance(s, Allocate)}
    # 4 channels x 3 x 3 = 36 lanes: 180 DSPs, well within the U50's budget
    lanes = {l.var.name: l.extent for l in _loops(sch.func) if l.kind is ForKind.UNROLLED}
    assert lanes == {"n_rc": 4, "n_k0": 3, "n_k1": 3}
    assert [(p.dim, p.factor) for p in allocs["a_bram"].partitions] == [(1, 4), (2, 3), (3, 3)]
    assert [(p.dim, p.factor) for p in allocs["b_bram"].partitions] == [(1, 4), (2, 3), (3, 3)]
    kinds = [ins.kind for ins in sch.trace.instructions]
    for kind in ("tile_accumulator", "reorder", "fuse", "pipeline", "unroll", "cache_read", "annotate"):
        assert kind in kinds


def test_the_dsp_budget_bounds_the_unroll_factor_of_the_channel_loop() -> None:
    func = _lowered("Conv", [(1, 8, 5, 5), (4, 8, 3, 3)], pads=[1, 1, 1, 1])
    # float32 multiply-add = fmul 3 + fadd 2 DSPs: a budget of 90 allows 18 lanes, two channels of 3 x 3
    sch = default_schedule(func, "u50", dsp_budget=90)
    lanes = {l.var.name: l.extent for l in _loops(sch.func) if l.kind is ForKind.UNROLLED}
    assert lanes == {"n_rc_1": 2, "n_k0": 3, "n_k1": 3}
    assert estimate(sch, "u50").resources.dsp <= 90
    allocs = {s.buffer.name: s for s in walk(sch.func.body) if isinstance(s, Allocate)}
    assert [(p.dim, p.factor) for p in allocs["a_bram"].partitions] == [(1, 2), (2, 3), (3, 3)]
    _assert_same_meaning(func, sch.func)
    # the whole reduction (72 lanes) fits the default budget
    wide = {l.var.name: l.extent for l in _loops(default_schedule(func, "u50").func) if l.kind is ForKind.UNROLLED}
    assert math.prod(wide.values()) == 72


def test_without_on_chip_memory_the_operands_stay_offchip_and_their_ports_limit_the_interval() -> None:
    func = FAMILIES["conv2d"]()
    sch = default_schedule(func, "u50", bram_budget=0, uram_budget=0, dsp_budget=45)
    assert "cache_read" not in [ins.kind for ins in sch.trace.instructions]
    assert not [s for s in walk(sch.func.body) if isinstance(s, Allocate) and s.buffer.scope == "bram"]
    est = estimate(sch, "u50")
    limits = [p.limit for n in est.nests for p in n.pipelines if p.ii > 1]
    assert any(lim.startswith("ports of ") for lim in limits), est.table()
    _assert_same_meaning(func, sch.func)


def test_the_trace_replays_to_the_same_function() -> None:
    func = FAMILIES["conv2d_bias_relu"]()
    sch = default_schedule(func, "u50")
    assert sch.trace.apply(func) == sch.func


@pytest.mark.parametrize("part", sorted(PRESETS))
def test_default_schedules_fit_every_part(part: str) -> None:
    for family in ("conv2d", "gemm", "avgpool"):
        assert estimate(default_schedule(FAMILIES[family](), part), part).fits().ok


def test_an_int8_convolution_keeps_its_meaning_and_takes_a_dsp_a_lane() -> None:
    multiplier, shift = quantize_multiplier(0.01)
    g = GraphBuilder("g")
    x, w = g.input("x", (1, 4, 6, 6), "int8"), g.input("w", (8, 4, 3, 3), "int8")
    g.output(g.QConv(x, w, name="n", pads=(1, 1, 1, 1), x_zero=2, y_zero=1, multiplier=(multiplier,),
                     shift=(shift,)))
    func = lower_node(g.build().node("n"))
    sch = default_schedule(func, "zu7ev")
    rng = np.random.default_rng(0)
    arrays = {b.name: rng.integers(-128, 128, b.shape).astype(b.dtype) for b in func.params}
    want, got = run_func(func, arrays), run_func(sch.func, arrays)
    np.testing.assert_array_equal(got["n"], want["n"])
    lanes = math.prod(l.extent for l in _loops(sch.func) if l.kind is ForKind.UNROLLED)
    assert lanes == 36
    assert estimate(sch, "zu7ev").resources.dsp == lanes  # one 9 x 8-bit product a DSP48E2
