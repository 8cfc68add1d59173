"""Lowering DFT and STFT (meanings: :mod:`hetero.core.ir.ops.signal`) as sums of
products against tables of twiddle factors.

A transform of length ``N`` is a matrix product: each output part (real, imaginary)
of each bin is the sum, over the samples used and their parts, of the sample times one
entry of a ``[samples, parts, bins, 2]`` table of ``cos`` and ``sin`` of ``2 pi m / N``
(``m = sample * bin mod N``, so the angle is exact before it is rounded), with the
signs of the forward or inverse transform and the ``1 / N`` of the inverse folded in.
The tables' stages read no input, so a backend that computes constant stages when it
compiles (the CPU backend does) computes them once, in float64, rounded to the accumulator's
dtype; cosines at quarter turns and sines at half turns are exact zeros, so a real
signal's DC and Nyquist bins have exactly zero imaginary parts. STFT reads each frame
straight from the signal, times the window.

Where ``N = N1 * N2`` has a divisor near its square root, the transform takes two steps
(Cooley and Tukey's split, once): ``N2`` transforms of length ``N1`` over the samples
``N2`` apart, then for each bin a sum of ``N2`` terms against a second table, so about
``N * (N1 + N2)`` multiply-adds instead of ``N * N``: a 2048-point one-sided transform
costs a tenth. Short and prime lengths, and IRFFT, stay direct. Every step is a sum of
products whose loops are those of a (batched) matrix product, so the CPU's
register-tiled micro-kernel takes it. The output stage itself is the last sum, reading
its table directly: a table that only a later stage's inputs reach is not one the CPU backend
computes at compile time (the first step's small table is computed on each call).
Sums accumulate in float32 for float16, bfloat16 and float32, in float64 for float64.

Why not a full radix-2 FFT: its ``log2 N`` passes of butterflies are strided,
shuffle-heavy loops that no tiled kernel takes, and it needs a power of two (audio
models use 400-sample frames). One split keeps every step a dense product at the
kernel's rate; its rounding error is a sum of ``N1`` terms' followed by one of ``N2``
terms' (see :mod:`hetero.testing.cases_signal` for the bound the cases hold it to).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.ir.ops.signal import irfft, stft_frames
from hetero.core.ir.tir.compute import Tensor, reduce_axis, sum_
from hetero.core.ir.tir.expr import Expr, call, cast, const, eq, logical_or, lt, minimum, select
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers

_F64 = np.dtype(np.float64)
#: Tables larger than this (in entries) are not stored: their factors are computed where
#: the sums read them (a long prime length would otherwise hold ``4 * N * N`` entries).
TABLE_MAX = 1 << 22


def _cos_sin(m: Expr, n: int) -> tuple[Expr, Expr]:
    """``cos`` and ``sin`` of ``2 pi m / n`` in float64 for an integer ``0 <= m < n``, exact
    zeros where the angle is a quarter or a half turn."""
    angle = cast(m, _F64) * (2.0 * math.pi / n) if n > 0 else const(0.0, _F64)
    zero = const(0.0, _F64)
    cos = select(logical_or(eq(m * 4, n), eq(m * 4, 3 * n)), zero, call("cos", angle))
    sin = select(logical_or(eq(m, 0), eq(m * 2, n)), zero, call("sin", angle))
    return cos, sin


def _twiddles(used: int, parts: int, bins: int, n: int, inverse: bool, acc: np.dtype,
              name: str, scaled: bool = True) -> Tensor:
    """The ``[used, parts, bins, 2]`` table of a full transform of length ``n``: entry
    ``[s, p, k, q]`` is what part ``p`` of sample ``s`` adds to part ``q`` of bin ``k``
    (an inverse's ``1 / n`` included unless not ``scaled``)."""
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / n if inverse and scaled else 1.0

    def entry(i: Indices) -> Expr:
        s, p, k, q = i
        cos, sin = _cos_sin((s * k) % n, n)
        # forward: re += a cos + b sin, im += -a sin + b cos; inverse: the sines negated.
        real_in = select(eq(q, 0), cos, sin * sign)
        imag_in = select(eq(q, 0), sin * -sign, cos)
        value = real_in if parts == 1 else select(eq(p, 0), real_in, imag_in)
        return cast(value * scale if scale != 1.0 else value, acc)

    shape = (used, parts, bins, 2)
    return compute_nd(shape, entry, f"{name}_twiddle", acc, math.prod(shape) > TABLE_MAX)


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

    shape = (used, parts, n, 1)
    return compute_nd(shape, entry, f"{name}_twiddle", acc, math.prod(shape) > TABLE_MAX)


Load = Callable[[Indices, Expr, Expr], Expr]


def split_length(n: int, bins: int, parts: int) -> int | None:
    """The factor ``n1`` of a two-step transform of length ``n = n1 * n2`` (the divisor
    nearest ``sqrt(n)``), or None where the direct transform costs less than twice as
    much (short or prime lengths)."""
    best = min((d for d in range(2, n) if n % d == 0), key=lambda d: abs(d - math.sqrt(n)),
               default=None)
    if best is None:
        return None
    split = n * best * parts * 2 + bins * (n // best) * 4
    return best if 2 * split <= bins * n * parts * 2 else None


def _transform(load: Load, pre: tuple[int, ...], post: tuple[int, ...], used: int, parts: int,
               n: int, bins: int, inverse: bool, acc: np.dtype, name: str
               ) -> Callable[[Indices, Expr], Expr]:
    """The stages of a full transform of length ``n`` of the samples ``load(frame, s, p)``
    (sample ``s < used`` of the frame at ``pre + post`` indices, part ``p``), keeping the
    first ``bins`` bins; returns ``value(out_index, q)``: part ``q`` of the output element
    at ``pre + (bin,) + post``.

    Direct: one sum over the samples against a ``[used, parts, bins, 2]`` table. Two-step
    (Cooley and Tukey's split, ``n = n1 * n2``, sample ``s = s2 + n2 * s1``, bin
    ``k = k1 + n1 * k2``): ``X[k] = sum_s2 W_n^(s2 k) A[s2, k1]`` with ``A[s2, k1] =
    sum_s1 x[s2 + n2 s1] W_n1^(s1 k1)``: two sums of products, ``n1`` and ``n2`` terms
    long, each against its own table, instead of one ``n`` long.
    """
    rank = len(pre)
    n1 = split_length(n, bins, parts)
    if n1 is None:
        table = _twiddles(used, parts, bins, n, inverse, acc, name)
        s, p = reduce_axis(used, f"{name}_s"), reduce_axis(parts, f"{name}_p")

        def direct(i: Indices, q: Expr) -> Expr:
            frame = i[:rank] + i[rank + 1:]
            return sum_(load(frame, s.var, p.var) * table[s.var, p.var, i[rank], q], (s, p))

        return direct
    n2 = n // n1
    inner = _twiddles(n1, parts, n1, n1, inverse, acc, f"{name}_a", scaled=False)
    s1, p = reduce_axis(n1, f"{name}_s1"), reduce_axis(parts, f"{name}_p")

    def first(i: Indices) -> Expr:
        q, frame, s2, k1 = i[0], i[1:rank + 1] + i[rank + 3:], i[rank + 1], i[rank + 2]
        sample = s2 + s1.var * n2
        value = load(frame, minimum(sample, used - 1), p.var)
        if used < n:
            value = select(lt(sample, used), value, const(0.0, acc))
        return sum_(value * inner[s1.var, p.var, k1, q], (s1, p))

    steps = compute_nd((2,) + pre + (n2, n1) + post, first, f"{name}_steps", acc)
    outer = _twiddles(n2, 2, bins, n, inverse, acc, f"{name}_b")
    s2, r = reduce_axis(n2, f"{name}_s2"), reduce_axis(2, f"{name}_r")

    def second(i: Indices, q: Expr) -> Expr:
        k = i[rank]
        read = (r.var,) + tuple(i[:rank]) + (s2.var, k % n1) + tuple(i[rank + 1:])
        return sum_(steps[read] * outer[s2.var, r.var, k, q], (s2, r))

    return second


@lowers("DFT")
def lower_dft(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
    """A direct or two-step transform along ``axis`` (module doc); IRFFT always direct."""
    x = inputs[0]
    assert x is not None
    out, name = out_types[0], names[0]
    axis, n, parts = attrs["axis"], attrs["dft_length"], x.shape[-1]
    acc = accumulator_dtype(x.dtype)
    pre, post = x.shape[:axis], x.shape[axis + 1:-1]

    def load(frame: Indices, sample: Expr, part: Expr) -> Expr:
        return cast(x[tuple(frame[:axis]) + (sample,) + tuple(frame[axis:]) + (part,)], acc)

    if irfft(attrs["inverse"], attrs["onesided"]):
        used = min(x.shape[axis], n // 2 + 1)
        table = _irfft_twiddles(used, parts, n, acc, name)
        s, p = reduce_axis(used, f"{name}_s"), reduce_axis(parts, f"{name}_p")

        def product(i: Indices) -> Expr:
            frame = i[:axis] + i[axis + 1:-1]
            return sum_(load(frame, s.var, p.var) * table[s.var, p.var, i[axis], 0], (s, p))

        return [compute_nd(out.shape, product, name, out.dtype) if acc == out.dtype else
                compute_nd(out.shape, lambda i: cast(product(i), out.dtype), name, out.dtype)]
    value = _transform(load, pre, post, min(x.shape[axis], n), parts, n, out.shape[axis],
                       bool(attrs["inverse"]), acc, name)
    return [compute_nd(out.shape, lambda i: cast(value(i[:-1], i[-1]), out.dtype), name, out.dtype)]


@lowers("STFT")
def lower_stft(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """Each frame read from the signal at ``frame * frame_step`` (times the window) and
    transformed as DFT's are."""
    signal = inputs[0]
    window = inputs[1] if len(inputs) > 1 else None
    assert signal is not None
    out, name = out_types[0], names[0]
    step, length = attrs["frame_step"], attrs["frame_length"]
    acc = accumulator_dtype(signal.dtype)
    assert out.shape[1] == stft_frames(signal.shape[1], length, step)

    def load(frame: Indices, sample: Expr, part: Expr) -> Expr:
        b, f = frame
        value = cast(signal[b, f * step + sample, part], acc)
        return value if window is None else value * cast(window[sample], acc)

    value = _transform(load, out.shape[:2], (), length, signal.shape[-1], length, out.shape[2],
                       False, acc, name)
    return [compute_nd(out.shape, lambda i: cast(value(i[:-1], i[-1]), out.dtype), name, out.dtype)]
