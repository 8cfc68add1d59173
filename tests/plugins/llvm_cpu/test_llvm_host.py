"""The host figures the schedules read, and the register tile they choose from them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hetero.plugins.llvm_cpu.host import DEFAULT_CACHES, HostCpu, _caches, host
from hetero.plugins.llvm_cpu.schedules_tiled import register_tile
from hetero.plugins.llvm_cpu.target import host_cpu, host_features

AVX512 = HostCpu(name="znver5", model="test", vector_bits=512, vector_registers=32, fma_units=2,
                 l1d_bytes=48 << 10, l2_bytes=1 << 20, l3_bytes=32 << 20, cores=2, features=("avx512f",))


def test_the_host_reads_llvm_and_the_os() -> None:
    cpu = host()
    assert cpu.name == host_cpu()
    features = host_features()
    if features.get("avx512f"):
        assert (cpu.vector_bits, cpu.vector_registers) == (512, 32)
    elif features.get("avx2"):
        assert (cpu.vector_bits, cpu.vector_registers) == (256, 16)
    assert set(cpu.features) <= {f for f, on in features.items() if on}
    assert cpu.l1d_bytes < cpu.l2_bytes <= cpu.l3_bytes or cpu.l3_bytes == 0
    assert cpu.cores >= 1 and cpu.name in cpu.describe()


def _cache(root: Path, index: int, level: int, kind: str, size: str) -> None:
    folder = root / f"index{index}"
    folder.mkdir()
    (folder / "level").write_text(f"{level}\n")
    (folder / "type").write_text(f"{kind}\n")
    (folder / "size").write_text(f"{size}\n")


def test_cache_sizes_come_from_sysfs_skipping_instruction_caches(tmp_path: Path) -> None:
    _cache(tmp_path, 0, 1, "Data", "48K")
    _cache(tmp_path, 1, 1, "Instruction", "32K")
    _cache(tmp_path, 2, 2, "Unified", "1024K")
    _cache(tmp_path, 3, 3, "Unified", "32M")
    assert _caches(tmp_path) == {1: 48 << 10, 2: 1 << 20, 3: 32 << 20}


def test_an_unreadable_sysfs_falls_back_without_failing(tmp_path: Path) -> None:
    _cache(tmp_path, 0, 1, "Data", "not a size")
    sizes = _caches(tmp_path)
    assert set(sizes) == set(DEFAULT_CACHES) and all(v > 0 for v in sizes.values())


@pytest.mark.parametrize("cpu, rows, lanes, accumulators", [
    (AVX512, 8, 32, 4),  # 8 rows x 2 vectors + 2 loads + 1 broadcast <= 32 registers
    (dataclasses.replace(AVX512, vector_bits=256, vector_registers=16), 6, 16, 8),  # AVX2: 6x2+3 <= 16
    (dataclasses.replace(AVX512, vector_bits=128, vector_registers=32, fma_units=2), 8, 8, 8),  # NEON
    (dataclasses.replace(AVX512, vector_bits=256, vector_registers=16, fma_units=1), 6, 16, 4),
])
def test_the_register_tile_follows_the_vector_width_registers_and_fma_units(
        cpu: HostCpu, rows: int, lanes: int, accumulators: int) -> None:
    tile = register_tile(cpu)
    assert tile.row_choices[0] == rows and tile.lanes == lanes
    assert tile.min_accumulators == accumulators
    # Every choice keeps the accumulators, the loaded row and a broadcast in registers.
    vectors = tile.lanes // tile.vector
    assert all(r * vectors + vectors + 1 <= cpu.vector_registers for r in tile.row_choices)


def test_the_trace_records_the_tile_chosen_for_the_cpu() -> None:
    """The same Gemm scheduled for an AVX-512 and an AVX2 core: the trace's split factors
    are the rows and lanes of each one's tile, and replaying the trace gives the function."""
    import numpy as np

    from hetero.core.ir.builder import GraphBuilder
    from hetero.core.lower import lower_node
    from hetero.core.schedule import Schedule
    from hetero.core.schedule.tree import block_names
    from hetero.plugins.llvm_cpu.schedules_tiled import plan_tile, schedule_tiled

    gb = GraphBuilder("mm")
    gb.output(gb.MatMul(gb.input("a", (48, 64)), np.ones((64, 96), np.float32)))
    func = lower_node(gb.build().nodes[0])
    (name,) = [n for n in block_names(func.body) if plan_tile(func, n) is not None]
    factors = {}
    for label, cpu in (("avx512", AVX512), ("avx2", dataclasses.replace(AVX512, vector_bits=256,
                                                                        vector_registers=16))):
        tile = register_tile(cpu)
        sch = Schedule(func)
        schedule_tiled(sch, name, plan_tile(func, name, tile), 1, tile)
        splits = [ins.decisions["factors"] for ins in sch.trace.instructions if ins.kind == "split"]
        factors[label] = [f[-1] for f in splits]
        assert sch.trace.apply(func) == sch.func
    assert factors == {"avx512": [8, 32], "avx2": [6, 16]}
