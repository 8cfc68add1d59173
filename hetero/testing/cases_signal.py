"""Case generators of the signal ops: DFT (full, one-sided, inverse, IRFFT, cut or
zero-padded by dft_length, along any axis) and STFT (with and without a window).

Every output element is a sum of products of the samples used (and their real and
imaginary parts) with twiddle factors, so the tolerance is the sum rule's, ``k · eps ·
Σ|terms|``: the terms' absolute values add up to at most the samples used times the
largest sample times the largest factor (1 for a forward transform, ``1 / N`` for an
inverse, ``2 / N`` for an IRFFT's doubled bins; times the window's largest value for
STFT), and ``k`` is the longest chain of roundings a result may take: the ``N * parts``
products of the zero-padded signal (which also bounds a transform in two steps,
``N1 * parts + 2 * N2``, and an FFT's), one more for the factors' own rounding. float16
STFT also covers the reference's own rounding of each windowed sample to float16.
"""

from __future__ import annotations

import numpy as np

from hetero.testing.cases_base import (
    FLOATS,
    Draw,
    Operand,
    Spec,
    generates,
    peak,
    summed,
    uniform,
)

_DTYPES = FLOATS + ("float64", "bfloat16")


@generates(("DFT",), _DTYPES)
def _dft(op: str, d: Draw, dtype: np.dtype) -> Spec:
    parts = d.pick((1, 2))
    signal = tuple(d.integer(1, 4) for _ in range(d.integer(1, 3)))
    axis = d.integer(0, len(signal) - 1)
    signal = signal[:axis] + (d.integer(1, 12),) + signal[axis + 1:]
    x = uniform(d, signal + (parts,), dtype, -2.0, 2.0)
    inverse, onesided = d.pick((0, 1)), d.pick((0, 1))
    size = signal[axis]
    attrs: dict = {"axis": axis - len(signal) - 1 if d.pick((False, True)) else axis,
                   "inverse": inverse, "onesided": onesided}
    if inverse and onesided and size < 2:
        attrs["dft_length"] = d.integer(1, 6)  # the default 2 * (size - 1) would be 0
    elif d.pick((False, True)):
        attrs["dft_length"] = d.integer(1, 2 * size + 1)
    n = attrs.get("dft_length", 2 * (size - 1) if inverse and onesided else size)
    if inverse and onesided:
        used, factor = min(size, n // 2 + 1), 2.0 / n
        chain = used * parts
    else:
        used, factor = min(size, n), (1.0 / n if inverse else 1.0)
        chain = n * parts  # a transform of the zero-padded signal, in one step or two
    magnitude = (used * parts + 1) * peak(x) * factor
    return Spec((Operand("input", x),), attrs, summed(dtype, chain + 1, magnitude))


@generates(("STFT",), _DTYPES)
def _stft(op: str, d: Draw, dtype: np.dtype) -> Spec:
    parts = d.pick((1, 2))
    length = d.integer(1, 20)
    step = d.integer(1, 4)
    frames = d.integer(1, 4)
    signal = uniform(d, (d.integer(1, 2), (frames - 1) * step + length + d.integer(0, step - 1),
                         parts), dtype, -2.0, 2.0)
    attrs: dict = {"frame_step": step, "onesided": d.pick((0, 1))}
    window = None
    if d.pick((False, True)):
        window = uniform(d, (length,), dtype, 0.0, 1.0)
        if d.pick((False, True)):
            attrs["frame_length"] = length
    else:
        attrs["frame_length"] = length
    terms = length * parts + 1
    magnitude = terms * peak(signal) * (peak(window) if window is not None else 1.0)
    return Spec((Operand("signal", signal), None if window is None else Operand("window", window)),
                attrs, summed(dtype, terms, magnitude))
