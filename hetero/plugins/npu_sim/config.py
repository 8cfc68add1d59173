"""The simulated NPU's declared device: matrix-unit size, SRAM buffers, clock and DMA.

:class:`NpuConfig` is the one description of the machine that the simulator, the
cycle model, the compiler's tiling and the partitioner (through
:meth:`NpuConfig.memory_hierarchy`) all read. Named :data:`PRESETS` cover an edge
part (the default), a tiny one that makes tiling visible in tests, and a large one;
:meth:`NpuConfig.from_options` builds a config from backend options.

Example::

    >>> cfg = NpuConfig.from_options({"npu_preset": "tiny-64k", "npu_clock_ghz": 0.5})
    >>> cfg.array_rows, cfg.sram_bytes, cfg.clock_ghz
    (8, 65536, 0.5)
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

from hetero.plugin import MemoryHierarchy, MemoryLevel, PluginError, did_you_mean

KIB = 1024


@dataclass(frozen=True)
class NpuConfig:
    """One NPU: a ``array_rows`` × ``array_cols`` systolic int8 array, four SRAM buffers
    (input, weight and output hold int8 bytes; the accumulator int32 elements), a
    vector unit of ``vector_lanes`` lanes, a DMA engine, and a clock.

    Cycle-model constants live here too, so the device is declared in one place:
    ``dma_latency_cycles`` before a transfer's first byte, ``dma_bytes_per_cycle``
    after it, ``dma_run_cycles`` extra for each contiguous DRAM run after the first
    (a strided box costs per row), ``vector_startup_cycles`` for each vector,
    requantise or pooling instruction.
    """

    array_rows: int = 32
    array_cols: int = 32
    inp_bytes: int = 128 * KIB
    wgt_bytes: int = 256 * KIB
    out_bytes: int = 128 * KIB
    acc_bytes: int = 64 * KIB
    clock_ghz: float = 1.0
    dma_bytes_per_cycle: int = 16
    dma_latency_cycles: int = 100
    dma_run_cycles: int = 1
    vector_lanes: int = 32
    vector_startup_cycles: int = 4

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "clock_ghz":
                if not (isinstance(value, numbers.Real) and not isinstance(value, bool)
                        and math.isfinite(value) and value > 0):
                    raise PluginError(f"npu_sim config: clock_ghz must be a positive number, got {value!r}")
                object.__setattr__(self, f.name, float(value))
                continue
            low = 0 if f.name in ("dma_latency_cycles", "dma_run_cycles", "vector_startup_cycles") else 1
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
                raise PluginError(
                    f"npu_sim config: {f.name} must be an integer >= {low}, got {value!r}"
                )
            object.__setattr__(self, f.name, int(value))
        if self.acc_bytes % 4:
            raise PluginError(
                f"npu_sim config: acc_bytes must be a multiple of 4 (int32 elements), got {self.acc_bytes}"
            )

    @property
    def sram_bytes(self) -> int:
        """The int8 scratchpad: input + weight + output buffers (the accumulator apart)."""
        return self.inp_bytes + self.wgt_bytes + self.out_bytes

    @property
    def peak_macs_per_cycle(self) -> int:
        """Multiply-accumulates the systolic array completes per cycle at full occupancy."""
        return self.array_rows * self.array_cols

    @property
    def peak_gops(self) -> float:
        """Peak int8 throughput in 10^9 operations (2 per MAC) per second."""
        return 2.0 * self.peak_macs_per_cycle * self.clock_ghz

    @property
    def dma_gbps(self) -> float:
        """DMA bandwidth in GB/s (10^9 bytes per second) at the declared clock."""
        return self.dma_bytes_per_cycle * self.clock_ghz

    def capacity(self, buf: str) -> int:
        """Capacity of SRAM buffer ``buf`` (``inp``, ``wgt``, ``out``, ``acc``) in its elements."""
        sizes = {"inp": self.inp_bytes, "wgt": self.wgt_bytes, "out": self.out_bytes, "acc": self.acc_bytes // 4}
        if buf not in sizes:
            raise PluginError(f"npu_sim has no SRAM buffer {buf!r}{did_you_mean(buf, sizes)}")
        return sizes[buf]

    def cycles_to_seconds(self, cycles: int) -> float:
        """Wall time of ``cycles`` at the declared clock."""
        return cycles / (self.clock_ghz * 1e9)

    def memory_hierarchy(self) -> MemoryHierarchy:
        """DRAM > SRAM (the int8 scratchpad) > ACC, outermost first.

        DRAM's bandwidth and latency are the DMA engine's (every byte reaches the NPU
        through it). SRAM is read by the compute engine at a row of the array plus a
        vector of lanes per cycle, the accumulator at a column of int32 per cycle;
        each is kept no slower than the level outside it, since on-chip ports are
        never the bottleneck of a transfer in this model. On-chip latency is a cycle.
        """
        cycle_ns = 1.0 / self.clock_ghz
        dram = self.dma_gbps
        sram = max(dram, (self.array_rows + self.vector_lanes) * self.clock_ghz)
        acc = max(sram, 4 * self.array_cols * self.clock_ghz)
        return MemoryHierarchy((
            MemoryLevel("DRAM", max(2**32, self.sram_bytes), dram,
                        latency_ns=self.dma_latency_cycles * cycle_ns, scope="global"),
            MemoryLevel("SRAM", self.sram_bytes, sram, latency_ns=min(cycle_ns, self.dma_latency_cycles * cycle_ns),
                        scope="shared"),
            MemoryLevel("ACC", min(self.acc_bytes, self.sram_bytes), acc,
                        latency_ns=min(cycle_ns, self.dma_latency_cycles * cycle_ns), scope="local"),
        ))

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> NpuConfig:
        """A config from backend options; keys not starting with a known ``npu_`` name are ignored.

        ``npu_preset`` (a :data:`PRESETS` name) is the base; then ``npu_sram_kib``
        (total scratchpad, split 1:2:1 into input, weight, output; the accumulator
        gets an eighth of it), ``npu_acc_kib``, ``npu_array`` (``"32x32"``, ``32``
        or ``(rows, cols)``), ``npu_clock_ghz``, ``npu_dma_gbps`` (rounded to whole
        bytes per cycle), ``npu_dma_latency_cycles``, ``npu_vector_lanes``.
        """
        preset = options.get("npu_preset", "edge-512k")
        if preset not in PRESETS:
            raise PluginError(
                f"npu_sim: unknown npu_preset {preset!r}{did_you_mean(str(preset), PRESETS)}; "
                f"the presets are {sorted(PRESETS)}"
            )
        cfg = PRESETS[preset]
        changes: dict[str, object] = {}
        if "npu_sram_kib" in options:
            kib = _int_option(options, "npu_sram_kib")
            if kib < 4:
                raise PluginError(f"npu_sim: npu_sram_kib must be at least 4, got {kib}")
            quarter = kib * KIB // 4
            changes.update(inp_bytes=quarter, wgt_bytes=kib * KIB - 2 * quarter, out_bytes=quarter,
                           acc_bytes=(kib * KIB // 8) // 4 * 4)
        if "npu_acc_kib" in options:
            changes["acc_bytes"] = _int_option(options, "npu_acc_kib") * KIB
        if "npu_array" in options:
            changes["array_rows"], changes["array_cols"] = _array_option(options["npu_array"])
        if "npu_clock_ghz" in options:
            changes["clock_ghz"] = options["npu_clock_ghz"]
        if "npu_dma_gbps" in options:
            gbps = options["npu_dma_gbps"]
            clock = changes.get("clock_ghz", cfg.clock_ghz)
            if not isinstance(gbps, numbers.Real) or isinstance(gbps, bool) or not gbps > 0 \
                    or not isinstance(clock, numbers.Real) or not clock > 0:
                raise PluginError(f"npu_sim: npu_dma_gbps must be a positive number, got {gbps!r}")
            changes["dma_bytes_per_cycle"] = max(1, round(gbps / clock))
        if "npu_dma_latency_cycles" in options:
            changes["dma_latency_cycles"] = _int_option(options, "npu_dma_latency_cycles")
        if "npu_vector_lanes" in options:
            changes["vector_lanes"] = _int_option(options, "npu_vector_lanes")
        return replace(cfg, **changes)


def _int_option(options: Mapping[str, object], key: str) -> int:
    value = options[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PluginError(f"npu_sim: option {key} must be an integer, got {value!r}")
    return int(value)


def _array_option(value: object) -> tuple[int, int]:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value), int(value)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", value)
        if match:
            return int(match[1]), int(match[2])
    if isinstance(value, (tuple, list)) and len(value) == 2 \
            and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        return int(value[0]), int(value[1])
    raise PluginError(f"npu_sim: npu_array must be 'ROWSxCOLS', an integer or (rows, cols), got {value!r}")


#: Named devices. ``edge-512k`` is the default: a phone-class NPU.
PRESETS: dict[str, NpuConfig] = {
    "edge-512k": NpuConfig(),
    "tiny-64k": NpuConfig(
        array_rows=8, array_cols=8, inp_bytes=16 * KIB, wgt_bytes=32 * KIB, out_bytes=16 * KIB,
        acc_bytes=8 * KIB, dma_bytes_per_cycle=8, dma_latency_cycles=50, vector_lanes=8,
    ),
    "large-2m": NpuConfig(
        array_rows=64, array_cols=64, inp_bytes=512 * KIB, wgt_bytes=1024 * KIB, out_bytes=512 * KIB,
        acc_bytes=256 * KIB, dma_bytes_per_cycle=64, dma_latency_cycles=150, vector_lanes=64,
    ),
}
