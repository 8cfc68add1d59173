"""npu_sim compiler: QConv and QMatMul on the systolic array, bit-exact against the reference."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.plugins.npu_sim.compiler import compile_graph
from hetero.plugins.npu_sim.config import PRESETS, NpuConfig
from hetero.plugins.npu_sim.sim import simulate


def run_both(graph: Graph, config: NpuConfig, seed: int = 0, **options: bool):
    """Compile and simulate ``graph``; return (npu outputs, reference outputs, stats)."""
    rng = np.random.default_rng(seed)
    inputs = {v.name: rng.integers(-128, 128, v.shape).astype(np.int8) for v in graph.inputs}
    program = compile_graph(graph, config, **options)
    result = simulate(program, config, inputs)
    return result.outputs, hetero.run_reference(graph, inputs), result.stats


def assert_exact(graph: Graph, config: NpuConfig | None = None, **options: bool):
    """The program's outputs equal the reference's bit for bit; the stats."""
    got, want, stats = run_both(graph, config or NpuConfig(), **options)
    for name, value in want.items():
        assert got[name].dtype == np.int8
        assert np.array_equal(got[name], value), name
    return stats


def qconv_graph(n: int, c: int, hw: tuple[int, int], m: int, kernel: int, *, stride: int = 1, pad: int = 0,
                group: int = 1, dilation: int = 1, bias: bool = True, per_channel: bool = True,
                seed: int = 1) -> Graph:
    """One random QConv with realistic multipliers (outputs spread over the int8 range)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("qconv")
    x = b.input("x", (n, c, *hw), "int8")
    w = rng.integers(-127, 128, (m, c // group, kernel, kernel)).astype(np.int8)
    fan_in = c // group * kernel * kernel
    scale = 1.0 / (150.0 * np.sqrt(fan_in))  # output std ≈ 40 LSB: few saturate
    count = m if per_channel else 1
    mults = [hetero.core.ir.ops.fixed_point.quantize_multiplier(scale * (1 + 0.1 * i)) for i in range(count)]
    y = b.QConv(x, w, rng.integers(-5000, 5000, m).astype(np.int32) if bias else None,
                strides=(stride, stride), pads=(pad,) * 4, dilations=(dilation, dilation), group=group,
                x_zero=int(rng.integers(-20, 20)), multiplier=tuple(mm for mm, _ in mults),
                shift=tuple(s for _, s in mults), y_zero=int(rng.integers(-10, 10)))
    b.output(y)
    return b.build()


@pytest.mark.parametrize("kernel,stride,pad", [(1, 1, 0), (3, 1, 1), (3, 2, 1), (7, 2, 3), (3, 1, 0)])
def test_qconv_kernels_strides_pads_are_exact(kernel: int, stride: int, pad: int) -> None:
    assert_exact(qconv_graph(1, 5, (11, 9), 6, kernel, stride=stride, pad=pad))


def test_qconv_channels_not_multiple_of_array() -> None:
    stats = assert_exact(qconv_graph(2, 45, (6, 5), 37, 3, pad=1, per_channel=False))
    useful = 2 * 6 * 5 * 37 * 45 * 9
    # Multi-row GEMMs also run the padded window's 2 extra columns per row (pitch 7 for 5 outputs).
    assert useful <= stats.macs <= useful * 7 // 5


def test_qconv_dilation_and_no_bias() -> None:
    assert_exact(qconv_graph(1, 4, (9, 9), 3, 3, dilation=2, pad=2, bias=False))


@pytest.mark.parametrize("group", [2, 8])
def test_qconv_grouped_and_depthwise(group: int) -> None:
    assert_exact(qconv_graph(1, 8, (7, 6), 8, 3, pad=1, stride=2, group=group))


def test_tiny_sram_still_exact_and_within_capacity() -> None:
    config = PRESETS["tiny-64k"]
    graph = qconv_graph(1, 40, (20, 20), 48, 3, pad=1)
    stats = assert_exact(graph, config)
    for buf in ("inp", "wgt", "out", "acc"):
        assert 0 < stats.sram_high_water[buf] <= config.capacity(buf) * (4 if buf == "acc" else 1)
    # The whole layer would not fit one 16 KiB input buffer: tiling happened.
    assert stats.counts["LOAD"] > 10


def test_double_buffering_is_faster_than_single() -> None:
    graph = qconv_graph(1, 16, (24, 24), 32, 3, pad=1)
    config = PRESETS["tiny-64k"]
    double = assert_exact(graph, config)
    single = assert_exact(graph, config, double_buffer=False)
    assert double.cycles < single.cycles


def test_every_instruction_is_tagged_with_its_node() -> None:
    graph = qconv_graph(1, 3, (5, 5), 4, 3)
    program = compile_graph(graph, NpuConfig())
    assert {i.tag for i in program.instrs} == {graph.nodes[0].name}


def _qmatmul_graph(shape: tuple[int, ...], k: int, n: int, *, bias: bool = True) -> Graph:
    rng = np.random.default_rng(3)
    b = GraphBuilder("qmm")
    a = b.input("a", (*shape, k), "int8")
    mults = [hetero.core.ir.ops.fixed_point.quantize_multiplier(1 / (150 * np.sqrt(k)) * (1 + i / n))
             for i in range(n)]
    y = b.QMatMul(a, rng.integers(-127, 128, (k, n)).astype(np.int8),
                  rng.integers(-3000, 3000, n).astype(np.int32) if bias else None,
                  a_zero=7, multiplier=tuple(m for m, _ in mults), shift=tuple(s for _, s in mults), y_zero=-3)
    b.output(y)
    return b.build()


@pytest.mark.parametrize("shape,k,n", [((5,), 70, 40), ((2, 3), 33, 10), ((1,), 1000, 17)])
def test_qmatmul_is_exact(shape: tuple[int, ...], k: int, n: int) -> None:
    assert_exact(_qmatmul_graph(shape, k, n))
    assert_exact(_qmatmul_graph(shape, k, n, bias=False), PRESETS["tiny-64k"])


def _gemms(program) -> list:
    return [i for i in program.instrs if type(i).__name__ == "Gemm"]


def test_multi_row_stride1_padded_conv_covers_the_tile_in_one_gemm_per_tap() -> None:
    graph = qconv_graph(1, 32, (14, 14), 32, 3, pad=1)
    assert_exact(graph)
    gemms = _gemms(compile_graph(graph, NpuConfig()))
    # Each GEMM covers r ≥ 2 whole output rows at a pitch of 16 (14 outputs + 2 padding columns): m = (r−1)·16 + 14.
    assert all(g.m >= 16 + 14 and (g.m - 14) % 16 == 0 for g in gemms)
    assert sum(g.m for g in gemms) >= 9 * 14 * 14


def test_one_by_one_conv_is_one_matmul_over_the_whole_tile() -> None:
    graph = qconv_graph(1, 32, (12, 12), 32, 1)
    assert_exact(graph)
    gemms = _gemms(compile_graph(graph, NpuConfig()))
    # No padding, stride 1: GEMM rows are exactly the tile's pixels, several whole rows of 12 at a time.
    assert sum(g.m for g in gemms) == 144
    assert all(g.m % 12 == 0 and g.m >= 24 for g in gemms)


@pytest.mark.parametrize("hw", [(9, 13), (7, 5), (11, 1)])
def test_odd_widths_and_channel_counts_are_exact(hw: tuple[int, int]) -> None:
    assert_exact(qconv_graph(1, 37, hw, 45, 3, pad=1))
    assert_exact(qconv_graph(1, 19, hw, 70, 3, stride=2, pad=1, seed=4))


def test_strided_one_by_one_conv_reads_a_subsampled_input() -> None:
    graph = qconv_graph(1, 40, (14, 14), 48, 1, stride=2)
    assert_exact(graph)
    assert max(g.m for g in _gemms(compile_graph(graph, NpuConfig()))) == 49


@pytest.mark.parametrize("kernel,stride,pad", [(3, 1, 1), (1, 1, 0), (3, 2, 1), (5, 1, 2)])
def test_tiny_preset_multi_row_tiles_are_exact_and_fit(kernel: int, stride: int, pad: int) -> None:
    config = PRESETS["tiny-64k"]
    stats = assert_exact(qconv_graph(1, 20, (23, 29), 27, kernel, stride=stride, pad=pad), config)
    for buf in ("inp", "wgt", "out", "acc"):
        assert stats.sram_high_water[buf] <= config.capacity(buf) * (4 if buf == "acc" else 1)


def test_multi_row_gemms_beat_one_gemm_per_row() -> None:
    graph = qconv_graph(1, 64, (14, 14), 64, 3, pad=1)
    stats = assert_exact(graph)
    # One GEMM per output row would cost 14·(14 + 63) + 32 cycles per tap, column chunk and input-channel chunk:
    # fill and drain (k + n − 1 = 63) each row, one weight load (k = 32).
    per_row = 2 * 9 * 2 * (14 * (14 + 63) + 32)
    assert stats.engine_busy["compute"] < per_row / 2


@pytest.mark.parametrize("c,kernel,stride,pad,dilation", [(3, 7, 2, 3, 1), (3, 3, 2, 1, 1), (4, 3, 1, 2, 2),
                                                          (5, 5, 1, 0, 1)])
def test_few_channel_conv_packs_a_kernel_row_into_each_gemm(c: int, kernel: int, stride: int, pad: int,
                                                            dilation: int) -> None:
    graph = qconv_graph(2, c, (17, 15), 40, kernel, stride=stride, pad=pad, dilation=dilation)
    assert_exact(graph)
    assert {g.k for g in _gemms(compile_graph(graph, NpuConfig()))} == {c * kernel}


def test_tap_packing_on_the_tiny_preset_is_exact_and_fits() -> None:
    config = PRESETS["tiny-64k"]
    graph = qconv_graph(1, 2, (30, 27), 11, 3, stride=2, pad=1)
    stats = assert_exact(graph, config)
    assert {g.k for g in _gemms(compile_graph(graph, config))} == {6}
    for buf in ("inp", "wgt", "out", "acc"):
        assert stats.sram_high_water[buf] <= config.capacity(buf) * (4 if buf == "acc" else 1)
