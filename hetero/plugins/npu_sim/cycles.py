"""npu_sim's timing model: what each instruction costs, when it runs, and race detection.

**Costs** (in cycles, from the :class:`NpuConfig`):

- ``LOAD`` / ``STORE``: ``dma_latency + ceil(bytes / dma_bytes_per_cycle) +
  dma_run_cycles · (runs − 1)``. ``bytes`` is the SRAM block (a LOAD's padding is
  written by the DMA engine too); ``runs`` is the number of contiguous DRAM runs of
  the box (1 for a contiguous box; dimensions merge from the innermost while each
  stride equals the size of what it steps over).
- ``GEMM``: ``m + k + n − 1``: the systolic fill and drain (k + n − 1) plus one
  cycle per streamed input row; plus ``k`` when the array must load its weights —
  when ``wgt_off``/``k``/``n`` differ from the resident ones, or a write to ``wgt``
  touched them since.
- ``VEC``, ``VECI``, ``COPY``, ``REQUANT``: ``vector_startup + ceil(n / lanes)``;
  ``POOL``: ``vector_startup + ceil(oh·ow·c·kh·kw / lanes)`` (every window element read).
- ``SIGNAL`` / ``WAIT``: 1 cycle; ``HALT``: 0.

**Schedule.** Each engine runs its instructions in program order: an instruction
starts when its engine is free and, for a WAIT, when the token it pops was pushed
(the end of the matching SIGNAL). **Races.** The simulator executes in program
order, so the timed schedule must not be able to observe anything else: every
access to a range (SRAM, or DRAM for stores and loads) must start after the last
earlier write to it ended, and a write must start after every earlier read of it
ended. Ranges are an instruction's bounding interval in each space (exact for the
contiguous blocks most instructions touch; conservative for a strided GEMM input or
DMA box). A violation is a SimulationError naming both instructions.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, deque
from dataclasses import dataclass, field

from hetero.plugin import SimulationError
from hetero.plugins.npu_sim.asm import format_instr
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.isa import (
    Buf,
    Copy,
    Engine,
    Gemm,
    Halt,
    Instr,
    Load,
    Pool,
    Requant,
    Signal,
    Store,
    Vec,
    VecImm,
    Wait,
)

#: An accessed range: (space, lo, hi) with space a buffer name or ``"dram"``; [lo, hi)
#: in the space's elements (bytes for DRAM).
Access = tuple[str, int, int]


def dma_runs(dims: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Number of contiguous DRAM runs a box of ``dims`` with byte ``strides`` splits into."""
    runs, expected = math.prod(dims), itemsize
    for size, stride in zip(reversed(dims), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            break
        runs //= size
        expected = size * stride
    return runs


def instr_cycles(instr: Instr, config: NpuConfig, *, load_weights: bool = False) -> int:
    """Cycles ``instr`` occupies its engine; ``load_weights`` says a GEMM must first load the array."""
    if isinstance(instr, (Load, Store)):
        if isinstance(instr, Load):
            shape = [d + lo + hi for d, lo, hi in zip(instr.dims, instr.pad_lo, instr.pad_hi)]
        else:
            shape = list(instr.dims)
        nbytes = math.prod(shape) * instr.dtype.itemsize
        runs = dma_runs(instr.dims, instr.strides, instr.dtype.itemsize)
        return (config.dma_latency_cycles + math.ceil(nbytes / config.dma_bytes_per_cycle)
                + config.dma_run_cycles * (runs - 1))
    if isinstance(instr, Gemm):
        return instr.m + instr.k + instr.n - 1 + (instr.k if load_weights else 0)
    if isinstance(instr, (Vec, VecImm, Copy, Requant)):
        return config.vector_startup_cycles + math.ceil(instr.n / config.vector_lanes)
    if isinstance(instr, Pool):
        reads = instr.oh * instr.ow * instr.c * instr.kh * instr.kw
        return config.vector_startup_cycles + math.ceil(reads / config.vector_lanes)
    if isinstance(instr, Halt):
        return 0
    return 1


@dataclass(frozen=True)
class TimelineEntry:
    """One instruction in the timed schedule: cycles [start, end) on ``engine``."""

    index: int
    engine: str
    start: int
    end: int
    text: str
    tag: str


@dataclass
class SimStats:
    """What a run cost. ``kind_cycles`` sums engine-busy cycles per mnemonic;
    ``sram_high_water`` is the highest byte offset written per buffer;
    ``utilisation`` is MACs / (cycles · rows · cols)."""

    cycles: int = 0
    seconds: float = 0.0
    engine_busy: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    kind_cycles: dict[str, int] = field(default_factory=dict)
    macs: int = 0
    utilisation: float = 0.0
    dma_bytes: int = 0
    sram_high_water: dict[str, int] = field(default_factory=dict)
    timeline: list[TimelineEntry] = field(default_factory=list)


# A use of a range: (end cycle, instruction index, mnemonic).
_Use = tuple[int, int, str]


class _Ranges:
    """Last writer and readers since, per disjoint interval of one address space."""

    def __init__(self) -> None:
        self.bounds: list[int] = [0]
        self.cells: list[tuple[_Use | None, dict[str, _Use]]] = [(None, {})]

    def _split(self, at: int) -> int:
        k = bisect.bisect_right(self.bounds, at) - 1
        if self.bounds[k] == at:
            return k
        writer, readers = self.cells[k]
        self.bounds.insert(k + 1, at)
        self.cells.insert(k + 1, (writer, dict(readers)))
        return k + 1

    def span(self, lo: int, hi: int) -> range:
        """Split at ``lo`` and ``hi``; the cell indices covering [lo, hi)."""
        first = self._split(lo)
        last = self._split(hi)
        return range(first, last)


class Timing:
    """Schedules instructions fed in program order and checks their accesses for races."""

    def __init__(self, config: NpuConfig, *, timeline: bool = False) -> None:
        self.config = config
        self.free = {engine: 0 for engine in Engine}
        self.queues: dict[tuple[Engine, Engine], deque[int]] = {}
        self.spaces: dict[str, _Ranges] = {}
        self.weights: tuple[int, int, int] | None = None
        self.stats = SimStats(engine_busy={e.value: 0 for e in Engine},
                              sram_high_water={b.value: 0 for b in Buf})
        self.counts: Counter[str] = Counter()
        self.kind_cycles: Counter[str] = Counter()
        self.record = timeline

    def issue(self, index: int, instr: Instr, reads: list[Access], writes: list[Access]) -> None:
        """Place ``instr`` (program position ``index``) in the schedule; SimulationError on a race."""
        engine = instr.engine
        start = self.free[engine]
        if isinstance(instr, Wait):
            queue = self.queues.get((instr.src, instr.dst))
            if not queue:
                raise SimulationError(
                    f"WAIT #{index} `{format_instr(instr)}`: no SIGNAL {instr.src.value} -> {instr.dst.value} "
                    f"before it is left to consume; the engine would wait forever"
                )
            start = max(start, queue.popleft())
        load_weights = False
        if isinstance(instr, Gemm):
            key = (instr.wgt_off, instr.k, instr.n)
            load_weights = self.weights != key
            self.weights = key
        end = start + instr_cycles(instr, self.config, load_weights=load_weights)
        if isinstance(instr, Signal):
            self.queues.setdefault((instr.src, instr.dst), deque()).append(end)
        self.free[engine] = end
        for space, lo, hi in reads:
            self._read(index, instr, space, lo, hi, start, end)
        for space, lo, hi in writes:
            self._write(index, instr, space, lo, hi, start, end)
        self._account(index, instr, engine, start, end)

    def finish(self) -> SimStats:
        """The statistics of everything issued."""
        stats = self.stats
        stats.cycles = max(self.free.values())
        stats.seconds = self.config.cycles_to_seconds(stats.cycles)
        stats.counts = dict(self.counts)
        stats.kind_cycles = dict(self.kind_cycles)
        peak = stats.cycles * self.config.peak_macs_per_cycle
        stats.utilisation = stats.macs / peak if peak else 0.0
        return stats

    def _account(self, index: int, instr: Instr, engine: Engine, start: int, end: int) -> None:
        stats = self.stats
        stats.engine_busy[engine.value] += end - start
        self.counts[instr.MNEMONIC] += 1
        self.kind_cycles[instr.MNEMONIC] += end - start
        if isinstance(instr, Gemm):
            stats.macs += instr.m * instr.k * instr.n
        if isinstance(instr, (Load, Store)):
            stats.dma_bytes += math.prod(instr.dims) * instr.dtype.itemsize
        if self.record:
            stats.timeline.append(TimelineEntry(index, engine.value, start, end, format_instr(instr), instr.tag))

    def _read(self, index: int, instr: Instr, space: str, lo: int, hi: int, start: int, end: int) -> None:
        ranges = self.spaces.setdefault(space, _Ranges())
        for k in ranges.span(lo, hi):
            writer, readers = ranges.cells[k]
            if writer is not None and writer[1] != index and writer[0] > start:
                self._race(index, instr, space, ranges, k, lo, hi, f"reads {{where}} before {writer[2]} #{writer[1]} "
                           f"has finished writing it (cycle {start} < {writer[0]})")
            readers[instr.engine.value] = (end, index, instr.MNEMONIC)

    def _write(self, index: int, instr: Instr, space: str, lo: int, hi: int, start: int, end: int) -> None:
        if space == "wgt" and self.weights is not None and not isinstance(instr, Gemm):
            w_lo = self.weights[0]
            if lo < w_lo + self.weights[1] * self.weights[2] and w_lo < hi:
                self.weights = None
        if space != "dram":
            high = hi * Buf(space).itemsize
            self.stats.sram_high_water[space] = max(self.stats.sram_high_water[space], high)
        ranges = self.spaces.setdefault(space, _Ranges())
        cells = ranges.span(lo, hi)
        for k in cells:
            writer, readers = ranges.cells[k]
            if writer is not None and writer[1] != index and writer[0] > start:
                self._race(index, instr, space, ranges, k, lo, hi, f"overwrites {{where}} before {writer[2]} "
                           f"#{writer[1]} has finished writing it (cycle {start} < {writer[0]})")
            for reader in readers.values():
                if reader[1] != index and reader[0] > start:
                    self._race(index, instr, space, ranges, k, lo, hi, f"overwrites {{where}} still read by "
                               f"{reader[2]} #{reader[1]} (cycle {start} < {reader[0]})")
        # One cell now covers [lo, hi): the range has a single last writer and no readers.
        del ranges.bounds[cells.start + 1:cells.stop]
        del ranges.cells[cells.start + 1:cells.stop]
        ranges.cells[cells.start] = ((end, index, instr.MNEMONIC), {})

    @staticmethod
    def _race(index: int, instr: Instr, space: str, ranges: _Ranges, k: int, lo: int, hi: int, what: str) -> None:
        cell_hi = ranges.bounds[k + 1] if k + 1 < len(ranges.bounds) else hi
        where = f"{space}[{max(lo, ranges.bounds[k])}:{min(hi, cell_hi)}]"
        raise SimulationError(
            f"race: {instr.MNEMONIC} #{index} `{format_instr(instr)}` {what.format(where=where)}; "
            f"add a WAIT on a SIGNAL sent after that instruction"
        )
