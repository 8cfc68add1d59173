"""Fixed-point requantisation: the integer arithmetic of hetero's int8 ops.

An int8 op accumulates in int32 and must bring the sum back to its output's scale,
a real factor ``r`` (``x_scale · w_scale / y_scale`` for a convolution). Integer
hardware multiplies by an int32 ``multiplier`` M in [2^30, 2^31) and shifts right
by ``shift`` s, so that r ≈ M · 2^-s; the same arithmetic, in int64, is the
reference semantics of the integer ops and of an integer NPU's requantise instruction, which
is why the two agree bit for bit. It follows gemmlowp and TFLite, with one rounding
(half toward +inf) instead of their two.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The largest shift: beyond it M · v (< 2^62) rounds to zero anyway.
MAX_SHIFT = 62


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``(M, s)`` with M in [2^30, 2^31) and ``real ≈ M · 2^-s``; tiny reals clamp s to 62.

    Raises ValueError for a real that is not positive and finite, or so large
    (≥ 2^30) that no shift of at least 1 represents it.
    """
    if not (math.isfinite(real) and real > 0):
        raise ValueError(f"a requantisation multiplier must be positive and finite, got {real!r}")
    mantissa, exponent = math.frexp(real)
    multiplier = round(mantissa * 2**31)
    if multiplier == 2**31:
        multiplier, exponent = 2**30, exponent + 1
    shift = 31 - exponent
    if shift < 1:
        raise ValueError(f"requantisation multiplier {real!r} is too large (must be below 2^30)")
    if shift > MAX_SHIFT:
        return round(real * 2**MAX_SHIFT), MAX_SHIFT
    return multiplier, shift


def rounding_shift(v: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int) -> np.ndarray:
    """``(v · M + 2^(s-1)) >> s`` in int64: v scaled by M · 2^-s, rounded half toward +inf."""
    v = np.asarray(v, dtype=np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    return (v * m + (np.int64(1) << (s - 1))) >> s


def requantize(
    v: np.ndarray,
    multiplier: int | Sequence[int],
    shift: int | Sequence[int],
    zero: int,
    lo: int = -128,
    hi: int = 127,
    axis: int | None = None,
) -> np.ndarray:
    """``clip(rounding_shift(v, M, s) + zero, lo, hi)`` as int8.

    ``multiplier`` and ``shift`` are one value each, or one per slice of ``axis``
    of ``v`` (per output channel).
    """
    v = np.asarray(v)
    m = np.asarray(multiplier, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    if m.size > 1 or s.size > 1:
        if axis is None:
            raise ValueError("per-channel multipliers need the channel axis")
        shape = [1] * v.ndim
        shape[axis] = -1
        m = m.reshape(shape) if m.size > 1 else m.reshape(())
        s = s.reshape(shape) if s.size > 1 else s.reshape(())
    else:
        m, s = m.reshape(()), s.reshape(())
    out = rounding_shift(v, m, s) + np.int64(zero)
    return np.clip(out, lo, hi).astype(np.int8)
