"""Lowering DFT and STFT (meanings: :mod:`hetero.core.ir.ops.signal`) as a direct
transform: a sum of products against a table of twiddle factors.

A transform of length ``N`` is a matrix product: each output part (real, imaginary)
of each bin is the sum, over the samples used and their parts, of the sample times one
entry of a ``[samples, parts, bins, 2]`` table of ``cos`` and ``sin`` of ``2 pi m / N``
(``m = sample * bin mod N``, so the angle is exact before it is rounded), with the
signs of the forward or inverse transform and the ``1 / N`` of the inverse folded in.
The table's stage reads no input, so a backend that computes constant stages when it
compiles (llvm_cpu does) computes it once, in float64, rounded to the accumulator's
dtype; cosines at quarter turns and sines at half turns are exact zeros, so a real
signal's DC and Nyquist bins have exactly zero imaginary parts. STFT multiplies the
window into the table (a stage of its own, computed once when the window is a
constant) and reads each frame straight from the signal.

The product is computed into a planar stage, ``[2, ..., bins, ...]``, whose loops are
those of a matrix product (rows: the other axes, lanes: the bins), so the CPU's
register-tiled micro-kernel takes it, and is then interleaved into ONNX's ``[..., 2]``.
Sums accumulate in float32 for float16, bfloat16 and float32, in float64 for float64.

Why not an FFT: for the lengths audio models use (400 to 2048 samples, and 400 is no
power of two) a direct transform on the tiled kernel costs ``2 * N`` multiply-adds per
output part at the machine's peak rate, where an FFT's ``O(log N)`` butterflies per
element are strided, scalar-heavy loops; and its rounding error is a plain sum's (see
:mod:`hetero.testing.cases_signal` for the bound the cases hold it to).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.ops.signal import irfft, stft_frames
from hetero.core.ir.tir.compute import Tensor, reduce_axis, sum_
from hetero.core.ir.tir.expr import Expr, call, cast, const, eq, logical_or, select
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers

_F64 = np.dtype(np.float64)


def _cos_sin(m: Expr, n: int) -> tuple[Expr, Expr]:
    """``cos`` and ``sin`` of ``2 pi m / n`` in float64 for an integer ``0 <= m < n``, exact
    zeros where the angle is a quarter or a half turn."""
    angle = cast(m, _F64) * (2.0 * math.pi / n) if n > 0 else const(0.0, _F64)
    zero = const(0.0, _F64)
    cos = select(logical_or(eq(m * 4, n), eq(m * 4, 3 * n)), zero, call("cos", angle))
    sin = select(logical_or(eq(m, 0), eq(m * 2, n)), zero, call("sin", angle))
    return cos, sin


def _twiddles(used: int, parts: int, bins: int, n: int, inverse: bool, acc: np.dtype,
              name: str) -> Tensor:
    """The ``[used, parts, bins, 2]`` table of a full transform of length ``n``: entry
    ``[s, p, k, q]`` is what part ``p`` of sample ``s`` adds to part ``q`` of bin ``k``."""
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / n if inverse else 1.0

    def entry(i: Indices) -> Expr:
        s, p, k, q = i
        cos, sin = _cos_sin((s * k) % n, n)
        # forward: re += a cos + b sin, im += -a sin + b cos; inverse: the sines negated.
        real_in = select(eq(q, 0), cos, sin * sign)
        imag_in = select(eq(q, 0), sin * -sign, cos)
        value = real_in if parts == 1 else select(eq(p, 0), real_in, imag_in)
        return cast(value * scale if inverse else value, acc)

    return compute_nd((used, parts, bins, 2), entry, f"{name}_twiddle", acc)


def _irfft_twiddles(used: int, parts: int, n: int, acc: np.dtype, name: str) -> Tensor:
    """The ``[used, parts, n, 1]`` table of a one-sided inverse of length ``n``: bin ``k``
    stands for itself and its mirror ``n - k`` (weight 2) except bin 0 and, for an even
    ``n``, bin ``n / 2`` (weight 1, and their imaginary parts, whose sines are zero, drop)."""

    def entry(i: Indices) -> Expr:
        k, p, s, _ = i
        cos, sin = _cos_sin((s * k) % n, n)
        single = logical_or(eq(k, 0), eq(k * 2, n))
        weight = select(single, const(1.0 / n, _F64), const(2.0 / n, _F64))
        value = cos if parts == 1 else select(eq(p, 0), cos, -sin)
        return cast(weight * value, acc)

    return compute_nd((used, parts, n, 1), entry, f"{name}_twiddle", acc)


def _interleave(planar: Tensor, out: TensorType, name: str) -> Tensor:
    """``planar[q, ...]`` as ONNX's ``[..., q]``."""
    def element(i: Indices) -> Expr:
        return cast(planar[(i[-1],) + tuple(i[:-1])], out.dtype)

    return compute_nd(out.shape, element, name, out.dtype)


@lowers("DFT")
def lower_dft(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
    """A sum of products against the twiddle table along ``axis`` (module doc)."""
    x = inputs[0]
    assert x is not None
    out, name = out_types[0], names[0]
    axis, n, parts = attrs["axis"], attrs["dft_length"], x.shape[-1]
    acc = accumulator_dtype(x.dtype)
    bins = out.shape[axis]
    if irfft(attrs["inverse"], attrs["onesided"]):
        used = min(x.shape[axis], n // 2 + 1)
        table = _irfft_twiddles(used, parts, n, acc, name)
    else:
        used = min(x.shape[axis], n)
        table = _twiddles(used, parts, bins, n, bool(attrs["inverse"]), acc, name)
    s, p = reduce_axis(used, f"{name}_s"), reduce_axis(parts, f"{name}_p")

    def product(i: Indices) -> Expr:
        q, rest = i[0], tuple(i[1:])
        sample = x[rest[:axis] + (s.var,) + rest[axis + 1:] + (p.var,)]
        return sum_(cast(sample, acc) * table[s.var, p.var, rest[axis], q], (s, p))

    planar = compute_nd((out.shape[-1],) + out.shape[:-1], product, f"{name}_planar", acc)
    return [_interleave(planar, out, name)]


@lowers("STFT")
def lower_stft(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """Each frame read from the signal at ``frame * frame_step``, against the twiddle
    table times the window."""
    signal = inputs[0]
    window = inputs[1] if len(inputs) > 1 else None
    assert signal is not None
    out, name = out_types[0], names[0]
    step, length, parts = attrs["frame_step"], attrs["frame_length"], signal.shape[-1]
    acc = accumulator_dtype(signal.dtype)
    bins = out.shape[2]
    assert out.shape[1] == stft_frames(signal.shape[1], length, step)
    table = _twiddles(length, parts, bins, length, False, acc, name)
    if window is not None:
        plain = table
        table = compute_nd(plain.shape, lambda i: cast(window[i[:1]], acc) * plain[i],
                           f"{name}_windowed", acc)
    s, p = reduce_axis(length, f"{name}_s"), reduce_axis(parts, f"{name}_p")

    def product(i: Indices) -> Expr:
        q, b, f, k = i
        sample = signal[b, f * step + s.var, p.var]
        return sum_(cast(sample, acc) * table[s.var, p.var, k, q], (s, p))

    planar = compute_nd((2,) + out.shape[:-1], product, f"{name}_planar", acc)
    return [_interleave(planar, out, name)]
