"""Integer convolution kernels on the CPU: the shifted input computed once, not per product.

A lowered QConv multiplies ``x - x_zero`` by the weight, where off the input (in the
padding) ``x`` reads as ``x_zero`` so that the shifted value is 0, as the op's
reference pads ``X - x_zero`` with 0 (:mod:`hetero.core.lower.qint`). Read that way,
every product of the register-tiled micro-kernel
(:mod:`~hetero.plugins.llvm_cpu.schedules_tiled`) recomputes, for the scalar it
broadcasts, the window's bounds test, the clamped index, the widening and the shift:
about ten scalar instructions beside each row's two vector multiply-adds, which is
where the kernel's time went.

:func:`shift_windows` computes that operand once per call instead, as the reference
does, in a stage before the convolution, padded on every side a window reaches past the
input, and the convolution reads it at the unclamped position: the products then
broadcast a plain load. Where the sum is int32 and the other factor a weight (QConv,
QMatMul), the stage holds ``x + 128`` as an unsigned byte (``128 + x_zero`` in the
padding, which is what ``x - x_zero = 0`` reads as), and the sum subtracts ``(128 +
x_zero)`` times each output channel's weight sum, a stage of its own:
``sum((x - x_zero) · w) = sum((x + 128) · w) - (128 + x_zero) · sum(w)``, exactly, in
the same int32 bound (|x + 128| <= 255). A product of a zero-extended byte and a
sign-extended one is what LLVM's x86 backend turns into ``vpmaddwd``, fused with its
add into ``vpdpwssd`` where the host has AVX-512 VNNI (or AVX-VNNI), in place of
``vpmulld`` and ``vpaddd``; on other targets it stays a widening multiply-add. Otherwise
(an int64 sum) the stage holds ``x - x_zero`` in the sum's type.

Measured on the development host (AMD EPYC, znver5, one thread), a 3x3 QConv from 64
to 128 channels at 14x14 ran 2.9x faster for the int32 stage; a 1x1 one 1.2x (256 to
1024 channels at 14x14) to 1.3x (64 to 256 at 56x56); SqueezeNet quantised 15.1 ms to
7.4 ms. The byte form with ``vpdpwssd`` took ResNet-50 from 54.4 ms to 49.9 ms more.

Each ``vpdpwssd`` does one useful product of its two per lane (the byte's upper half is
0): pairing two reduction steps into its lanes, or ``vpdpbusd``'s four, needs operands
interleaved along the reduction, which LLVM forms only from a loop carrying a single sum
(its partial-reduction lowering), never from the many a register tile holds; and the
tensor IR has no vector-typed expression through which a renderer could call the
instruction directly. The weight sums read only the constant weight, so the backend
computes them once, when compiling (:mod:`~hetero.plugins.llvm_cpu.prepack`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import compute, lower, placeholder, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    INDEX, Binary, Cast, Const, Expr, Load, Select, Var, cast, const, ge, logical_and, lt,
    maximum, minimum, select,
)
from hetero.core.ir.tir.functor import StmtExprMutator
from hetero.core.ir.tir.stmt import Allocate, Block, For, PrimFunc, Seq, Stmt, Store
from hetero.core.lower.elementwise import compute_nd
from hetero.core.schedule.region import affine
from hetero.core.schedule.tree import block_names
from hetero.plugins.llvm_cpu.nests import reduction_nest

_INT8 = np.dtype("int8")
_UINT8 = np.dtype("uint8")
_INT32 = np.dtype("int32")
#: Added to an int8 input to make it unsigned: x86 multiplies a zero-extended byte by a
#: sign-extended one with ``vpmaddwd`` (``vpdpwssd``, which adds too, with AVX-512 VNNI),
#: where a signed pair of int32 operands takes ``vpmulld`` and ``vpaddd``.
_U8_OFFSET = 128


@dataclass(frozen=True)
class _ShiftedRead:
    """One read ``cast(select(inside, x[clamped], zero)) - zero`` of an int8 input, with
    the unclamped position of each axis and the padding the window needs before/after it."""

    operand: Expr  # the whole shifted operand, as the block reads it
    source: Buffer
    positions: tuple[Expr, ...]
    pads: tuple[tuple[int, int], ...]
    zero: int
    dtype: np.dtype
    # The other factor's int8 read, and its axis indexed by the output channel, where
    # every other axis is one reduction loop (a QConv's or QMatMul's weight): the sum
    # of its reduction axes is the offset's compensation.
    weight: tuple[Load, int] | None = None


def shift_windows(func: PrimFunc) -> PrimFunc:
    """``func`` with each integer convolution reading a precomputed, zero-padded ``x - x_zero``.

    A block qualifies when it is one reduction of products whose one operand is an int8
    input shifted by a constant zero point (read through window bounds or not); other
    functions come back unchanged.
    """
    for name in block_names(func.body):
        read = _shifted_read(func, name)
        if read is not None:
            func = _rewrite(func, name, read)
    return func


def _shifted_read(func: PrimFunc, block_name: str) -> _ShiftedRead | None:
    nest = reduction_nest(func, block_name)
    if nest is None or not nest.spatial:  # a sum to one scalar has no output channel
        return None
    update = nest.update_body
    if not (isinstance(update, Store) and isinstance(update.value, Binary) and update.value.op == "add"
            and isinstance(update.value.b, Binary) and update.value.b.op == "mul"
            and update.value.b.dtype.kind == "i"):
        return None
    extents = {f.var: f.extent for f in _loops(nest.spatial[0])}
    params = {b.name for b in func.params}
    factors = (update.value.b.a, update.value.b.b)
    for operand, other in (factors, factors[::-1]):
        read = _match(operand, extents, params)
        if read is not None:
            return replace(read, weight=_weight(other, {f.var for f in nest.spatial}, set(extents)))
    return None


def _weight(factor: Expr, spatial: set[Var], loops: set[Var]) -> tuple[Load, int] | None:
    """``factor``'s int8 read and its output-channel axis, if it is a weight's read."""
    if not (isinstance(factor, Cast) and isinstance(factor.a, Load) and factor.a.buffer.dtype == _INT8):
        return None
    load = factor.a
    if not all(isinstance(i, Var) and i in loops for i in load.indices) or len(set(load.indices)) != len(load.indices):
        return None
    channel = [axis for axis, i in enumerate(load.indices) if i in spatial]
    return (load, channel[0]) if len(channel) == 1 else None


def _loops(stmt: object) -> list[For]:
    """Every loop of a nest, outermost first."""
    found = []
    while isinstance(stmt, (For, Allocate, Seq)):
        if isinstance(stmt, For):
            found.append(stmt)
            stmt = stmt.body
        elif isinstance(stmt, Allocate):
            stmt = stmt.body
        else:
            found.extend(loop for s in stmt.stmts for loop in _loops(s))
            return found
    return found


def _match(operand: Expr, extents: dict[Var, int], params: set[str]) -> _ShiftedRead | None:
    """The shifted read ``operand`` is, or None."""
    if not (isinstance(operand, Binary) and operand.op == "sub" and isinstance(operand.b, Const)
            and isinstance(operand.a, Cast)):
        return None
    inner, zero = operand.a.a, int(operand.b.value)
    if isinstance(inner, Select):
        if not (isinstance(inner.b, Const) and int(inner.b.value) == zero):
            return None
        inner = inner.a
    if not (isinstance(inner, Load) and inner.buffer.dtype == _INT8 and inner.buffer.name in params):
        return None
    positions, pads = [], []
    for size, index in zip(inner.buffer.shape, inner.indices):
        position = _unclamped(index)
        bounds = _range(position, extents)
        if bounds is None:
            return None
        lo, hi = bounds
        before, after = max(0, -lo), max(0, hi - (size - 1))
        if (before or after) and position is index:
            return None  # reads past the input unclamped: not a window read we know
        positions.append(position)
        pads.append((before, after))
    return _ShiftedRead(operand, inner.buffer, tuple(positions), tuple(pads), zero, operand.dtype)


def _unclamped(index: Expr) -> Expr:
    """``p`` for ``min(max(p, 0), n)``, ``max(p, 0)`` or ``min(p, n)``; else ``index``."""
    if isinstance(index, Binary) and index.op == "min" and isinstance(index.b, Const):
        index = index.a
    if isinstance(index, Binary) and index.op == "max" and isinstance(index.b, Const) and index.b.value == 0:
        index = index.a
    return index


def _range(index: Expr, extents: dict[Var, int]) -> tuple[int, int] | None:
    """The least and greatest value of the affine ``index`` over the loops, or None."""
    form = affine(index)
    if form is None or any(v not in extents for v in form[0]):
        return None
    coeffs, offset = form
    lo = offset + sum(min(0, c * (extents[v] - 1)) for v, c in coeffs.items())
    hi = offset + sum(max(0, c * (extents[v] - 1)) for v, c in coeffs.items())
    return lo, hi


def _rewrite(func: PrimFunc, block_name: str, read: _ShiftedRead) -> PrimFunc:
    """``func`` with a stage writing the padded shifted input before ``block_name``, which
    reads it: as bytes offset to unsigned, with the weights' compensation subtracted from
    the sum, where the sum is int32 and the other factor a weight; else as ``x - x_zero``."""
    offset = read.weight is not None and read.dtype == _INT32
    stage_dtype = _UINT8 if offset else read.dtype
    # Off the input the stage holds what x - x_zero = 0 reads as in its encoding.
    fill = _U8_OFFSET + read.zero if offset else 0
    source = placeholder(read.source.shape, read.source.dtype, read.source.name)
    shape = tuple(n + b + a for n, (b, a) in zip(read.source.shape, read.pads))

    def element(idx: tuple[Expr, ...]) -> Expr:
        inside: Expr | None = None
        index = []
        for i, n, (before, after) in zip(idx, read.source.shape, read.pads):
            p = i - before if before else i
            checks = ([ge(p, 0)] if before else []) + ([lt(p, n)] if after else [])
            for check in checks:
                inside = check if inside is None else logical_and(inside, check)
            index.append(minimum(maximum(p, 0), n - 1) if before or after else p)
        wide = cast(source[tuple(index)], read.dtype)
        value = (cast(wide + const(_U8_OFFSET, read.dtype), _UINT8) if offset
                 else wide - const(read.zero, read.dtype))
        return value if inside is None else select(inside, value, const(fill, stage_dtype))

    shifted = compute_nd(shape, element, f"{read.source.name}_shifted_{block_name}", stage_dtype)
    stage = lower("shift", [source], [shifted])
    buffer = stage.params[-1]
    padded = tuple(p + b if b else p for p, (b, _) in zip(read.positions, read.pads))
    replaced: Expr = Load(buffer, tuple(_index(p) for p in padded), stage_dtype)
    if offset:
        replaced = cast(replaced, read.dtype)
    body = _Replace(block_name, read.operand, replaced).visit_stmt(func.body)
    if offset:
        assert read.weight is not None  # offset implies a weight
        body = _compensated(func, body, block_name, read.weight, _U8_OFFSET + read.zero)
    return replace(func, body=Allocate(buffer, Seq((stage.body, body))))


def _compensated(func: PrimFunc, body: Stmt, block_name: str, weight: tuple[Load, int],
                 scale: int) -> Stmt:
    """``body`` whose ``block_name`` subtracts ``scale`` times the sum of the weights of
    each output channel from its sum before the epilogue, in a stage of its own (which
    reads only the weight, so the CPU backend computes it once, when compiling)."""
    load, channel = weight
    w = placeholder(load.buffer.shape, load.buffer.dtype, load.buffer.name)
    axes = [reduce_axis(n, f"{load.buffer.name}_sum_k{d}")
            for d, n in enumerate(load.buffer.shape) if d != channel]

    def total(c: Var) -> Expr:
        reduced = iter(a.var for a in axes)
        index = tuple(c if d == channel else next(reduced) for d in range(len(load.buffer.shape)))
        return sum_(cast(w[index], _INT32), axes) * const(scale, _INT32)

    sums = compute((load.buffer.shape[channel],), total, f"{load.buffer.name}_sum_{block_name}", _INT32)
    stage = lower("compensation", [w], [sums])
    table = stage.params[-1]
    nest = reduction_nest(replace(func, body=body), block_name)
    assert nest is not None  # the block was matched as one
    acc = nest.accumulator.buffer
    store = nest.accumulator.body.stmts[2]
    fixed = _Replace(None, Load(acc, (const(0, INDEX),), acc.dtype),
                     Load(acc, (const(0, INDEX),), acc.dtype) - Load(table, (load.indices[channel],), _INT32))
    body = _ReplaceStmt(store, fixed.visit_stmt(store)).visit_stmt(body)
    return Allocate(table, Seq((stage.body, body)))


def _index(p: Expr) -> Expr:
    return p if p.dtype == INDEX else cast(p, INDEX)


class _Replace(StmtExprMutator):
    """Every occurrence of one expression, inside one block (or anywhere: None), becomes another."""

    def __init__(self, block_name: str | None, old: Expr, new: Expr) -> None:
        self.block_name, self.old, self.new, self.inside = block_name, old, new, block_name is None

    def visit_Block(self, s: Block) -> Block:
        if self.block_name is None:
            return super().visit_Block(s)  # type: ignore[return-value]
        if s.name != self.block_name:
            return s
        self.inside = True
        try:
            return super().visit_Block(s)  # type: ignore[return-value]
        finally:
            self.inside = False

    def visit_expr(self, e: Expr) -> Expr:
        if self.inside and e == self.old:
            return self.new
        return super().visit_expr(e)


class _ReplaceStmt(StmtExprMutator):
    """One statement becomes another."""

    def __init__(self, old: Stmt, new: Stmt) -> None:
        self.old, self.new = old, new

    def visit_Store(self, s: Store) -> Stmt:
        return self.new if s == self.old else s
