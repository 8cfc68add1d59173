"""npu_sim's declared device: defaults, presets, backend options, the memory hierarchy."""

import pytest

from hetero.errors import PluginError
from hetero.plugins.npu_sim.config import KIB, PRESETS, NpuConfig


def test_default_is_the_edge_preset_with_512_kib_of_scratchpad() -> None:
    cfg = NpuConfig()
    assert PRESETS["edge-512k"] == cfg
    assert cfg.sram_bytes == 512 * KIB and cfg.acc_bytes == 64 * KIB
    assert cfg.peak_macs_per_cycle == 32 * 32
    assert cfg.capacity("acc") == 16 * KIB and cfg.capacity("wgt") == 256 * KIB
    assert cfg.cycles_to_seconds(1000) == pytest.approx(1e-6)


def test_memory_hierarchy_is_dram_then_sram_then_accumulator_for_every_preset() -> None:
    for cfg in PRESETS.values():
        hierarchy = cfg.memory_hierarchy()
        assert [level.name for level in hierarchy] == ["DRAM", "SRAM", "ACC"]
        assert hierarchy.level("SRAM").capacity_bytes == cfg.sram_bytes
        assert hierarchy.level("ACC").capacity_bytes == cfg.acc_bytes
        assert hierarchy.outermost.bandwidth_gbps == pytest.approx(cfg.dma_gbps)
        assert hierarchy.outermost.latency_ns == pytest.approx(cfg.dma_latency_cycles / cfg.clock_ghz)


def test_from_options_starts_from_the_preset_and_ignores_unknown_keys() -> None:
    cfg = NpuConfig.from_options({
        "npu_preset": "tiny-64k", "npu_array": "16x8", "npu_clock_ghz": 0.5, "npu_dma_gbps": 8,
        "npu_sram_kib": 256, "npu_dma_latency_cycles": 20, "npu_vector_lanes": 16, "opt_level": 3,
    })
    assert (cfg.array_rows, cfg.array_cols) == (16, 8)
    assert cfg.clock_ghz == 0.5 and cfg.dma_bytes_per_cycle == 16 and cfg.dma_gbps == 8
    assert (cfg.inp_bytes, cfg.wgt_bytes, cfg.out_bytes, cfg.acc_bytes) == (64 * KIB, 128 * KIB, 64 * KIB, 32 * KIB)
    assert cfg.dma_latency_cycles == 20 and cfg.vector_lanes == 16
    assert NpuConfig.from_options({}) == NpuConfig()
    assert NpuConfig.from_options({"npu_array": 64}).array_cols == 64


@pytest.mark.parametrize("options, message", [
    ({"npu_preset": "tiny-64"}, r"unknown npu_preset 'tiny-64' \(did you mean 'tiny-64k'\?\)"),
    ({"npu_array": "32by32"}, r"npu_array must be 'ROWSxCOLS'"),
    ({"npu_sram_kib": "big"}, r"npu_sram_kib must be an integer"),
    ({"npu_clock_ghz": -1.0}, r"clock_ghz must be a positive number"),
    ({"npu_array": 0}, r"array_rows must be an integer >= 1"),
])
def test_bad_options_are_named(options: dict, message: str) -> None:
    with pytest.raises(PluginError, match=message):
        NpuConfig.from_options(options)


def test_accumulator_must_hold_whole_int32_elements() -> None:
    with pytest.raises(PluginError, match=r"acc_bytes must be a multiple of 4"):
        NpuConfig(acc_bytes=1022)
