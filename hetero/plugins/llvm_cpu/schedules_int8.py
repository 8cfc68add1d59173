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
(an int64 sum) the stage holds ``x - x_zero`` in the sum's type. A zero point of 0
leaves no subtraction to recognise: beside a weight, a plain widened int8 read is taken
for one.

Measured on the development host (AMD EPYC, znver5, one thread), a 3x3 QConv from 64
to 128 channels at 14x14 ran 2.9x faster for the int32 stage; a 1x1 one 1.2x (256 to
1024 channels at 14x14) to 1.3x (64 to 256 at 56x56); SqueezeNet quantised 15.1 ms to
7.4 ms. The byte form with ``vpdpwssd`` took ResNet-50 from 54.4 ms to 49.9 ms more.

Each ``vpdpwssd`` does one useful product of its two per lane (the byte's upper half is
0): pairing reduction steps into its lanes needs operands interleaved along the
reduction, which LLVM forms only from a loop carrying a single sum (its partial-reduction
lowering), never from the many a register tile holds. So where the host has AVX-512
VNNI (:data:`HOST_DOT4`), a sum whose input and weight share one plain reduction axis
(the input channel of an ungrouped QConv, the ``k`` of a QMatMul) takes four of its
steps at once through the tensor IR's ``dot4_u8s8`` intrinsic, which llvm_cpu renders
as ``vpdpbusd`` (:mod:`~hetero.plugins.llvm_cpu.dot4`): four u8 x s8 products per
int32 lane. Its operands are words of four steps: the stage before the convolution
holds the same ``x + 128`` bytes, four input channels to an int32 (``[n][c/4][h][w]``,
so the tile's one broadcast of a word feeds a whole ``vpdpbusd``), and a second stage
packs the weight's four bytes of the same channels (``[m][c/4][kh][kw]``); the last
word of a channel count that is not a multiple of 4 holds zero weights, so its extra
products add 0, and the compensation is the byte form's. The weight's words and the
register tile's panels of them (``[m/32][c/4][kh][kw][32]``), like the weight sums of
the compensation, read only the constant weight, so the backend computes them once,
when compiling (:mod:`~hetero.plugins.llvm_cpu.prepack`). The register-tiled schedule is the
float one's (:mod:`~hetero.plugins.llvm_cpu.schedules_tiled`: 8 rows of output
columns x 2 vectors of 16 output channels on AVX-512). Grouped and depthwise QConvs,
whose input channel depends on the output channel, keep the byte kernel, as does every
host without VNNI.

Measured on this project's host (AMD EPYC, znver4, one thread), against the byte
kernel with ``vpdpwssd``: a 3x3 QConv of 64 channels at 56x56 ran 2.37 ms to 0.67 ms,
of 256 at 14x14 2.30 to 0.56 ms; a 1x1 from 256 to 64 channels at 56x56 1.13 to 0.38
ms, from 1024 to 256 at 14x14 1.07 to 0.30 ms; the 7x7 stem (3 channels, one word)
2.64 to 1.08 ms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from hetero.plugin.lower import compute_nd
from hetero.plugin.schedule import affine, block_names
from hetero.plugin.tir import (
    Allocate, Binary, Block, Buffer, Cast, Const, Expr, For, INDEX, Load, PrimFunc, Select, Seq, Stmt,
    StmtExprMutator, Store, Tensor, Var, binary, call, cast, compute, const, ge, logical_and, lower, lt, maximum,
    mentions, minimum, placeholder, reduce_axis, select, sum_,
)
from hetero.plugins.llvm_cpu.dot4 import has_vnni
from hetero.plugins.llvm_cpu.nests import reduction_nest
from hetero.plugins.llvm_cpu.target import host_features

_INT8 = np.dtype("int8")
_UINT8 = np.dtype("uint8")
_INT32 = np.dtype("int32")
#: Added to an int8 input to make it unsigned: x86 multiplies a zero-extended byte by a
#: sign-extended one with ``vpmaddwd`` (``vpdpwssd``, which adds too, with AVX-512 VNNI),
#: where a signed pair of int32 operands takes ``vpmulld`` and ``vpaddd``.
_U8_OFFSET = 128
#: Whether the host runs ``dot4_u8s8`` as ``vpdpbusd`` (AVX-512 VNNI), so the default
#: schedules sum integer convolutions four input channels at a time.
HOST_DOT4 = has_vnni(host_features())


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


