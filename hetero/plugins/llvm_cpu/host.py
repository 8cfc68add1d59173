"""What the schedules know about the CPU they compile for, read off the host.

The default schedules size their register tiles from the vector width, the number of
vector registers and of fused multiply-add units, and their cache tiles from the L1
and L2 data caches. Every figure comes from the host: the vector width and register
count from LLVM's feature list (``avx512f``, ``avx2``, ``neon``/``sve``), the caches
from the operating system (``/sys/devices/system/cpu/cpu0/cache``, else ``sysconf``),
the core count from the scheduler's affinity mask. Only the FMA unit count is not
reported by either: it comes from a table keyed by LLVM's CPU name, and cores not in
it are assumed to have two (every x86 server core since Haswell, and the big Arm
cores; the table lists the ones that have one at the widest vector width).

>>> cpu = host()                                    # doctest: +SKIP
>>> cpu.lanes(4), cpu.vector_registers, cpu.l2_bytes  # doctest: +SKIP
(16, 32, 1048576)
"""

from __future__ import annotations

from dataclasses import dataclass
import functools
import math
import os
from pathlib import Path

from hetero.plugins.llvm_cpu.target import host_cpu, host_features

#: Cores whose widest vectors issue on one FMA pipe (or two half-width pipes that one
#: wide FMA occupies together), by LLVM CPU name: AMD Zen 4 runs AVX-512 on 256-bit
#: units; Intel's client cores with AVX-512 have one 512-bit FMA port.
ONE_FMA_UNIT = frozenset({
    "znver4", "icelake-client", "tigerlake", "rocketlake", "cannonlake", "alderlake-avx512",
})
#: Cache sizes assumed where the OS reports none (a container hiding /sys, say): a
#: small current server core's.
DEFAULT_CACHES = {1: 32 * 2**10, 2: 1 * 2**20, 3: 8 * 2**20}
#: Where Linux describes the first core's caches, one folder per cache.
SYSFS_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
#: Cycles from one FMA's issue to its result being usable by the next on the cores
#: hetero has met (4 on Intel since Skylake and on Zen 4/5; Arm's big cores 4): a tile
#: needs latency x units independent accumulators to keep every unit busy.
FMA_LATENCY = 4


@dataclass(frozen=True)
class HostCpu:
    """The figures a schedule reads: see the module docstring for where each comes from."""

    name: str  # LLVM's CPU name ("znver5", "sapphirerapids", "neoverse-v2")
    model: str  # the OS's model name ("AMD EPYC 9B45"), or the LLVM name where none is given
    vector_bits: int
    vector_registers: int
    fma_units: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    cores: int
    features: tuple[str, ...]  # the enabled features that matter to the kernels, sorted

    def lanes(self, itemsize: int) -> int:
        """Elements of ``itemsize`` bytes in one vector register."""
        return self.vector_bits // 8 // itemsize

    @property
    def min_accumulators(self) -> int:
        """Independent vector accumulators a reduction needs to keep every FMA unit busy."""
        return FMA_LATENCY * self.fma_units

    def describe(self) -> str:
        """One line for a benchmark's header: the CPU, its vectors and its caches."""
        kib = 2**10
        return (f"{self.model} (LLVM {self.name}), {self.cores} core(s), {self.vector_bits}-bit vectors x "
                f"{self.vector_registers} registers, {self.fma_units} FMA unit(s); L1d {self.l1d_bytes // kib} KiB, "
                f"L2 {self.l2_bytes // kib} KiB, L3 {self.l3_bytes // kib} KiB; "
                f"features {' '.join(self.features) or 'none'}")


#: Features reported by :meth:`HostCpu.describe` (those the kernels or LLVM use).
REPORTED_FEATURES = ("avx2", "fma", "avx512f", "avx512bw", "avx512vnni", "avxvnni", "avx512bf16",
                     "amx-tile", "amx-int8", "amx-bf16", "neon", "sve", "sve2", "dotprod", "i8mm")


