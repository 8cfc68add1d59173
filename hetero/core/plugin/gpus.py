"""GPUs as a GPU backend declares them: memory hierarchy, limits and throughput per preset.

A :class:`GpuSpec` is the one description of a device that the partitioner (through
:meth:`GpuSpec.memory_hierarchy` and ``peak_gflops``), the default schedules (threads
per block, warp size) and the compile-time limit checks (registers per thread, shared
memory per block) all read. :data:`GPU_PRESETS` name the two classes issue 14 asks for:
the A100 (sm_80) and the H100 and H200 (sm_90). Figures are NVIDIA's published ones
(the A100 and H100 SXM data sheets and the CUDA C++ Programming Guide's table of
compute capabilities); the partitioner needs their order of magnitude, the limit
checks their exact values.

    >>> spec = GPU_PRESETS["h200"]
    >>> spec.arch, spec.memory_hierarchy().summary()
    ('sm_90', 'HBM 141 GiB > L2 50 MiB > SMEM 227 KiB > REG 1020 B')
"""

from __future__ import annotations

from dataclasses import dataclass
import math

from hetero.core.memory.hierarchy import MemoryHierarchy, MemoryLevel

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: its architecture, memory and the limits a kernel must respect.

    ``shared_per_block`` is the most shared memory one block may use (with the opt-in
    attribute above 48 KiB); ``registers_per_sm`` and ``max_registers_per_thread`` bound
    the registers ptxas may give a thread at a block size; ``fp32_tflops`` is the peak
    of the CUDA cores (no tensor cores), what an untuned kernel can approach.
    """

    name: str
    arch: str
    sms: int
    clock_ghz: float
    hbm_bytes: int
    hbm_gbps: float
    l2_bytes: int
    l2_gbps: float
    shared_per_block: int
    shared_per_sm: int
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    max_threads_per_block: int = 1024
    warp_size: int = 32
    fp32_tflops: float = 0.0
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32

    @property
    def peak_gflops(self) -> float:
        """Peak float32 throughput in GFLOP/s."""
        return self.fp32_tflops * 1e3

    def occupancy(self, threads_per_block: int, registers: int, shared_bytes: int) -> float:
        """The fraction of a multiprocessor's thread slots a kernel fills: its blocks per SM are
        bounded by threads, registers (allocated per warp, in units of 256) and shared memory.

            >>> GPU_PRESETS["a100"].occupancy(256, 32, 0), GPU_PRESETS["a100"].occupancy(256, 128, 0)
            (1.0, 0.25)
        """
        warps = math.ceil(threads_per_block / self.warp_size)
        per_warp = math.ceil(max(registers, 1) * self.warp_size / 256) * 256
        blocks = min(self.max_blocks_per_sm, self.max_threads_per_sm // max(threads_per_block, 1),
                     self.registers_per_sm // (per_warp * warps))
        if shared_bytes:
            blocks = min(blocks, self.shared_per_sm // shared_bytes)
        return blocks * threads_per_block / self.max_threads_per_sm

    def memory_hierarchy(self) -> MemoryHierarchy:
        """HBM > L2 > shared memory (a block's) > registers (a thread's), outermost first.

        Shared memory is read at 128 bytes per SM per clock, registers faster still;
        latencies are the usual few hundred nanoseconds for HBM down to a cycle.
        """
        smem_gbps = 128 * self.sms * self.clock_ghz
        return MemoryHierarchy((
            MemoryLevel("HBM", self.hbm_bytes, self.hbm_gbps, latency_ns=500.0, scope="global"),
            MemoryLevel("L2", self.l2_bytes, self.l2_gbps, latency_ns=200.0, scope="global"),
            MemoryLevel("SMEM", self.shared_per_block, max(smem_gbps, self.l2_gbps), latency_ns=20.0,
                        scope="shared"),
            MemoryLevel("REG", self.max_registers_per_thread * 4, max(4 * smem_gbps, self.l2_gbps),
                        latency_ns=1.0, scope="local"),
        ))


#: The GPUs a backend may declare, by name (a GPU backend's device option names one).
GPU_PRESETS: dict[str, GpuSpec] = {
    "a100": GpuSpec("a100", "sm_80", sms=108, clock_ghz=1.41, hbm_bytes=80 * GIB, hbm_gbps=2039.0,
                    l2_bytes=40 * MIB, l2_gbps=5120.0, shared_per_block=163 * KIB, shared_per_sm=164 * KIB,
                    fp32_tflops=19.5),
    "h100": GpuSpec("h100", "sm_90", sms=132, clock_ghz=1.83, hbm_bytes=80 * GIB, hbm_gbps=3350.0,
                    l2_bytes=50 * MIB, l2_gbps=7300.0, shared_per_block=227 * KIB, shared_per_sm=228 * KIB,
                    fp32_tflops=67.0),
    "h200": GpuSpec("h200", "sm_90", sms=132, clock_ghz=1.83, hbm_bytes=141 * GIB, hbm_gbps=4800.0,
                    l2_bytes=50 * MIB, l2_gbps=7300.0, shared_per_block=227 * KIB, shared_per_sm=228 * KIB,
                    fp32_tflops=67.0),
}
