"""npu_sim's cycle model and race detection: documented formulas, overlap, missing WAITs."""

from dataclasses import replace

import numpy as np
import pytest
from plugins.npu_sim.npu_programs import matmul_inputs, matmul_program

from hetero.errors import SimulationError
from hetero.plugins.npu_sim.config import PRESETS, NpuConfig
from hetero.plugins.npu_sim.cycles import dma_runs
from hetero.plugins.npu_sim.isa import (
    Buf,
    DType,
    Engine,
    Gemm,
    Load,
    Signal,
    Store,
    Wait,
)
from hetero.plugins.npu_sim.program import Program
from hetero.plugins.npu_sim.sim import simulate

TINY = PRESETS["tiny-64k"]
FAST_DMA = replace(TINY, dma_latency_cycles=2)


DEFAULT = NpuConfig()


def _cycles(instrs: list, config: NpuConfig = DEFAULT) -> int:
    return simulate(Program(tuple(instrs), dram_size=4096), config, {}).stats.cycles


def test_load_cycles_are_latency_plus_bytes_over_bandwidth_plus_a_cycle_per_extra_run() -> None:
    contiguous = Load(Buf.INP, 0, 0, DType.INT8, (1, 1, 4, 8), (32, 32, 8, 1))
    strided = Load(Buf.INP, 0, 0, DType.INT8, (1, 1, 4, 8), (64, 64, 16, 1))
    padded = replace(strided, pad_lo=(0, 0, 1, 0), pad_hi=(0, 0, 1, 0))
    assert _cycles([contiguous]) == 100 + 32 // 16
    assert _cycles([strided]) == 100 + 32 // 16 + 3            # 4 rows: 3 extra runs
    assert _cycles([padded]) == 100 + 48 // 16 + 3             # 6×8 bytes written into SRAM
    assert _cycles([Store(Buf.OUT, 0, 0, DType.INT8, (1, 1, 4, 8), (32, 32, 8, 1))]) == 102


def test_dma_runs_merge_dimensions_from_the_innermost() -> None:
    assert dma_runs((2, 3, 4, 5), (60, 20, 5, 1), 1) == 1
    assert dma_runs((2, 3, 4, 5), (120, 20, 5, 1), 1) == 2
    assert dma_runs((1, 3, 4, 5), (0, 40, 10, 2), 1) == 60     # inner stride not 1 byte: every element a run
    assert dma_runs((1, 1, 4, 2), (0, 0, 8, 4), 4) == 1        # int32 rows


def test_gemm_cycles_are_fill_drain_plus_rows_and_weights_load_once() -> None:
    first = Gemm(0, 0, 0, 5, 8, 4, 8, 4, False)
    assert _cycles([first]) == 5 + 8 + 4 - 1 + 8
    assert _cycles([first, replace(first, acc_off=64)]) == (5 + 8 + 4 - 1 + 8) + (5 + 8 + 4 - 1)
    # A LOAD over the resident weights forces the array to load them again.
    reload = [first, Signal(Engine.COMPUTE, Engine.LOAD), Wait(Engine.COMPUTE, Engine.LOAD), Load(Buf.WGT, 0, 0, DType.INT8, (1, 1, 1, 32), (32, 32, 32, 1)),
              Signal(Engine.LOAD, Engine.COMPUTE), Wait(Engine.LOAD, Engine.COMPUTE), replace(first, acc_off=64)]
    stats = simulate(Program(tuple(reload), 4096), NpuConfig(), {}).stats
    assert stats.kind_cycles["GEMM"] == 2 * (5 + 8 + 4 - 1 + 8)


@pytest.mark.parametrize("config", [TINY, FAST_DMA], ids=["tiny", "fast-dma"])
def test_double_buffered_matmul_is_exact_and_faster_than_serialised(config: NpuConfig) -> None:
    inputs = matmul_inputs(4)
    expected = inputs["x"].astype(np.int32) @ inputs["w"].astype(np.int32)
    overlapped = simulate(matmul_program(4), config, inputs, timeline=True)
    serial = simulate(matmul_program(4, double_buffered=False), config, inputs)
    np.testing.assert_array_equal(overlapped.outputs["y"], expected)
    np.testing.assert_array_equal(serial.outputs["y"], expected)
    assert overlapped.stats.cycles < serial.stats.cycles
    stats = overlapped.stats
    assert stats.macs == 4 * 4 * 8 * 8
    assert stats.utilisation == pytest.approx(stats.macs / (stats.cycles * 64))
    assert stats.counts["GEMM"] == 4 and stats.counts["LOAD"] == 5
    assert stats.dma_bytes == 64 + 4 * 32 + 4 * 4 * 32
    assert stats.sram_high_water == {"inp": 64, "wgt": 64, "out": 0, "acc": 4 * 4 * 32}
    # A LOAD and a GEMM really overlap in the timeline.
    loads = [e for e in stats.timeline if e.engine == "load"]
    gemms = [e for e in stats.timeline if e.text.startswith("GEMM")]
    assert any(l.start < g.end and g.start < l.end for l in loads for g in gemms)
    assert [g.tag for g in gemms] == ["tile0", "tile1", "tile2", "tile3"]
    assert stats.cycles == max(e.end for e in stats.timeline)


def test_a_gemm_that_does_not_wait_for_its_load_is_a_race() -> None:
    with pytest.raises(SimulationError, match=r"race: GEMM #\d+ .* reads inp\[32:64\] before LOAD #\d+ "
                                              r"has finished writing it.*add a WAIT"):
        simulate(matmul_program(2, drop="raw"), TINY, matmul_inputs(2))


def test_a_load_that_refills_a_buffer_still_in_use_is_a_race() -> None:
    simulate(matmul_program(3), FAST_DMA, matmul_inputs(3))
    with pytest.raises(SimulationError, match=r"race: LOAD #\d+ .* overwrites inp\[0:32\] still read by GEMM #\d+"):
        simulate(matmul_program(3, drop="war"), FAST_DMA, matmul_inputs(3))


def test_a_wait_without_an_earlier_signal_is_an_error() -> None:
    with pytest.raises(SimulationError, match=r"WAIT #0 .*no SIGNAL load -> compute"):
        _cycles([Wait(Engine.LOAD, Engine.COMPUTE)])
