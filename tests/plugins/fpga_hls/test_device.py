"""The fpga_hls backend's declared parts: AMD's published resource counts, the memory
hierarchy the partitioner reads, the on-chip scopes it registers, and choosing a part."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Var, const
from hetero.core.ir.tir.registry import SCOPES
from hetero.core.ir.tir.stmt import Allocate, For, PrimFunc, Store
from hetero.core.ir.tir.verify import verify_func
from hetero.errors import OptionError
from hetero.plugins.fpga_hls.device import BRAM_18K_BITS, DEFAULT_PART, PRESETS, URAM_BITS, get_part

#: (DSP48E2, BRAM_18K, URAM, LUT, FF) from DS891 (ZU7EV), DS965 (U50) and DS963 (U280).
PUBLISHED = {
    "zu7ev": (1728, 624, 96, 230_400, 460_800),
    "u50": (5952, 2688, 640, 872_000, 1_743_000),
    "u280": (9024, 4032, 960, 1_304_000, 2_607_000),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_presets_carry_the_published_resource_counts_at_300_mhz(name: str) -> None:
    part = PRESETS[name]
    assert (part.dsp, part.bram_18k, part.uram, part.lut, part.ff) == PUBLISHED[name]
    assert part.clock_mhz == 300.0


def test_the_block_ram_totals_match_the_data_sheets_megabits() -> None:
    # U50: 47.3 Mb of BRAM and 180 Mb of URAM; U280: 70.9 Mb and 270 Mb (DS965, DS963).
    mbit = 1024 * 1024
    assert PRESETS["u50"].bram_18k * BRAM_18K_BITS / mbit == pytest.approx(47.25)
    assert PRESETS["u50"].uram * URAM_BITS / mbit == pytest.approx(180)
    assert PRESETS["u280"].bram_18k * BRAM_18K_BITS / mbit == pytest.approx(70.875)
    assert PRESETS["u280"].uram * URAM_BITS / mbit == pytest.approx(270)


def test_the_large_part_has_more_of_every_resource_than_the_mid_range_ones() -> None:
    large = PRESETS["u280"]
    for mid in (PRESETS["zu7ev"], PRESETS["u50"]):
        assert all(getattr(large, k) > getattr(mid, k) for k in ("dsp", "bram_18k", "uram", "lut", "ff"))


def test_peak_throughput_is_dsps_times_two_times_the_clock() -> None:
    assert PRESETS["u50"].peak_gops == pytest.approx(5952 * 2 * 0.3)
    assert PRESETS["zu7ev"].peak_gops == pytest.approx(1728 * 2 * 0.3)


@pytest.mark.parametrize("name, offchip", [("zu7ev", "DDR"), ("u50", "HBM"), ("u280", "HBM")])
def test_memory_hierarchy_is_offchip_then_uram_bram_and_registers(name: str, offchip: str) -> None:
    part = PRESETS[name]
    hierarchy = part.memory_hierarchy()
    assert [level.name for level in hierarchy] == [offchip, "URAM", "BRAM", "REG"]
    assert [level.scope for level in hierarchy] == ["global", "uram", "bram", "local"]
    assert hierarchy.level("BRAM").capacity_bytes == part.bram_18k * 18 * 1024 // 8
    assert hierarchy.level("URAM").capacity_bytes == part.uram * 288 * 1024 // 8
    assert hierarchy.level("REG").capacity_bytes == part.ff // 8
    assert hierarchy.outermost.bandwidth_gbps == part.offchip_gbps


def test_u50_hierarchy_summary() -> None:
    assert PRESETS["u50"].memory_hierarchy().summary() == \
        "HBM 8 GiB > URAM 22.5 MiB > BRAM 5.906 MiB > REG 212.8 KiB"


def test_bram_and_uram_are_registered_scopes_that_verify() -> None:
    assert "bram" in SCOPES and "uram" in SCOPES
    for scope in ("bram", "uram"):
        x = Buffer("x", (4,), np.float32)
        t = Buffer("t", (4,), np.float32, scope=scope)
        i = Var("i")
        body = Allocate(t, For(i, 4, Store(t, (i,), x[i] + const(1.0, np.float32))))
        verify_func(PrimFunc("f", (x,), body))


def test_get_part_picks_a_preset_by_name_and_defaults_to_the_mid_range_card() -> None:
    assert get_part().name == DEFAULT_PART == "u50"
    assert get_part("U280") is PRESETS["u280"]
    assert get_part(PRESETS["zu7ev"]) is PRESETS["zu7ev"]
    with pytest.raises(OptionError, match=r"unknown FPGA part 'u55'.*did you mean 'u50'.*zu7ev, u50, u280"):
        get_part("u55")
