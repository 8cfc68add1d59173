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
does: a stage before the convolution writes ``x - x_zero`` widened to the sum's type,
into a buffer padded with 0 on every side a window reaches past the input, and the
convolution reads it at the unclamped position. The products then broadcast a plain
load, which the tile issues as one ``vpbroadcastd`` from memory. The values are the
same integers (padding contributes 0 both ways), so results stay bit-exact; the extra
pass over the input costs one multiply-add per input element against the C_out ·
taps of the convolution. Measured on the development host (AMD EPYC, znver5, one
thread), a 3x3 QConv from 64 to 128 channels at 14x14 runs 2.9x faster for it; a 1x1
convolution, which has no bounds to test, 1.2x (256 to 1024 channels at 14x14) to
1.3x (64 to 256 at 56x56); SqueezeNet quantised 15.1 ms to 7.4 ms.

Vector dot-product instructions (AVX-512 VNNI's ``vpdpbusd``, or ``vpmaddwd``) are not
used: LLVM forms them only from a loop that carries a single sum (its partial-
reduction lowering), never from the several independent sums a register tile holds,
and the tensor IR has no vector-typed expression through which a renderer could call
them directly.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import lower, placeholder
from hetero.core.ir.tir.expr import (
    INDEX, Binary, Cast, Const, Expr, Load, Select, Var, cast, const, ge, logical_and, lt,
    maximum, minimum, select,
)
from hetero.core.ir.tir.functor import StmtExprMutator
from hetero.core.ir.tir.stmt import Allocate, Block, For, PrimFunc, Seq, Store
from hetero.core.lower.elementwise import compute_nd
from hetero.core.schedule.region import affine
from hetero.core.schedule.tree import block_names
from hetero.plugins.llvm_cpu.nests import reduction_nest

_INT8 = np.dtype("int8")


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
    if nest is None:
        return None
    update = nest.update_body
    if not (isinstance(update, Store) and isinstance(update.value, Binary) and update.value.op == "add"
            and isinstance(update.value.b, Binary) and update.value.b.op == "mul"
            and update.value.b.dtype.kind == "i"):
        return None
    extents = {f.var: f.extent for f in _loops(nest.spatial[0])}
    params = {b.name for b in func.params}
    for operand in (update.value.b.a, update.value.b.b):
        read = _match(operand, extents, params)
        if read is not None:
            return read
    return None


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
    """``func`` with a stage writing the padded shifted input before ``block_name``, which reads it."""
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
        value = cast(source[tuple(index)], read.dtype) - const(read.zero, read.dtype)
        return value if inside is None else select(inside, value, const(0, read.dtype))

    shifted = compute_nd(shape, element, f"{read.source.name}_shifted_{block_name}", read.dtype)
    stage = lower("shift", [source], [shifted])
    buffer = stage.params[-1]
    padded = tuple(p + b if b else p for p, (b, _) in zip(read.positions, read.pads))
    replaced = Load(buffer, tuple(_index(p) for p in padded), read.dtype)
    body = _Replace(block_name, read.operand, replaced).visit_stmt(func.body)
    return replace(func, body=Allocate(buffer, Seq((stage.body, body))))


def _index(p: Expr) -> Expr:
    return p if p.dtype == INDEX else cast(p, INDEX)


class _Replace(StmtExprMutator):
    """Every occurrence of one expression, inside one block, becomes another."""

    def __init__(self, block_name: str, old: Expr, new: Expr) -> None:
        self.block_name, self.old, self.new, self.inside = block_name, old, new, False

    def visit_Block(self, s: Block) -> Block:
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
