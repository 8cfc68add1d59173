"""Lowerings of hetero's int8 ops (meanings: :mod:`hetero.core.ir.ops.qint`).

Every op follows its reference step by step in integers, so the lowered function gives
the reference's int8 results bit for bit on every backend that renders the tensor IR:

- products of a shifted int8 operand (``x - x_zero``, within ±255) and an int8 weight
  accumulate in int32 wherever no sum of the reduction can leave int32 (fewer than
  65,793 terms), in int64 otherwise, and the sum is widened to int64 before the bias
  is added, as the reference sums exactly in int64;
- the requantisation is :func:`~hetero.core.ir.ops.fixed_point.requantize` in int64:
  ``v · M + 2^(s-1)``, shifted right by ``s`` (the IR's ``shr``, a floor), plus the
  output zero point, clamped to ``[y_min, y_max]``;
- windows read ``x_zero`` off the input, which the shift turns into the 0 the
  reference pads ``X - x_zero`` with.

Per-channel multipliers and shifts become small tables, one entry per channel, that
the function computes from literals before its main stage; a backend that evaluates
constant-only stages when compiling (the CPU backend does) never recomputes them.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any

import numpy as np

from hetero.core.ir.tir.compute import Tensor, compute, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    INDEX, Expr, cast, const, lt, maximum, minimum, select, shift_right,
)
from hetero.core.ir.types import TensorType
from hetero.core.lower.conv_pool import _taps, _window_read
from hetero.core.lower.elementwise import Indices, broadcast_load, compute_nd
from hetero.core.lower.registry import lowers

_INT8 = np.dtype("int8")
_INT32 = np.dtype("int32")
#: The largest product of a shifted int8 operand (|x - zero| <= 255) and an int8 weight.
_TERM = 255 * 128


def _sum_dtype(terms: int, bound: int) -> np.dtype:
    """int32 when a sum of ``terms`` terms of magnitude at most ``bound`` always fits it."""
    return _INT32 if terms * bound < 2**31 else INDEX


def _pick(values: Sequence[int], i: Expr, lo: int, hi: int) -> Expr:
    """``values[i]`` for ``lo <= i < hi``, as a balanced tree of selects (depth log2)."""
    if hi - lo == 1:
        return const(values[lo], INDEX)
    mid = (lo + hi) // 2
    return select(lt(i, mid), _pick(values, i, lo, mid), _pick(values, i, mid, hi))


class _Factor:
    """One fixed-point factor (a multiplier, a shift, a rounding term) of a node: a
    literal when it is the same for every channel, else a table indexed by channel."""

    def __init__(self, values: Sequence[int], name: str) -> None:
        self.values = [int(v) for v in values]
        self.table: Tensor | None = None
        if len(set(self.values)) > 1:
            n = len(self.values)
            self.table = compute((n,), lambda c: _pick(self.values, c, 0, n), name, INDEX)

    def at(self, channel: Expr | None) -> Expr:
        if self.table is None:
            return const(self.values[0], INDEX)
        assert channel is not None  # per-channel factors come with their channel axis
        return self.table[channel]


class _Requant:
    """:func:`~hetero.core.ir.ops.fixed_point.requantize` of one node as an expression."""

    def __init__(self, multiplier: int | Sequence[int], shift: int | Sequence[int],
                 attrs: dict[str, Any], name: str) -> None:
        multipliers = [int(m) for m in np.atleast_1d(multiplier)]
        shifts = [int(s) for s in np.atleast_1d(shift)]
        self.multiplier = _Factor(multipliers, f"{name}_multiplier")
        self.shift = _Factor(shifts, f"{name}_shift")
        self.rounding = _Factor([1 << (s - 1) for s in shifts], f"{name}_rounding")
        self.zero, self.lo, self.hi = attrs["y_zero"], attrs["y_min"], attrs["y_max"]

    @property
    def per_channel(self) -> bool:
        """Whether some factor differs between channels (and so needs the channel index)."""
        return any(f.table is not None for f in (self.multiplier, self.shift))

    def __call__(self, v: Expr, channel: Expr | None = None) -> Expr:
        """The int8 result for the int64 value ``v`` in channel ``channel``."""
        scaled = v * self.multiplier.at(channel) + self.rounding.at(channel)
        y = shift_right(scaled, self.shift.at(channel)) + const(self.zero, INDEX)
        return cast(minimum(maximum(y, const(self.lo, INDEX)), const(self.hi, INDEX)), _INT8)


@lowers("QConv")
def lower_qconv(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """Y[n, m, o...] = requantize(sum over the group's input channels and the taps of
    (X - x_zero) · W, plus B[m]) with output channel m's factors; Conv's loop structure."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    assert x is not None and w is not None
    out, group = out_types[0].shape, attrs["group"]
    per_group_in, per_group_out = w.shape[1], w.shape[0] // group
    mac = _sum_dtype(per_group_in * math.prod(w.shape[2:]), _TERM)
    rc = reduce_axis(per_group_in, f"{names[0]}_rc")
    taps = _taps(w.shape[2:], names[0])
    requant = _Requant(attrs["multiplier"], attrs["shift"], attrs, names[0])
    x_zero = const(attrs["x_zero"], mac)

    def element(idx: Indices) -> Expr:
        batch, m, o = idx[0], idx[1], idx[2:]
        ci = rc.var if group == 1 else m // per_group_out * per_group_in + rc.var
        xv = _window_read(x, batch, ci, o, taps, attrs, out[2:], attrs["x_zero"])
        wv = w[(m, rc.var) + tuple(t.var for t in taps)]
        acc = cast(sum_((cast(xv, mac) - x_zero) * cast(wv, mac), [rc, *taps]), INDEX)
        if b is not None:
            acc = acc + cast(b[m], INDEX)
        return requant(acc, m)

    return [compute_nd(out, element, names[0], _INT8)]


