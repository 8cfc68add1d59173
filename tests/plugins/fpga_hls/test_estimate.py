"""The fpga_hls estimate: hand-checkable loop nests against their hand calculations, the
interval limits (memory ports, loop-carried accumulations), the resources per operator
and per buffer, and the verdict on a design too large for its part.

Figures used in the hand calculations (hetero/plugins/fpga_hls/estimate.py): a load 1
cycle, float32 fmul 4 cycles / 3 DSP, fadd 4 cycles / 2 DSP, a store 1 cycle; int32
mul 3 cycles / 3 DSP, int add 1 cycle; a pipelined loop takes (trip - 1) x II + depth
cycles, a serial loop extent x (body + 1).
"""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir.buffer import Buffer, Partition
from hetero.core.ir.tir.expr import Var, cast, const
from hetero.core.ir.tir.stmt import Allocate, For, ForKind, PrimFunc, Store, annotate, seq
from hetero.errors import PluginError
from hetero.plugins.fpga_hls.estimate import (
    buffer_estimate, estimate, int_mul_dsp, op_cost,
)

F32 = np.dtype(np.float32)


def _pipelined(var: Var, extent: int, body, ii: int = 1) -> For:  # noqa: ANN001
    return For(var, extent, body, ForKind.PIPELINED, annotations=(("ii", ii),))


def test_pipelined_loop_is_trip_minus_one_times_ii_plus_depth() -> None:
    # y[i] = x[i] * 2 + 1 over 100 iterations: depth = load 1 + fmul 4 + fadd 4 + store 1 = 10;
    # cycles = (100 - 1) * 1 + 10 = 109; DSP = fmul 3 + fadd 2 = 5.
    x, y, i = Buffer("x", (100,), F32), Buffer("y", (100,), F32), Var("i")
    loop = _pipelined(i, 100, Store(y, (i,), x[i] * const(2.0, F32) + const(1.0, F32)))
    est = estimate(PrimFunc("f", (x, y), loop), "u50")
    (nest,) = est.nests
    (pipe,) = nest.pipelines
    assert (pipe.trip, pipe.ii, pipe.depth, pipe.cycles) == (100, 1, 10, 109)
    assert est.cycles == 109
    assert est.resources.dsp == 5


def test_serial_loops_multiply_their_bodies_plus_a_cycle_of_control() -> None:
    # for j in 4 (serial): the 100-iteration pipeline above: 4 * (109 + 1) = 440.
    x, y, i, j = Buffer("x", (4, 100), F32), Buffer("y", (4, 100), F32), Var("i"), Var("j")
    inner = _pipelined(i, 100, Store(y, (j, i), x[j, i] * const(2.0, F32) + const(1.0, F32)))
    est = estimate(PrimFunc("f", (x, y), For(j, 4, inner)), "u50")
    assert est.cycles == 4 * (109 + 1) == 440
    assert est.nests[0].loops == (("j", 4, "serial"), ("i", 100, "pipelined ii=1"))


def test_unrolled_loops_divide_the_trip_count_by_their_factor() -> None:
    # for i in 8, unroll_factor=4, body y[i] = x[i] * 2 (load 1 + fmul 4 + store 1 = 6 cycles):
    # ceil(8 / 4) = 2 trips of (6 + 1) cycles = 14; four fmul copies = 12 DSP.
    x, y, i = Buffer("x", (8,), F32), Buffer("y", (8,), F32), Var("i")
    loop = annotate(For(i, 8, Store(y, (i,), x[i] * const(2.0, F32))), "unroll_factor", 4)
    est = estimate(PrimFunc("f", (x, y), loop), "u50")
    assert est.cycles == 2 * (6 + 1) == 14
    assert est.resources.dsp == 4 * 3


def _four_reads_a_cycle(a_partitions: tuple[Partition, ...]) -> PrimFunc:
    """A: f32[64] in BRAM; for i in 16 pipelined: for j in 4 unrolled: B[i*4+j] = A[i*4+j] * 2,
    B partitioned into 4 banks so its writes never limit."""
    a = Buffer("A", (64,), F32, scope="bram")
    b = Buffer("B", (64,), F32, scope="bram")
    out = Buffer("out", (1,), F32)
    i, j = Var("i"), Var("j")
    body = For(j, 4, Store(b, (i * 4 + j,), a[i * 4 + j] * const(2.0, F32)), ForKind.UNROLLED)
    loop = _pipelined(i, 16, body)
    nest = Allocate(b, Allocate(a, loop, (("partition", a_partitions),) if a_partitions else ()),
                    (("partition", (Partition(0, "cyclic", 4),)),))
    return PrimFunc("f", (out,), seq(nest, Store(out, (const(0, np.int64),), b[0])))


