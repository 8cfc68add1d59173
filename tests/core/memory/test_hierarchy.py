"""MemoryLevel and MemoryHierarchy: validation, lookups, transfer costs, text forms."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from hetero.core.memory import MemoryHierarchy, MemoryLevel, format_bytes
from hetero.errors import PluginError

GIB, MIB, KIB = 2**30, 2**20, 2**10


def gpu() -> MemoryHierarchy:
    return MemoryHierarchy([
        MemoryLevel("HBM", 80 * GIB, bandwidth_gbps=3350, latency_ns=500),
        MemoryLevel("L2", 50 * MIB, bandwidth_gbps=7000, latency_ns=200),
        MemoryLevel("SMEM", 228 * KIB, bandwidth_gbps=20000, latency_ns=30, scope="shared"),
    ])


def test_levels_are_ordered_outermost_first() -> None:
    mem = gpu()
    assert [lv.name for lv in mem] == ["HBM", "L2", "SMEM"]
    assert len(mem) == 3
    assert mem.outermost.name == "HBM" and mem.innermost.name == "SMEM"
    assert isinstance(mem.levels, tuple)


def test_level_lookup_and_did_you_mean() -> None:
    mem = gpu()
    assert mem.level("L2").capacity_bytes == 50 * MIB
    with pytest.raises(PluginError, match=r"no memory level 'SMEMS' \(did you mean 'SMEM'\?\).*HBM"):
        mem.level("SMEMS")


def test_transfer_seconds_is_latency_plus_size_over_bandwidth() -> None:
    mem = gpu()
    nbytes = 4 * MIB
    expected = 500e-9 + nbytes / 3350e9
    assert mem.transfer_seconds(nbytes) == pytest.approx(expected, rel=1e-12)
    assert mem.transfer_seconds(nbytes, "HBM") == pytest.approx(expected, rel=1e-12)
    assert mem.transfer_seconds(nbytes, mem.level("SMEM")) == pytest.approx(
        30e-9 + nbytes / 20000e9, rel=1e-12
    )
    assert mem.transfer_seconds(0) == 0.0
    with pytest.raises(ValueError):
        mem.transfer_seconds(-1)
    with pytest.raises(PluginError, match="no memory level 'L3'"):
        mem.transfer_seconds(1, MemoryLevel("L3", 1, 1.0))


def test_text_forms() -> None:
    mem = gpu()
    assert mem.summary() == "HBM 80 GiB > L2 50 MiB > SMEM 228 KiB"
    table = str(mem).splitlines()
    assert table[0].split() == ["level", "capacity", "bandwidth", "latency", "scope"]
    assert table[3].split() == ["SMEM", "228", "KiB", "20000", "GB/s", "30", "ns", "shared"]


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (3 * MIB, "3 MiB"), (5 * 2**40, "5 TiB"),
     (2**50, "1024 TiB")],
)
def test_format_bytes(nbytes: int, text: str) -> None:
    assert format_bytes(nbytes) == text


def test_numpy_scalars_are_stored_as_plain_numbers() -> None:
    level = MemoryLevel("DRAM", np.int64(1024), np.float32(10.0), np.int32(5))
    assert type(level.capacity_bytes) is int
    assert type(level.bandwidth_gbps) is float and type(level.latency_ns) is float
    assert level == MemoryLevel("DRAM", 1024, 10.0, 5.0)


def test_levels_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpu().outermost.capacity_bytes = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity_bytes": -1}, "capacity_bytes must be a positive integer, got -1"),
        ({"capacity_bytes": 0}, "capacity_bytes must be a positive integer"),
        ({"capacity_bytes": 1.5}, "capacity_bytes must be a positive integer"),
        ({"capacity_bytes": True}, "capacity_bytes must be a positive integer"),
        ({"bandwidth_gbps": 0}, "bandwidth_gbps must be a positive finite number"),
        ({"bandwidth_gbps": math.inf}, "bandwidth_gbps must be a positive finite number"),
        ({"bandwidth_gbps": "fast"}, "bandwidth_gbps must be a positive finite number"),
        ({"latency_ns": -1}, "latency_ns must be a finite number >= 0"),
        ({"latency_ns": math.nan}, "latency_ns must be a finite number >= 0"),
        ({"name": ""}, "a level needs a non-empty name"),
        ({"name": "L 2"}, "a level needs a non-empty name without spaces"),
        ({"scope": "Shared Mem"}, "scope must be a lower-case identifier"),
    ],
)
def test_bad_level_is_rejected_naming_it(kwargs: dict, message: str) -> None:
    args = {"name": "L2", "capacity_bytes": MIB, "bandwidth_gbps": 100.0, "latency_ns": 10.0} | kwargs
    with pytest.raises(PluginError, match=f"memory level {args['name']!r}: {message}"):
        MemoryLevel(**args)


def test_hierarchy_needs_levels() -> None:
    with pytest.raises(PluginError, match="at least one MemoryLevel"):
        MemoryHierarchy([])
    with pytest.raises(PluginError, match="at least one MemoryLevel"):
        MemoryHierarchy(None)  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="holds MemoryLevel objects, got 'DRAM'"):
        MemoryHierarchy(["DRAM"])  # type: ignore[list-item]


def test_duplicate_level_names_are_rejected() -> None:
    with pytest.raises(PluginError, match="'DRAM' is used twice"):
        MemoryHierarchy([MemoryLevel("DRAM", GIB, 10.0), MemoryLevel("DRAM", MIB, 10.0)])


@pytest.mark.parametrize(
    ("inner", "message"),
    [
        (MemoryLevel("L1", 2 * GIB, 100.0, 1.0), r"'L1' \(inside 'DRAM'\) is larger \(2 GiB > 1 GiB\)"),
        (MemoryLevel("L1", MIB, 5.0, 1.0), r"'L1' \(inside 'DRAM'\) is slower \(5 < 10 GB/s\)"),
        (MemoryLevel("L1", MIB, 100.0, 200.0), r"'L1' \(inside 'DRAM'\) has a longer latency"),
    ],
)
def test_upside_down_order_is_rejected(inner: MemoryLevel, message: str) -> None:
    dram = MemoryLevel("DRAM", GIB, 10.0, 100.0)
    with pytest.raises(PluginError, match=message + ".*outermost"):
        MemoryHierarchy([dram, inner])


def test_equal_neighbours_are_allowed() -> None:
    same = MemoryHierarchy([MemoryLevel("A", MIB, 10.0, 5.0), MemoryLevel("B", MIB, 10.0, 5.0)])
    assert same.summary() == "A 1 MiB > B 1 MiB"


_levels = st.lists(
    st.tuples(st.integers(1, 2**40), st.floats(0.1, 1e5), st.floats(0, 1e4)), min_size=1, max_size=5
)


@settings(max_examples=50, deadline=None)
@given(_levels)
def test_construction_succeeds_exactly_when_the_order_is_monotone(specs: list) -> None:
    levels = [MemoryLevel(f"M{i}", c, b, lat) for i, (c, b, lat) in enumerate(specs)]
    monotone = all(
        o.capacity_bytes >= i.capacity_bytes and o.bandwidth_gbps <= i.bandwidth_gbps
        and o.latency_ns >= i.latency_ns
        for o, i in zip(levels, levels[1:])
    )
    if monotone:
        assert MemoryHierarchy(levels).levels == tuple(levels)
    else:
        with pytest.raises(PluginError, match="outermost"):
            MemoryHierarchy(levels)