def shift_windows(func: PrimFunc, dot4: bool | None = None) -> PrimFunc:
    """``func`` with each integer convolution reading a precomputed, zero-padded ``x - x_zero``.

    A block qualifies when it is one reduction of products whose one operand is an int8
    input shifted by a constant zero point (read through window bounds or not); other
    functions come back unchanged. With ``dot4`` (None: where the host has AVX-512
    VNNI, :data:`HOST_DOT4`) a sum of int32 products of the input and a weight that
    share one plain reduction axis (the input channel of an ungrouped QConv, the ``k``
    of a QMatMul) becomes a sum of ``dot4_u8s8`` over words of four of its steps.
    """
    dot4 = HOST_DOT4 if dot4 is None else dot4
    for name in block_names(func.body):
        read = _shifted_read(func, name)
        if read is not None:
            func = _rewrite(func, name, read, dot4)
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
        weight = _weight(other, {f.var for f in nest.spatial}, set(extents))
        # A zero point of 0 leaves no subtraction: a bare int8 read is taken for the
        # shifted one only beside a weight, which the byte form needs anyway.
        read = _match(operand, extents, params, bare=weight is not None)
        if read is not None:
            return replace(read, weight=weight)
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


def _match(operand: Expr, extents: dict[Var, int], params: set[str], bare: bool = False) -> _ShiftedRead | None:
    """The shifted read ``operand`` is, or None; with ``bare``, a widened read with no
    subtraction is one with a zero point of 0."""
    if isinstance(operand, Binary) and operand.op == "sub" and isinstance(operand.b, Const) \
            and isinstance(operand.a, Cast):
        inner, zero = operand.a.a, int(operand.b.value)
    elif bare and isinstance(operand, Cast):
        inner, zero = operand.a, 0
    else:
        return None
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


def _rewrite(func: PrimFunc, block_name: str, read: _ShiftedRead, dot4: bool) -> PrimFunc:
    """``func`` with a stage writing the padded shifted input before ``block_name``, which
    reads it: as bytes offset to unsigned, with the weights' compensation subtracted from
    the sum, where the sum is int32 and the other factor a weight (packed four to a word
    for ``dot4_u8s8`` where ``dot4`` and :func:`_dot4_axis` allow); else as ``x - x_zero``."""
    offset = read.weight is not None and read.dtype == _INT32
    if offset and dot4:
        axis = _dot4_axis(func, block_name, read)
        if axis is not None:
            return _rewrite_dot4(func, block_name, read, axis)
    stage_dtype = _UINT8 if offset else read.dtype
    source = placeholder(read.source.shape, read.source.dtype, read.source.name)
    shape = tuple(n + b + a for n, (b, a) in zip(read.source.shape, read.pads))

    def element(idx: tuple[Expr, ...]) -> Expr:
        return _shifted_element(source, read, idx, offset)

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


def _shifted_element(source: Tensor, read: _ShiftedRead, idx: tuple[Expr, ...], offset: bool) -> Expr:
    """The shifted stage's element at the padded position ``idx``: ``x + 128`` as a byte
    (``offset``), else ``x - x_zero``; off the input, what ``x - x_zero = 0`` reads as."""
    stage_dtype = _UINT8 if offset else read.dtype
    fill = _U8_OFFSET + read.zero if offset else 0
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