def test_an_unpartitioned_bram_read_four_times_an_iteration_cannot_reach_ii_1() -> None:
    # 4 reads of one bank with 2 ports: II = ceil(4 / 2) = 2; depth = load 1 + fmul 4 + store 1 = 6;
    # cycles = (16 - 1) * 2 + 6 = 36.
    est = estimate(_four_reads_a_cycle(()), "u50")
    pipe = est.nests[0].pipelines[0]
    assert (pipe.ii_requested, pipe.ii, pipe.depth, pipe.cycles) == (1, 2, 6, 36)
    assert "ports of A" in pipe.limit and "4 accesses" in pipe.limit


def test_partitioning_the_array_to_the_unroll_factor_restores_ii_1() -> None:
    # cyclic(0, 4): each lane reads its own bank: II = 1, cycles = 15 + 6 = 21.
    est = estimate(_four_reads_a_cycle((Partition(0, "cyclic", 4),)), "u50")
    pipe = est.nests[0].pipelines[0]
    assert (pipe.ii, pipe.cycles) == (1, 21)
    # two banks give each bank two reads a cycle, which its two ports serve: II = 1 too.
    assert estimate(_four_reads_a_cycle((Partition(0, "cyclic", 2),)), "u50").nests[0].pipelines[0].ii == 1


def test_an_offchip_argument_has_one_read_a_cycle() -> None:
    # y[i] = x[2i] + x[2i+1] with x behind AXI: two reads on one channel, II = 2.
    x, y, i = Buffer("x", (32,), F32), Buffer("y", (16,), F32), Var("i")
    loop = _pipelined(i, 16, Store(y, (i,), x[i * 2] + x[i * 2 + 1]))
    pipe = estimate(PrimFunc("f", (x, y), loop), "u50").nests[0].pipelines[0]
    assert pipe.ii == 2 and "ports of x: 2 reads" in pipe.limit


def _dot(dtype: np.dtype, acc_shape: tuple[int, ...], acc_index) -> PrimFunc:  # noqa: ANN001
    """acc[idx] = acc[idx] + x[k] * w[k] for k in 32 pipelined; acc in registers."""
    x, w = Buffer("x", (32,), dtype), Buffer("w", (32,), dtype)
    y = Buffer("y", acc_shape, dtype)
    acc = Buffer("acc", acc_shape, dtype, scope="local")
    k = Var("k")
    idx = acc_index(k)
    loop = _pipelined(k, 32, Store(acc, idx, acc[idx] + x[k] * w[k]))
    return PrimFunc("f", (x, w, y), Allocate(acc, loop))


def test_a_float_accumulation_into_one_element_waits_for_the_adder() -> None:
    # the same element every iteration: II >= fadd latency 4; depth = load 1 + fmul 4 + fadd 4
    # + store 1 = 10; cycles = 31 * 4 + 10 = 134.
    pipe = estimate(_dot(F32, (1,), lambda k: (const(0, np.int64),)), "u50").nests[0].pipelines[0]
    assert (pipe.ii, pipe.depth, pipe.cycles) == (4, 10, 134)
    assert "recurrence on acc" in pipe.limit


def test_an_integer_accumulation_reaches_ii_1() -> None:
    # int32: add latency 1, so II = 1; depth = load 1 + mul 3 + add 1 + store 1 = 6; cycles = 31 + 6.
    est = estimate(_dot(np.dtype(np.int32), (1,), lambda k: (const(0, np.int64),)), "u50")
    pipe = est.nests[0].pipelines[0]
    assert (pipe.ii, pipe.cycles) == (1, 37)
    assert est.resources.dsp == 3  # the int32 multiplier; integer adds are LUTs


def test_an_accumulation_into_a_different_element_each_iteration_carries_no_dependence() -> None:
    pipe = estimate(_dot(F32, (32,), lambda k: (k,)), "u50").nests[0].pipelines[0]
    assert pipe.ii == 1 and pipe.limit == "requested"


def test_dsps_per_multiply_by_type() -> None:
    assert op_cost("mul", F32).dsp == 3 and op_cost("add", F32).dsp == 2
    assert op_cost("add", F32).latency == 4
    assert [int_mul_dsp(b) for b in (8, 16, 18, 24, 32)] == [1, 1, 1, 2, 3]
    assert op_cost("mul", np.dtype(np.int8)).dsp == 1
    assert op_cost("mul", np.dtype(np.int32), by_constant=True).dsp == 0


def test_bram_per_buffer_by_size_and_partitioning() -> None:
    big = Buffer("t", (1024,), F32, scope="bram")  # 32 Kb: two BRAM_18K
    assert buffer_estimate(big).bram_18k == 2
    # four banks of 8 Kb: one BRAM_18K each
    four = buffer_estimate(big, (Partition(0, "cyclic", 4),))
    assert (four.banks, four.bram_18k) == (4, 4)
    # complete partition: every element a register
    regs = buffer_estimate(Buffer("r", (16,), F32, scope="bram"), (Partition(0, "complete"),))
    assert (regs.bram_18k, regs.ff) == (0, 16 * 32)
    assert buffer_estimate(Buffer("u", (16384,), F32, scope="uram")).uram == 2  # 512 Kb over 288 Kb blocks
    assert buffer_estimate(Buffer("l", (16,), F32, scope="local")).ff == 16 * 32  # a small local array