@functools.cache
def host() -> HostCpu:
    """The running machine's figures (read once per process)."""
    name, features = host_cpu(), host_features()
    if features.get("avx512f"):
        bits, registers = 512, 32
    elif features.get("avx2") or features.get("avx"):
        bits, registers = 256, 16
    elif features.get("neon") or features.get("sve"):
        bits, registers = 128, 32
    else:
        bits, registers = 128, 16
    caches = _caches()
    return HostCpu(
        name=name,
        model=_model_name() or name,
        vector_bits=bits,
        vector_registers=registers,
        fma_units=1 if name in ONE_FMA_UNIT or not (features.get("fma") or features.get("neon")) else 2,
        l1d_bytes=caches[1],
        l2_bytes=caches[2],
        l3_bytes=caches[3],
        cores=_cores(),
        features=tuple(sorted(f for f in REPORTED_FEATURES if features.get(f))),
    )


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: Where the kernel shows cgroups (both versions' layouts are read under it).
SYSFS_CGROUP = Path("/sys/fs/cgroup")


@functools.cache
def usable_cpus() -> tuple[int, str]:
    """How many CPUs this process can keep busy at once, and why: the CPUs its affinity
    mask allows (``taskset``, a container's cpuset), lowered to a cgroup's CPU quota
    (``docker --cpus``, Kubernetes' CPU limit) rounded up, and never below one. A thread
    more than this only takes turns with the others on a core."""
    mask = _cores()
    why = f"{mask} CPU(s) in this process's affinity mask"
    quota = cgroup_cpu_quota()
    if quota is not None and math.ceil(quota) < mask:
        return max(1, math.ceil(quota)), f"{why}, a cgroup CPU quota of {quota:g}"
    return max(1, mask), why


def cgroup_cpu_quota(root: Path = SYSFS_CGROUP, membership: str | None = None) -> float | None:
    """The tightest CPU quota (CPUs' worth of time per period) of this process's cgroup
    and its ancestors, cgroup v2 (``cpu.max``) or v1 (``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``); None when there is none. ``membership`` is the text of
    ``/proc/self/cgroup`` (read when None)."""
    if membership is None:
        try:
            membership = Path("/proc/self/cgroup").read_text()
        except OSError:
            return None
    limits = []
    for line in membership.splitlines():
        controllers, _, path = line.partition(":")[2].partition(":")
        if controllers == "":  # v2: 0::/path
            base = root / "unified" if (root / "unified" / "cgroup.controllers").is_file() else root
            for folder in _ancestors(base, path):
                limits.append(_v2_quota(folder / "cpu.max"))
        elif "cpu" in controllers.split(","):
            mount = next((root / name for name in (controllers, "cpu", "cpu,cpuacct") if (root / name).is_dir()),
                         None)
            if mount is not None:
                for folder in _ancestors(mount, path):
                    limits.append(_v1_quota(folder))
    found = [q for q in limits if q is not None]
    return min(found) if found else None


def _ancestors(mount: Path, path: str) -> list[Path]:
    parts = [p for p in path.strip("/").split("/") if p and p != ".."]
    return [mount.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _v2_quota(path: Path) -> float | None:
    try:
        quota, period = path.read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_quota(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def _caches(root: Path = SYSFS_CACHES) -> dict[int, int]:
    """Per-level data (or unified) cache sizes in bytes, from sysfs, else sysconf, else defaults."""
    found: dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            found.setdefault(level, size)
    for level, key in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE"), (3, "SC_LEVEL3_CACHE_SIZE")):
        if level not in found:
            try:
                size = os.sysconf(key)
            except (ValueError, OSError):
                size = 0
            if size > 0:
                found[level] = size
    return {level: found.get(level, default) for level, default in DEFAULT_CACHES.items()}


def _size(text: str) -> int:
    """Bytes of a sysfs cache size ("48K", "1024K", "32M")."""
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in units:
        return int(text[:-1]) * units[text[-1]]
    return int(text)


def _model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model"):
                return value.strip()
    except OSError:
        pass
    return ""