@lowers("QMatMul")
def lower_qmatmul(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                  names: list[str]) -> list[Tensor]:
    """Y[..., n] = requantize(sum over k of (A[..., k] - a_zero) · B[k, n], plus Bias[n])
    with column n's factors."""
    a, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    assert a is not None and w is not None
    k = reduce_axis(w.shape[0], f"{names[0]}_k")
    mac = _sum_dtype(w.shape[0], _TERM)
    requant = _Requant(attrs["multiplier"], attrs["shift"], attrs, names[0])
    a_zero = const(attrs["a_zero"], mac)

    def element(idx: Indices) -> Expr:
        lead, n = idx[:-1], idx[-1]
        acc = cast(sum_((cast(a[lead + (k.var,)], mac) - a_zero) * cast(w[k.var, n], mac), k), INDEX)
        if bias is not None:
            acc = acc + cast(bias[n], INDEX)
        return requant(acc, n)

    return [compute_nd(out_types[0].shape, element, names[0], _INT8)]


def _shifted(t: Tensor, idx: Indices, zero: int) -> Expr:
    """``t``'s (broadcast) element at ``idx`` minus ``zero``, in int64."""
    return cast(broadcast_load(t, idx), INDEX) - const(zero, INDEX)


@lowers("QAdd")
def lower_qadd(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """C = requantize((A - a_zero) · a_multiplier + (B - b_zero) · b_multiplier, 1, shift)."""
    a, b = inputs
    assert a is not None and b is not None
    requant = _Requant(1, attrs["shift"], attrs, names[0])
    a_mult, b_mult = const(attrs["a_multiplier"], INDEX), const(attrs["b_multiplier"], INDEX)

    def element(idx: Indices) -> Expr:
        return requant(_shifted(a, idx, attrs["a_zero"]) * a_mult
                       + _shifted(b, idx, attrs["b_zero"]) * b_mult)

    return [compute_nd(out_types[0].shape, element, names[0], _INT8)]


@lowers("QMul")
def lower_qmul(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """C = requantize((A - a_zero) · (B - b_zero), multiplier, shift)."""
    a, b = inputs
    assert a is not None and b is not None
    requant = _Requant(attrs["multiplier"], attrs["shift"], attrs, names[0])

    def element(idx: Indices) -> Expr:
        return requant(_shifted(a, idx, attrs["a_zero"]) * _shifted(b, idx, attrs["b_zero"]))

    return [compute_nd(out_types[0].shape, element, names[0], _INT8)]


@lowers("QAveragePool")
def lower_qaverage_pool(inputs: list[Tensor | None], attrs: dict[str, Any],
                        out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Y = requantize(sum over the window of X - x_zero, multiplier, shift): padded taps add
    0 (the divisor, window size included, is folded into the multiplier)."""
    x = inputs[0]
    assert x is not None
    out = out_types[0].shape
    taps = _taps(attrs["kernel_shape"], names[0])
    acc = _sum_dtype(math.prod(attrs["kernel_shape"]), 255)
    requant = _Requant(attrs["multiplier"], attrs["shift"], attrs, names[0])
    x_zero = const(attrs["x_zero"], acc)

    def element(idx: Indices) -> Expr:
        batch, c, o = idx[0], idx[1], idx[2:]
        xv = _window_read(x, batch, c, o, taps, attrs, out[2:], attrs["x_zero"])
        return requant(cast(sum_(cast(xv, acc) - x_zero, taps), INDEX))

    return [compute_nd(out, element, names[0], _INT8)]


@lowers("Requantize")
def lower_requantize(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Y = requantize(X - x_zero, multiplier, shift), per slice of ``axis`` when per-channel."""
    x = inputs[0]
    assert x is not None
    axis = attrs["axis"]
    requant = _Requant(attrs["multiplier"], attrs["shift"], attrs, names[0])

    def element(idx: Indices) -> Expr:
        channel = idx[axis] if requant.per_channel else None
        return requant(cast(x[idx], INDEX) - const(attrs["x_zero"], INDEX), channel)

    return [compute_nd(out_types[0].shape, element, names[0], _INT8)]
