"""Memory hierarchies: what a backend declares about where its data can live.

A :class:`MemoryHierarchy` lists a device's memory levels **from the outermost to
the innermost**: ``levels[0]`` is the largest and slowest (the DRAM or HBM where
tensors live between compiled parts), ``levels[-1]`` the smallest and fastest
(registers, a scratchpad, a local buffer). Outermost first matches how data moves:
a transfer between backends goes through ``levels[0]``, and a schedule tiles its
loops to fit each level further in.

The partitioner costs transfers with :meth:`MemoryHierarchy.transfer_seconds`, the
memory planner checks capacities against it and schedules size tiles from it, so
the hierarchy validates itself when it is built: a backend that declares a
negative capacity or a level order that is upside down fails at declaration time,
with a message naming the level, rather than misleading every decision later.

Example::

    >>> gpu = MemoryHierarchy([
    ...     MemoryLevel("HBM", 80 * 2**30, bandwidth_gbps=3350, latency_ns=500),
    ...     MemoryLevel("L2", 50 * 2**20, bandwidth_gbps=7000, latency_ns=200),
    ...     MemoryLevel("SMEM", 228 * 2**10, bandwidth_gbps=20000, latency_ns=30,
    ...                 scope="shared"),
    ... ])
    >>> gpu.summary()
    'HBM 80 GiB > L2 50 MiB > SMEM 228 KiB'
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
import math
import numbers
import re

from hetero.errors import PluginError, did_you_mean

_SCOPE = re.compile(r"^[a-z][a-z0-9_.]*$")


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a device's memory.

    ``capacity_bytes`` is the usable size; ``bandwidth_gbps`` the sustained
    bandwidth in gigabytes (10**9 bytes, as vendors quote it) per second between
    this level and the next one out; ``latency_ns`` the time before the first byte
    arrives. ``scope`` is the tensor-IR buffer scope whose buffers live here
    (``"global"``, ``"shared"``, ``"local"``...); transparent caches share the
    scope of the memory they cache, since no buffer is placed in them by name.
    """

    name: str
    capacity_bytes: int
    bandwidth_gbps: float
    latency_ns: float = 0.0
    scope: str = "global"

    def __post_init__(self) -> None:
        where = f"memory level {self.name!r}"
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip() \
                or any(c.isspace() for c in self.name):
            raise PluginError(f"{where}: a level needs a non-empty name without spaces")
        capacity = self.capacity_bytes
        if isinstance(capacity, bool) or not isinstance(capacity, numbers.Integral) or capacity <= 0:
            raise PluginError(
                f"{where}: capacity_bytes must be a positive integer, got {capacity!r}"
            )
        if not (_finite(self.bandwidth_gbps) and self.bandwidth_gbps > 0):
            raise PluginError(
                f"{where}: bandwidth_gbps must be a positive finite number, got {self.bandwidth_gbps!r}"
            )
        if not (_finite(self.latency_ns) and self.latency_ns >= 0):
            raise PluginError(
                f"{where}: latency_ns must be a finite number >= 0, got {self.latency_ns!r}"
            )
        # numpy scalars pass the checks above; store plain Python numbers so that
        # levels compare, hash and serialise to JSON the same whatever built them.
        object.__setattr__(self, "capacity_bytes", int(capacity))
        object.__setattr__(self, "bandwidth_gbps", float(self.bandwidth_gbps))
        object.__setattr__(self, "latency_ns", float(self.latency_ns))
        if not isinstance(self.scope, str) or not _SCOPE.match(self.scope):
            raise PluginError(
                f"{where}: scope must be a lower-case identifier such as 'global' or "
                f"'shared', got {self.scope!r}"
            )

    def transfer_seconds(self, nbytes: int) -> float:
        """Seconds to move ``nbytes`` through this level: latency plus size over bandwidth."""
        if nbytes < 0:
            raise ValueError(f"cannot transfer {nbytes} bytes")
        if nbytes == 0:
            return 0.0
        return self.latency_ns * 1e-9 + nbytes / (self.bandwidth_gbps * 1e9)

    def __str__(self) -> str:
        return f"{self.name} {format_bytes(self.capacity_bytes)}"