def _wide_mac(lanes: int) -> PrimFunc:
    """acc[i] += x[i, j] * w[i, j] with j unrolled ``lanes`` wide: ``lanes`` fmul and fadd copies."""
    x = Buffer("x", (8, lanes), F32, scope="bram")
    y = Buffer("y", (8,), F32)
    acc = Buffer("acc", (8,), F32, scope="local")
    i, j = Var("i"), Var("j")
    body = For(j, lanes, Store(acc, (i,), acc[i] + x[i, j] * x[i, j]), ForKind.UNROLLED)
    loop = _pipelined(i, 8, body)
    complete = (("partition", (Partition(1, "complete"),)),)
    return PrimFunc("f", (y,), Allocate(acc, Allocate(x, loop, complete)))


def test_a_design_over_the_parts_dsps_is_reported_as_not_fitting() -> None:
    # 400 lanes x (fmul 3 + fadd 2) = 2000 DSP: more than the ZU7EV's 1728, fewer than the U280's
    # 9024; its 400 banks of x (one BRAM_18K each), LUTs and FFs fit the ZU7EV.
    est = estimate(_wide_mac(400), "zu7ev")
    assert est.resources.dsp == 2000 and est.resources.bram_18k == 400
    verdict = est.fits()
    assert not verdict and verdict.over == ("DSP 2000 of 1728 (116%)",)
    assert "f does not fit zu7ev" in verdict.message and "DSP 2000 of 1728" in verdict.message
    with pytest.raises(PluginError, match="does not fit zu7ev.*DSP 2000 of 1728"):
        est.require_fit()
    assert est.fits("u280").ok


def test_the_table_has_a_row_a_nest_and_the_total() -> None:
    est = estimate(_four_reads_a_cycle(()), "u50")
    rows = est.rows()
    assert rows[0] == ("nest", "cycles", "II", "depth", "DSP", "LUT", "FF")
    assert rows[1][:4] == ("f/i", "36", "2", "6")
    assert rows[-1][:2] == ("total", str(est.cycles))
    text = est.table()
    assert "A" in text and "fits u50" in text


def test_int8_products_widened_to_int32_take_one_dsp() -> None:
    # i32(x_i8) * i32(w_i8): HLS's bit-width analysis sees two 8-bit operands: one DSP48E2,
    # not the three of a full int32 product. (x - 2 is 9 bits: still one.)
    i32 = np.dtype(np.int32)
    x, w = Buffer("x", (16,), np.int8), Buffer("w", (16,), np.int8)
    y = Buffer("y", (16,), i32)
    i = Var("i")
    product = (cast(x[i], i32) - const(2, i32)) * cast(w[i], i32)
    est = estimate(PrimFunc("f", (x, w, y), _pipelined(i, 16, Store(y, (i,), product))), "u50")
    assert est.resources.dsp == 1
    z = Buffer("z", (16,), i32)
    wide = estimate(PrimFunc("g", (y, z), _pipelined(i, 16, Store(z, (i,), y[i] * y[i]))), "u50")
    assert wide.resources.dsp == 3


def test_float32_in_fixed_point_is_costed_as_integers_of_the_formats_width() -> None:
    from hetero.plugins.fpga_hls.fixed import FixedFormat, KernelFormats

    fixed = KernelFormats(FixedFormat(16, 6), {})
    # The float32 dot product in ap_fixed<16,6>: the add is a 16-bit integer add (1 cycle,
    # so II = 1 where float waits 4 cycles for its adder); the 16 x 16 product is 1 DSP
    # (3 for float32's fmul, and 2 for its fadd); depth = load 1 + mul 3 + add 1 + store 1 = 6.
    est = estimate(_dot(F32, (1,), lambda k: (const(0, np.int64),)), "u50", fixed)
    pipe = est.nests[0].pipelines[0]
    assert (pipe.ii, pipe.depth, pipe.cycles) == (1, 6, 37)
    assert est.resources.dsp == 1
    # A float32 buffer stores 16 bits an element: 2048 of them are 32 Kb, two BRAM_18K
    # (four in float32).
    t = Buffer("t", (2048,), F32, scope="bram")
    body = Allocate(t, Store(t, (const(0, np.int64),), const(1.0, F32)))
    func = PrimFunc("g", (), body)
    assert estimate(func, "u50", KernelFormats(FixedFormat(16, 6), {})).buffers[0].bram_18k == 2
    assert estimate(func, "u50").buffers[0].bram_18k == 4