@dataclass(frozen=True)
class _Dot4Axis:
    """The reduction loop that walks the input's axis ``source_axis`` and the weight's
    axis ``weight_axis`` alike (an input channel), of ``extent`` steps."""

    var: Var
    extent: int
    source_axis: int
    weight_axis: int

    @property
    def words(self) -> int:
        """Words of four steps (the last one padded with zero weights)."""
        return -(-self.extent // 4)


def _dot4_axis(func: PrimFunc, block_name: str, read: _ShiftedRead) -> _Dot4Axis | None:
    """The reduction axis ``block_name``'s sum can take four steps at a time along, or None:
    a reduction loop that is the input's whole index on one unpadded axis of its extent
    and the weight's on one axis, and appears in no other index of either."""
    nest = reduction_nest(func, block_name)
    assert read.weight is not None and nest is not None  # matched as one by _shifted_read
    weight = read.weight[0]
    for loop in _loops(nest.update):
        r = loop.var
        on_source = [d for d, p in enumerate(read.positions) if mentions(p, r)]
        on_weight = [d for d, i in enumerate(weight.indices) if mentions(i, r)]
        if len(on_source) != 1 or len(on_weight) != 1:
            continue
        d = on_source[0]
        if (read.positions[d] == r and weight.indices[on_weight[0]] == r and read.pads[d] == (0, 0)
                and read.source.shape[d] == loop.extent == weight.buffer.shape[on_weight[0]]):
            return _Dot4Axis(r, loop.extent, d, on_weight[0])
    return None


def _word(bytes_: list[Expr]) -> Expr:
    """The int32 whose byte k (least significant first) is ``bytes_[k]`` (each in 0..255)."""
    word = bytes_[0]
    for k, b in enumerate(bytes_[1:], 1):
        word = word + b * const(1 << 8 * k, _INT32)  # wraps into the sign bit for byte 3
    return word


def _rewrite_dot4(func: PrimFunc, block_name: str, read: _ShiftedRead, axis: _Dot4Axis) -> PrimFunc:
    """``func`` whose ``block_name`` sums ``dot4_u8s8`` of a word of four shifted input bytes
    (``x + 128``, as :func:`_rewrite`'s byte stage holds them) and a word of the four
    weights of the same steps, over a quarter of the reduction axis: two stages pack the
    words (the weight's reads only the constant, so the CPU backend runs it once), and
    the weights' compensation is the byte form's."""
    assert read.weight is not None
    weight, channel = read.weight
    source = placeholder(read.source.shape, read.source.dtype, read.source.name)
    w = placeholder(weight.buffer.shape, weight.buffer.dtype, weight.buffer.name)
    n, words = axis.extent, axis.words

    def steps(idx: tuple[Expr, ...], d: int, byte: Callable[[tuple[Expr, ...]], Expr]) -> Expr:
        """The word of steps ``4 * idx[d] + k``: their bytes, 0 past the axis's end."""
        bytes_ = []
        for k in range(4):
            step = idx[d] * 4 + k
            value = byte(idx[:d] + (step,) + idx[d + 1:])
            bytes_.append(value if n % 4 == 0 else select(lt(step, n), value, const(0, _INT32)))
        return _word(bytes_)

    shape = tuple(words if d == axis.source_axis else m + b + a
                  for d, (m, (b, a)) in enumerate(zip(read.source.shape, read.pads)))
    x_words = compute_nd(shape, lambda idx: steps(idx, axis.source_axis, lambda i: cast(
        _shifted_element(source, read, i, offset=True), _INT32)), f"{read.source.name}_words_{block_name}", _INT32)
    w_shape = tuple(words if d == axis.weight_axis else m for d, m in enumerate(weight.buffer.shape))
    w_words = compute_nd(w_shape, lambda idx: steps(idx, axis.weight_axis, lambda i: binary(
        "bit_and", cast(w[i], _INT32), const(0xFF, _INT32))), f"{weight.buffer.name}_words_{block_name}", _INT32)
    x_stage, w_stage = lower("words", [source], [x_words]), lower("words", [w], [w_words])
    x_buffer, w_buffer = x_stage.params[-1], w_stage.params[-1]
    padded = tuple(p + b if b else p for p, (b, _) in zip(read.positions, read.pads))
    x_load = Load(x_buffer, tuple(_index(p) for p in padded), _INT32)
    w_load = Load(w_buffer, weight.indices, _INT32)
    body = _Dot4Update(block_name, axis, x_load, w_load).visit_stmt(func.body)
    body = _compensated(func, body, block_name, read.weight, _U8_OFFSET + read.zero)
    return replace(func, body=Allocate(x_buffer, Seq((x_stage.body, Allocate(w_buffer, Seq((w_stage.body, body)))))))


class _Dot4Update(StmtExprMutator):
    """In one block: the reduction loop ``axis`` runs over words, the sum's update is
    ``acc = dot4_u8s8(acc, x_word, w_word)``, and the block's iterator says so."""

    def __init__(self, block_name: str, axis: _Dot4Axis, x_load: Load, w_load: Load) -> None:
        self.block_name, self.axis, self.x_load, self.w_load = block_name, axis, x_load, w_load
        self.inside = False

    def visit_Block(self, s: Block) -> Block:
        if s.name != self.block_name:
            return s
        self.inside = True
        try:
            block = super().visit_Block(s)
        finally:
            self.inside = False
        iters = tuple(replace(it, extent=self.axis.words) if it.var == self.axis.var else it for it in block.iters)
        return replace(block, iters=iters)  # type: ignore[arg-type]

    def visit_For(self, s: For) -> Stmt:
        loop = super().visit_For(s)
        if self.inside and s.var == self.axis.var:
            return replace(loop, extent=self.axis.words)  # type: ignore[arg-type]
        return loop

    def visit_Store(self, s: Store) -> Stmt:
        if not (self.inside and isinstance(s.value, Binary) and s.value.op == "add"
                and isinstance(s.value.a, Load) and s.value.a.buffer == s.buffer):
            return s
        return replace(s, value=call("dot4_u8s8", s.value.a, self.x_load, self.w_load))


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