@dataclass(frozen=True)
class MemoryHierarchy:
    """A device's memory levels, ordered from the outermost (largest, slowest) in.

    Validated on construction: at least one level, unique names, and an order that
    makes sense, going inwards: capacity never grows, bandwidth never drops and
    latency never grows. Ties are allowed (two levels of equal speed exist).
    ``levels`` may be given as any iterable; it is stored as a tuple.
    """

    levels: tuple[MemoryLevel, ...]

    def __post_init__(self) -> None:
        try:
            levels = tuple(self.levels)
        except TypeError:
            levels = ()
        if not levels:
            raise PluginError("a memory hierarchy needs a sequence of at least one MemoryLevel")
        for level in levels:
            if not isinstance(level, MemoryLevel):
                raise PluginError(
                    f"a memory hierarchy holds MemoryLevel objects, got {level!r}"
                )
        object.__setattr__(self, "levels", levels)
        seen: set[str] = set()
        for level in levels:
            if level.name in seen:
                raise PluginError(f"memory level name {level.name!r} is used twice")
            seen.add(level.name)
        for outer, inner in zip(levels, levels[1:]):
            _check_order(outer, inner)

    @property
    def outermost(self) -> MemoryLevel:
        """The largest, slowest level: where tensors live between compiled parts."""
        return self.levels[0]

    @property
    def innermost(self) -> MemoryLevel:
        """The smallest, fastest level."""
        return self.levels[-1]

    def level(self, name: str) -> MemoryLevel:
        """The level called ``name``; PluginError naming the levels there are if none."""
        for level in self.levels:
            if level.name == name:
                return level
        names = [level.name for level in self.levels]
        raise PluginError(
            f"no memory level {name!r}{did_you_mean(name, names)}; the levels are {names}"
        )

    def transfer_seconds(self, nbytes: int, level: str | MemoryLevel | None = None) -> float:
        """Seconds to move ``nbytes`` through ``level`` (a name or a level; default outermost)."""
        if level is None:
            chosen = self.outermost
        elif isinstance(level, MemoryLevel):
            chosen = self.level(level.name)
        else:
            chosen = self.level(level)
        return chosen.transfer_seconds(nbytes)

    def summary(self) -> str:
        """One line, outermost first: ``'DRAM 16 GiB > L2 1 MiB > L1 32 KiB'``."""
        return " > ".join(str(level) for level in self.levels)

    def __iter__(self) -> Iterator[MemoryLevel]:
        return iter(self.levels)

    def __len__(self) -> int:
        return len(self.levels)

    def __str__(self) -> str:
        rows = [("level", "capacity", "bandwidth", "latency", "scope")]
        rows += [
            (
                level.name,
                format_bytes(level.capacity_bytes),
                f"{level.bandwidth_gbps:g} GB/s",
                f"{level.latency_ns:g} ns",
                level.scope,
            )
            for level in self.levels
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows
        )


def format_bytes(nbytes: int) -> str:
    """A byte count in binary units: ``format_bytes(3 * 2**20) == '3 MiB'``."""
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    value, i = float(nbytes), 0
    while value >= 1024 and i < len(units) - 1:
        value, i = value / 1024, i + 1
    return f"{value:.4g} {units[i]}"


def _check_order(outer: MemoryLevel, inner: MemoryLevel) -> None:
    pair = f"memory level {inner.name!r} (inside {outer.name!r})"
    hint = "list levels from the outermost (largest, slowest) to the innermost"
    if inner.capacity_bytes > outer.capacity_bytes:
        raise PluginError(
            f"{pair} is larger ({format_bytes(inner.capacity_bytes)} > "
            f"{format_bytes(outer.capacity_bytes)}); {hint}"
        )
    if inner.bandwidth_gbps < outer.bandwidth_gbps:
        raise PluginError(
            f"{pair} is slower ({inner.bandwidth_gbps:g} < {outer.bandwidth_gbps:g} GB/s); {hint}"
        )
    if inner.latency_ns > outer.latency_ns:
        raise PluginError(
            f"{pair} has a longer latency ({inner.latency_ns:g} > {outer.latency_ns:g} ns); {hint}"
        )


def _finite(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)
