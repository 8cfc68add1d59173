"""Latency and resource estimates of a scheduled tensor-IR function on an FPGA part.

No synthesis tool runs here, so this module is the backend's model of what Vitis HLS
would make of a schedule: latency in cycles per loop nest and the DSP, BRAM_18K, URAM,
LUT and flip-flop counts, checked against a declared
:class:`~hetero.plugins.fpga_hls.device.FpgaPart`. The rules are HLS's own, simplified:

Latency
    A serial loop runs ``extent x (body + 1)`` cycles (one cycle of loop control an
    iteration; none for a loop of one iteration, which HLS removes); a loop unrolled by
    ``f`` (``unroll_factor=f``) runs ``ceil(extent / f) x (body + 1)`` with its copies side
    by side, and an ``UNROLLED`` one its body's cycles once. A pipelined loop runs
    ``(trip - 1) x II + depth`` cycles, Vitis's formula, where ``trip`` is its extent over
    its unroll factor and ``depth`` the latency of one iteration (its loads, the operators
    on its longest path, its store); every loop inside a pipelined loop is unrolled whole,
    as HLS does. A store outside a pipeline takes its depth.

Initiation interval
    The interval achieved is the largest of the one asked for and two limits:

    - *Memory ports.* A BRAM or URAM bank has two ports, shared by reads and writes; a
      buffer left in off-chip memory has an AXI read channel and a write channel of its
      own (one bundle an argument), each an access a cycle; registers have no limit.
      An access site unrolled over ``k`` lanes (the unrolled loops its indices name; a
      site whose indices name none of them reads one element, once) spreads over
      ``prod_d min(banks_d, lanes_d)`` banks, where ``lanes_d`` multiplies the lanes
      dimension ``d``'s index names: a partition helps only the dimension the unrolled
      loops walk. The busiest bank sets ``II >= ceil(accesses / ports)``. Identical
      accesses (same buffer, same indices) count once, as HLS merges them.
    - *Loop-carried dependences.* A store ``B[idx] = B[idx] op e`` whose indices do not
      name the pipelined loop updates one element every iteration: the next iteration's
      read waits for this one's write, so ``II >= the chain's latency``: the adder's
      latency times the copies chained into that element for floats (HLS keeps their
      order), the adder's alone for integers (which it may re-associate into a tree).

Resources
    DSPs, LUTs and FFs per operator come from :data:`FLOAT_OPS` (Vitis HLS full-DSP
    floating-point cores at 300 MHz on UltraScale+, after AMD's PG060 tables, rounded)
    and :func:`int_mul_dsp` for integer and fixed-point products by width (one DSP48E2
    multiplies 27 x 18 bits), the width HLS's bit-width analysis would see: an int8
    widened to int32 for the product is still 8 bits, so an int8 multiply-add is a DSP. In a pipelined loop every unrolled copy is an operator of
    its own, shared over the interval: ``ceil(copies / II)``; index arithmetic is LUTs.
    Memory per allocated buffer: one bank per partition, each ``ceil(bits / 18 Kb)``
    BRAM_18K (``bram``, ``shared`` and ``local`` arrays above :data:`REGISTER_ELEMENTS`
    elements) or ``ceil(bits / 288 Kb)`` URAM (``uram``); a bank of one element, and a
    small ``local`` array, is flip-flops. Arguments live off-chip and cost none.

These are estimates: a bank conflict HLS cannot rule out statically (an index clamped
with ``min``/``max``) is counted as spread, and operator sharing across loop nests is
not modelled (each nest's operators are counted, which over-counts a little).

    >>> est = estimate(schedule, PRESETS["u50"])          # doctest: +SKIP
    >>> print(est.table())                                # doctest: +SKIP
    >>> est.fits().ok                                     # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
import math
from typing import Any

import numpy as np

from hetero.plugin import PluginError
from hetero.plugin.schedule import Schedule
from hetero.plugin.tir import (
    Allocate, BOOL, Barrier, Binary, Block, Buffer, Call, Cast, Compare, Const, Evaluate, Expr, For, ForKind, INDEX,
    IfThenElse, Load, Logical, Not, Partition, PrimFunc, Select, Seq, Stmt, Store, Var, exprs_of, walk,
)
from hetero.plugins.fpga_hls.device import BRAM_18K_BITS, RAM_PORTS, URAM_BITS, FpgaPart, get_part

#: ``local`` arrays of at most this many elements are registers (HLS's threshold for small arrays).
REGISTER_ELEMENTS = 64
#: Cycles of a BRAM, URAM or burst AXI read before its value is there.
LOAD_LATENCY = 1
#: LUTs of one memory access's address and enable logic.
ACCESS_LUT = 8


@dataclass(frozen=True)
class OpCost:
    """One operator instance: DSP48E2 slices, LUTs, flip-flops and latency in cycles."""

    dsp: int
    lut: int
    ff: int
    latency: int


#: Floating-point operators by (op, bits): Vitis HLS full-DSP cores at 300 MHz (rounded from PG060).
FLOAT_OPS: dict[tuple[str, int], OpCost] = {
    ("add", 32): OpCost(2, 220, 350, 4), ("mul", 32): OpCost(3, 80, 150, 4),
    ("div", 32): OpCost(0, 800, 1400, 16), ("cmp", 32): OpCost(0, 70, 70, 1),
    ("add", 16): OpCost(2, 120, 200, 4), ("mul", 16): OpCost(1, 60, 100, 3),
    ("div", 16): OpCost(0, 300, 500, 10), ("cmp", 16): OpCost(0, 40, 40, 1),
    ("add", 64): OpCost(3, 700, 1100, 6), ("mul", 64): OpCost(11, 200, 350, 6),
    ("div", 64): OpCost(0, 3200, 3300, 30), ("cmp", 64): OpCost(0, 140, 140, 1),
}
#: A floating-point math function (exp, log, tanh...): a CORDIC-free polynomial core, roughly.
FLOAT_FUNCTION = OpCost(7, 1500, 1800, 20)
#: A float <-> integer conversion.
FLOAT_CAST = OpCost(0, 200, 250, 4)
_FLOAT_OP_CLASS = {"add": "add", "sub": "add", "mul": "mul", "div": "div", "min": "cmp", "max": "cmp"}
#: Ops that accumulate (``B[i] = B[i] op e`` carries a dependence through ``op``).
_ACCUMULATING = ("add", "sub", "mul", "min", "max")


def int_mul_dsp(bits: int) -> int:
    """DSP48E2 slices of a ``bits x bits`` integer or fixed-point product (27 x 18 a slice):
    1 up to 18 bits, 2 up to 27, 3 up to 36 (int32), 6 up to 54, 10 beyond."""
    for most, dsp in ((18, 1), (27, 2), (36, 3), (54, 6)):
        if bits <= most:
            return dsp
    return 10


def op_cost(op: str, dtype: np.dtype, *, by_constant: bool = False, bits: int | None = None) -> OpCost:
    """The cost of one ``op`` (a Binary op name, ``"cmp"``, ``"select"``, ``"cast"`` or an
    intrinsic's name) on ``dtype``; ``by_constant`` for an integer product by a literal,
    which HLS builds from shifts and adds; ``bits`` for an integer product whose operands
    are known to be narrower than ``dtype`` (widened int8 values: HLS narrows them back)."""
    dtype = np.dtype(dtype)
    bits = dtype.itemsize * 8 if bits is None else min(bits, dtype.itemsize * 8)
    if dtype.kind == "f":
        if op == "cast":
            return FLOAT_CAST
        cls = _FLOAT_OP_CLASS.get(op, "cmp" if op in ("cmp", "select") else None)
        if cls is None:
            return FLOAT_FUNCTION
        if op == "select":
            return OpCost(0, bits, 0, 0)
        return FLOAT_OPS.get((cls, bits), FLOAT_OPS[(cls, 32)])
    if op == "mul" and not by_constant:
        return OpCost(int_mul_dsp(bits), bits // 2, 2 * bits, 3)
    if op in ("div", "tdiv", "floordiv", "mod"):
        return OpCost(0, bits * bits // 2, bits * bits // 2, bits // 2)
    if op == "select":
        return OpCost(0, bits, 0, 0)
    return OpCost(0, bits, bits, 1)


@dataclass(frozen=True)
class Resources:
    """Programmable resources a design uses (or a part has)."""

    dsp: int = 0
    bram_18k: int = 0
    uram: int = 0
    lut: int = 0
    ff: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.dsp + other.dsp, self.bram_18k + other.bram_18k, self.uram + other.uram,
                         self.lut + other.lut, self.ff + other.ff)

    @staticmethod
    def of_part(part: FpgaPart) -> Resources:
        return Resources(part.dsp, part.bram_18k, part.uram, part.lut, part.ff)


@dataclass(frozen=True)
class PipelineEstimate:
    """One pipelined loop: ``trip`` iterations started every ``ii`` cycles (``limit`` says what
    set it, when not the request), ``depth`` cycles each; ``cycles`` per run of the loop."""

    loop: str
    trip: int
    ii_requested: int
    ii: int
    limit: str
    depth: int
    cycles: int


@dataclass(frozen=True)
class NestEstimate:
    """One outermost loop nest of a function: its loops (name, extent, kind, outermost first,
    in program order), its latency in cycles, its operators' resources and its pipelines."""

    name: str
    loops: tuple[tuple[str, int, str], ...]
    cycles: int
    resources: Resources
    pipelines: tuple[PipelineEstimate, ...]


@dataclass(frozen=True)
class BufferEstimate:
    """One allocated buffer's on-chip memory: ``banks`` after partitioning, and what they use."""

    name: str
    scope: str
    shape: tuple[int, ...]
    dtype: str
    banks: int
    bram_18k: int
    uram: int
    ff: int


@dataclass(frozen=True)
class Fit:
    """Whether a design fits a part: ``over`` names each resource it overflows."""

    ok: bool
    part: str
    over: tuple[str, ...]
    message: str

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Estimate:
    """A function's estimate on ``part``: its loop nests, its buffers and the totals."""

    func: str
    part: FpgaPart
    nests: tuple[NestEstimate, ...]
    buffers: tuple[BufferEstimate, ...]
    cycles: int
    resources: Resources

    @property
    def seconds(self) -> float:
        """The latency in seconds at the part's clock."""
        return self.cycles / (self.part.clock_mhz * 1e6)

    def fits(self, part: FpgaPart | str | None = None) -> Fit:
        """Whether the design fits ``part`` (default: the part it was estimated for)."""
        target = self.part if part is None else get_part(part)
        have, need = Resources.of_part(target), self.resources
        over = tuple(f"{label} {getattr(need, key)} of {getattr(have, key)} "
                     f"({100 * getattr(need, key) / max(getattr(have, key), 1):.0f}%)"
                     for key, label in _RESOURCE_LABELS if getattr(need, key) > getattr(have, key))
        if over:
            message = f"{self.func} does not fit {target.name} ({target.family}): it needs " + ", ".join(over)
        else:
            message = f"{self.func} fits {target.name} ({target.family}): " + ", ".join(
                f"{label} {getattr(need, key)} of {getattr(have, key)}" for key, label in _RESOURCE_LABELS)
        return Fit(not over, target.name, over, message)

    def require_fit(self, part: FpgaPart | str | None = None) -> None:
        """Raise PluginError with :meth:`fits`'s message when the design does not fit."""
        verdict = self.fits(part)
        if not verdict.ok:
            raise PluginError(f"fpga_hls: {verdict.message}; shrink the unroll factors or pick a larger part")

    def rows(self) -> list[tuple[str, ...]]:
        """The report's table: a header, a row a nest, and the total."""
        head = ("nest", "cycles", "II", "depth", "DSP", "LUT", "FF")
        rows = [head]
        for n in self.nests:
            iis = ",".join(str(p.ii) for p in n.pipelines) or "-"
            depths = ",".join(str(p.depth) for p in n.pipelines) or "-"
            r = n.resources
            rows.append((n.name, str(n.cycles), iis, depths, str(r.dsp), str(r.lut), str(r.ff)))
        t = self.resources
        rows.append(("total", str(self.cycles), "", "", str(t.dsp), str(t.lut), str(t.ff)))
        return rows

    def table(self) -> str:
        """:meth:`rows` aligned in columns, then the buffers and the verdict."""
        lines = _align(self.rows())
        if self.buffers:
            lines.append("")
            lines += _align([("buffer", "scope", "shape", "banks", "BRAM_18K", "URAM", "FF")] + [
                (b.name, b.scope, "x".join(map(str, b.shape)), str(b.banks), str(b.bram_18k), str(b.uram),
                 str(b.ff)) for b in self.buffers])
        lines.append("")
        lines.append(f"{self.cycles} cycles = {self.seconds * 1e6:.3g} us at {self.part.clock_mhz:g} MHz; "
                     + self.fits().message)
        return "\n".join(lines)


_RESOURCE_LABELS = (("dsp", "DSP"), ("bram_18k", "BRAM_18K"), ("uram", "URAM"), ("lut", "LUT"), ("ff", "FF"))


def estimate(func: PrimFunc | Schedule, part: FpgaPart | str | None = None, formats: Any = None) -> Estimate:
    """The latency and resources of ``func`` (or a schedule's current function) on ``part``.

    ``formats`` (a :class:`~hetero.plugins.fpga_hls.fixed.KernelFormats`) says the kernel
    computes its float32 values in fixed point: additions, comparisons and selects then
    cost what integer ones of the compute format's width do, multiplies
    :func:`int_mul_dsp` of that width, an accumulation carries the integer adder's
    one-cycle recurrence, and each float32 buffer holds its format's bits an element;
    divisions and math functions stay float (the emitter computes them in float), with a
    conversion in and out.
    """
    if isinstance(func, Schedule):
        func = func.func
    target = get_part(part)
    allocations = {s.buffer: s.partitions for s in walk(func.body) if isinstance(s, Allocate)}
    model = _Model(allocations, None if formats is None else formats.compute.width)
    nests = tuple(model.nest(name, loop) for name, loop in _outer_loops(func.body, func.name))
    model.ops = Resources()
    loose = model.cycles(func.body, outer_only=True)
    buffers = tuple(buffer_estimate(b, p, _element_bits(b, formats)) for b, p in allocations.items()
                    if b.scope != "global")
    memory = Resources(bram_18k=sum(b.bram_18k for b in buffers), uram=sum(b.uram for b in buffers),
                       ff=sum(b.ff for b in buffers))
    total = sum((n.resources for n in nests), model.ops) + memory
    return Estimate(func.name, target, nests, buffers, sum(n.cycles for n in nests) + loose, total)


def _element_bits(buffer: Buffer, formats: Any) -> int | None:
    """The bits an element of ``buffer`` takes under ``formats`` (None: its dtype's)."""
    if formats is None or buffer.dtype != np.float32:
        return None
    return formats.of(buffer).width


def buffer_estimate(buffer: Buffer, partitions: Iterable[Partition] = (),
                    element_bits: int | None = None) -> BufferEstimate:
    """The banks of ``buffer`` partitioned by ``partitions`` and the memory they take, each
    element ``element_bits`` wide (by default its dtype's width)."""
    banks_by_dim = _banks_by_dim(buffer, tuple(partitions))
    banks = math.prod(banks_by_dim)
    per_bank = math.prod(-(-extent // b) for extent, b in zip(buffer.shape, banks_by_dim))
    width = buffer.dtype.itemsize * 8 if element_bits is None else element_bits
    bits = per_bank * width
    bram = uram = ff = 0
    if _is_registers(buffer, banks_by_dim):
        ff = buffer.size * width
    elif buffer.scope == "uram":
        uram = banks * -(-bits // URAM_BITS)
    else:
        bram = banks * -(-bits // BRAM_18K_BITS)
    return BufferEstimate(buffer.name, buffer.scope, buffer.shape, buffer.dtype.name, banks, bram, uram, ff)


# -- the model ---------------------------------------------------------------------------


def _banks_by_dim(buffer: Buffer, partitions: tuple[Partition, ...]) -> list[int]:
    banks = [1] * len(buffer.shape)
    for p in partitions:
        banks[p.dim] = buffer.shape[p.dim] if p.kind == "complete" else p.factor
    return banks


def _is_registers(buffer: Buffer, banks_by_dim: list[int]) -> bool:
    one_element = all(b >= extent for b, extent in zip(banks_by_dim, buffer.shape))
    small_local = buffer.scope == "local" and buffer.size <= REGISTER_ELEMENTS
    return one_element or small_local


def _outer_loops(stmt: Stmt, block: str) -> list[tuple[str, For]]:
    """The outermost loops under ``stmt``, each named ``block/var`` by the block around it."""
    if isinstance(stmt, For):
        return [(f"{block}/{stmt.var.name}", stmt)]
    if isinstance(stmt, Block):
        return _outer_loops(stmt.body, stmt.name)
    if isinstance(stmt, Allocate):
        return _outer_loops(stmt.body, block)
    if isinstance(stmt, Seq):
        return [x for s in stmt.stmts for x in _outer_loops(s, block)]
    if isinstance(stmt, IfThenElse):
        return _outer_loops(stmt.then, block) + (_outer_loops(stmt.otherwise, block) if stmt.otherwise else [])
    return []


def _vars(expr: Expr) -> set[Var]:
    return {e for e in exprs_of(expr) if isinstance(e, Var)}


@dataclass
class _Body:
    """What one iteration of a pipelined loop does, its inner loops unrolled."""

    accesses: dict[tuple[Buffer, tuple[Expr, ...], bool], tuple[int, int]] = field(default_factory=dict)
    ops: Resources = field(default_factory=Resources)
    depth: int = 0
    recurrence: tuple[int, str] = (1, "")


class _Model:
    """Cycles and operators of loop nests; ``partitions`` of every allocated buffer; ``fixed``
    the compute width where float32 values are computed in fixed point."""

    def __init__(self, partitions: Mapping[Buffer, tuple[Partition, ...]], fixed: int | None = None) -> None:
        self.partitions = partitions
        self.fixed = fixed
        self.pipelines: list[PipelineEstimate] = []
        self.ops = Resources()

    def nest(self, name: str, loop: For) -> NestEstimate:
        self.pipelines, self.ops = [], Resources()
        cycles = self.cycles(loop)
        loops = tuple((s.var.name, s.extent, _kind(s)) for s in walk(loop) if isinstance(s, For))
        return NestEstimate(name, loops, cycles, self.ops, tuple(self.pipelines))

    def cycles(self, stmt: Stmt, copies: int = 1, outer_only: bool = False) -> int:
        """Cycles of ``stmt`` run once; its operators (``copies`` of each) join ``self.ops``.
        With ``outer_only``, loops are skipped (they are nests of their own)."""
        if isinstance(stmt, For):
            if outer_only:
                return 0
            if stmt.kind is ForKind.PIPELINED:
                return self._pipeline(stmt, copies)
            factor = stmt.extent if stmt.kind is ForKind.UNROLLED else stmt.annotation("unroll_factor", 1)
            factor = min(factor, stmt.extent)
            body = self.cycles(stmt.body, copies * factor)
            overhead = 0 if factor == stmt.extent else 1
            return -(-stmt.extent // factor) * (body + overhead)
        if isinstance(stmt, (Allocate, Block)):
            return self.cycles(stmt.body, copies, outer_only)
        if isinstance(stmt, Seq):
            return sum(self.cycles(s, copies, outer_only) for s in stmt.stmts)
        if isinstance(stmt, IfThenElse):
            then = self.cycles(stmt.then, copies, outer_only)
            other = self.cycles(stmt.otherwise, copies, outer_only) if stmt.otherwise else 0
            return max(then, other)
        if isinstance(stmt, (Store, Evaluate)):
            body = _Body()
            _Collector(body, {}, None, self.partitions, self.fixed).stmt(stmt)
            self.ops = self.ops + _scaled(body.ops, copies)
            return body.depth
        if isinstance(stmt, Barrier):
            return 0
        raise PluginError(f"fpga_hls estimate: no cycle model for a {type(stmt).__name__}")

    def _pipeline(self, loop: For, copies: int) -> int:
        factor = min(loop.annotation("unroll_factor", 1), loop.extent)
        trip = -(-loop.extent // factor)
        lanes = {loop.var: factor} if factor > 1 else {}
        body = _Body()
        _Collector(body, lanes, loop.var, self.partitions, self.fixed).stmt(loop.body)
        requested = loop.annotation("ii", 1)
        ii, limit = requested, "requested"
        port_ii, port_limit = self._port_limit(body)
        for value, why in ((port_ii, port_limit), body.recurrence):
            if value > ii:
                ii, limit = value, why
        cycles = (trip - 1) * ii + body.depth
        self.pipelines.append(PipelineEstimate(loop.var.name, trip, requested, ii, limit, body.depth, cycles))
        shared = Resources(*(-(-v // ii) for v in (body.ops.dsp, 0, 0, body.ops.lut, body.ops.ff)))
        self.ops = self.ops + _scaled(shared, copies)
        return cycles

    def _port_limit(self, body: _Body) -> tuple[int, str]:
        """The interval the busiest bank allows, and which buffer it is."""
        load: dict[tuple[Buffer, bool], int] = {}
        for (buffer, indices, write), lanes_spread in body.accesses.items():
            accesses, spread = lanes_spread
            key = (buffer, write if buffer.scope == "global" else False)
            load[key] = load.get(key, 0) + -(-accesses // spread)
        worst, why = 1, ""
        for (buffer, write), per_bank in load.items():
            partitions = self.partitions.get(buffer, ())
            if buffer.scope != "global" and _is_registers(buffer, _banks_by_dim(buffer, partitions)):
                continue
            ports = 1 if buffer.scope == "global" else RAM_PORTS
            ii = -(-per_bank // ports)
            if ii > worst:
                kind = ("writes" if write else "reads") if buffer.scope == "global" else "accesses"
                where = "its AXI channel" if buffer.scope == "global" else f"{ports} ports a bank"
                worst, why = ii, f"ports of {buffer.name}: {per_bank} {kind} an iteration on {where}"
        return worst, why


def _kind(loop: For) -> str:
    kind = loop.kind.value
    if loop.kind is ForKind.PIPELINED:
        kind += f" ii={loop.annotation('ii', 1)}"
    factor = loop.annotation("unroll_factor")
    return kind + (f" unroll={factor}" if factor else "")


def _scaled(r: Resources, k: int) -> Resources:
    return Resources(r.dsp * k, r.bram_18k * k, r.uram * k, r.lut * k, r.ff * k)


class _Collector:
    """Walks a pipelined loop's body (or one statement), recording into a :class:`_Body` its
    accesses (with their lanes and spread), operators, depth and recurrence. ``lanes`` maps
    each unrolled loop variable in scope to its extent; ``pipelined`` is the loop's var."""

    def __init__(self, body: _Body, lanes: dict[Var, int], pipelined: Var | None,
                 partitions: Mapping[Buffer, tuple[Partition, ...]], fixed: int | None = None) -> None:
        self.body, self.lanes, self.pipelined, self.partitions = body, dict(lanes), pipelined, partitions
        self.fixed = fixed

    def _fixed(self, dtype: np.dtype) -> bool:
        """Whether values of ``dtype`` are computed in fixed point here."""
        return self.fixed is not None and np.dtype(dtype) == np.float32

    def cost(self, op: str, dtype: np.dtype, **kw: Any) -> OpCost:
        """:func:`op_cost`, with float32 in fixed point costed as :meth:`Estimate` says."""
        if not self._fixed(dtype):
            return op_cost(op, dtype, **kw)
        if op in ("add", "sub", "mul", "min", "max", "cmp", "select"):
            return op_cost(op, np.dtype(np.int64), bits=self.fixed, by_constant=kw.get("by_constant", False))
        if op == "cast":
            return FLOAT_CAST
        float_cost = op_cost(op, dtype)
        return OpCost(float_cost.dsp, float_cost.lut + 2 * FLOAT_CAST.lut, float_cost.ff + 2 * FLOAT_CAST.ff,
                      float_cost.latency + 2 * FLOAT_CAST.latency)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, For):
            outer = dict(self.lanes)
            self.lanes[s.var] = s.extent
            self.stmt(s.body)
            self.lanes = outer
        elif isinstance(s, (Allocate, Block)):
            self.stmt(s.body)
        elif isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, IfThenElse):
            self.expr(s.cond)
            self.stmt(s.then)
            if s.otherwise is not None:
                self.stmt(s.otherwise)
        elif isinstance(s, Store):
            self.store(s)
        elif isinstance(s, Evaluate):
            self.body.depth = max(self.body.depth, self.expr(s.call) + 1)

    def copies(self) -> int:
        return math.prod(self.lanes.values())

    def access(self, buffer: Buffer, indices: tuple[Expr, ...], write: bool) -> None:
        key = (buffer, indices, write)
        if key in self.body.accesses:
            return
        named = [_vars(i) for i in indices]
        every = set().union(*named) if named else set()
        accesses = math.prod(n for v, n in self.lanes.items() if v in every)
        banks = _banks_by_dim(buffer, self.partitions.get(buffer, ()))
        spread = math.prod(min(b, math.prod(n for v, n in self.lanes.items() if v in vs))
                           for b, vs in zip(banks, named))
        self.body.accesses[key] = (accesses, max(spread, 1))
        self.body.ops = self.body.ops + Resources(lut=ACCESS_LUT * accesses)

    def store(self, s: Store) -> None:
        self.access(s.buffer, s.indices, True)
        chained = self._accumulation(s)
        if chained is None:
            depth = self.expr(s.value)
        else:
            op, rest = chained
            depth = self.expr(rest)
            self.access(s.buffer, s.indices, False)
            cost = self.cost(op, s.value.dtype)
            self.body.ops = self.body.ops + _scaled(_resources(cost), self.copies())
            same = [n for v, n in self.lanes.items() if not any(v in _vars(i) for i in s.indices)]
            chain = math.prod(same)
            if s.value.dtype.kind == "f" and not self._fixed(s.value.dtype):
                depth += chain * cost.latency
                recurrence = chain * cost.latency
            else:
                depth += max(1, math.ceil(math.log2(chain + 1))) * cost.latency
                recurrence = cost.latency
            carried = self.pipelined is not None and not any(self.pipelined in _vars(i) for i in s.indices)
            if carried and recurrence > self.body.recurrence[0]:
                self.body.recurrence = (recurrence, f"recurrence on {s.buffer.name}: {chain} {op} of "
                                                    f"{cost.latency} cycles chained an iteration")
        self.body.depth = max(self.body.depth, depth + 1)

    def _accumulation(self, s: Store) -> tuple[str, Expr] | None:
        """``(op, e)`` where ``s`` is ``B[idx] = B[idx] op e`` (or ``e op B[idx]`` for a
        commutative op); None otherwise."""
        v = s.value
        if not isinstance(v, Binary) or v.op not in _ACCUMULATING:
            return None
        same = Load(s.buffer, s.indices, s.buffer.dtype)
        if v.a == same:
            return v.op, v.b
        if v.b == same and v.op != "sub":
            return v.op, v.a
        return None

    def expr(self, e: Expr) -> int:
        """The depth of ``e`` in cycles; its operators and accesses are recorded."""
        if isinstance(e, (Const, Var)):
            return 0
        if isinstance(e, Load):
            self.access(e.buffer, e.indices, False)
            registers = e.buffer.scope != "global" and _is_registers(
                e.buffer, _banks_by_dim(e.buffer, self.partitions.get(e.buffer, ())))
            return 0 if registers else LOAD_LATENCY
        if e.dtype == INDEX or (isinstance(e, (Compare, Logical, Not)) and _index_only(e)):
            self.body.ops = self.body.ops + Resources(lut=8 * self.copies())
            return 0
        if isinstance(e, Binary):
            by_constant = isinstance(e.a, Const) or isinstance(e.b, Const)
            bits = max(_int_bits(e.a), _int_bits(e.b)) if e.dtype.kind in "iu" else None
            cost = self.cost(e.op, e.dtype, by_constant=by_constant, bits=bits)
            inner = max(self.expr(e.a), self.expr(e.b))
        elif isinstance(e, Compare):
            cost = self.cost("cmp", e.a.dtype)
            inner = max(self.expr(e.a), self.expr(e.b))
        elif isinstance(e, (Logical, Not)):
            cost = OpCost(0, 1, 0, 0)
            inner = max(self.expr(x) for x in ((e.a, e.b) if isinstance(e, Logical) else (e.a,)))
        elif isinstance(e, Select):
            cost = self.cost("select", e.dtype)
            inner = max(self.expr(e.cond), self.expr(e.a), self.expr(e.b))
        elif isinstance(e, Cast):
            cost = self.cost("cast", e.dtype if e.dtype.kind == "f" else e.a.dtype)
            inner = self.expr(e.a)
        elif isinstance(e, Call):
            cost = self.cost(e.func, e.dtype)
            inner = max((self.expr(a) for a in e.args), default=0)
        else:
            raise PluginError(f"fpga_hls estimate: no cost model for a {type(e).__name__}")
        self.body.ops = self.body.ops + _scaled(_resources(cost), self.copies())
        return inner + cost.latency


def _int_bits(e: Expr) -> int:
    """The bits an integer value needs, as HLS's bit-width analysis sees through widening:
    a cast from a narrower integer keeps its width, adding a literal one bit more."""
    full = e.dtype.itemsize * 8
    if isinstance(e, Cast) and e.a.dtype.kind in "iub":
        return min(full, _int_bits(e.a))
    if isinstance(e, Const):
        return min(full, int(abs(int(e.value))).bit_length() + 1)
    if isinstance(e, Binary) and e.op in ("add", "sub") and (isinstance(e.a, Const) or isinstance(e.b, Const)):
        return min(full, max(_int_bits(e.a), _int_bits(e.b)) + 1)
    if isinstance(e, Select):
        return min(full, max(_int_bits(e.a), _int_bits(e.b)))
    return full


def _resources(cost: OpCost) -> Resources:
    return Resources(dsp=cost.dsp, lut=cost.lut, ff=cost.ff)


def _index_only(e: Expr) -> bool:
    """Whether a boolean ``e`` tests index values only (a bounds guard): LUTs, no latency."""
    return not any(isinstance(x, Load) or x.dtype not in (INDEX, BOOL) for x in exprs_of(e))


def _align(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
