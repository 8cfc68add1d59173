"""Fixed-point requantisation: the multiplier's representation and the rounding shift."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from hetero.core.ir.ops.fixed_point import MAX_SHIFT, quantize_multiplier, requantize, rounding_shift


@given(st.floats(min_value=1e-9, max_value=2.0**29, allow_nan=False, allow_infinity=False))
def test_the_multiplier_represents_the_real_within_half_a_unit_of_its_last_bit(real: float) -> None:
    m, s = quantize_multiplier(real)
    assert 2**30 <= m < 2**31 and 1 <= s <= MAX_SHIFT
    # Rounding m to 31 bits errs by at most half its last bit: 2^-32 relative to m ≥ 2^30.
    assert abs(m * 2.0**-s - real) <= 2.0**-31 * real


def test_tiny_multipliers_clamp_the_shift_and_bad_ones_are_refused() -> None:
    assert quantize_multiplier(1e-20) == (0, MAX_SHIFT)
    # 2^-40 would need a shift of 71: the shift stops at 62 and the multiplier shrinks.
    assert quantize_multiplier(2.0**-40) == (2**22, MAX_SHIFT)
    for bad in (0.0, -1.0, math.inf, math.nan, 2.0**31):
        with pytest.raises(ValueError):
            quantize_multiplier(bad)


def test_the_rounding_shift_rounds_half_toward_plus_infinity() -> None:
    # Multiply by 1/2 (M = 2^30, s = 31): ties at odd inputs.
    v = np.array([-3, -2, -1, 0, 1, 2, 3], dtype=np.int32)
    assert rounding_shift(v, 2**30, 31).tolist() == [-1, -1, 0, 0, 1, 1, 2]


def test_requantize_matches_real_arithmetic_per_channel_and_clamps() -> None:
    rng = np.random.default_rng(0)
    acc = rng.integers(-2**20, 2**20, size=(2, 3, 5), dtype=np.int64).astype(np.int32)
    reals = [1e-4, 3e-5, 7.5e-4]
    pairs = [quantize_multiplier(r) for r in reals]
    got = requantize(acc, [m for m, _ in pairs], [s for _, s in pairs], zero=5, axis=1)
    want = np.clip(np.floor(acc * np.array(reals)[None, :, None] + 0.5) + 5, -128, 127)
    assert got.dtype == np.int8
    # The multiplier errs by 2^-31 relative: a result can differ only next to a tie.
    assert np.abs(got.astype(np.int64) - want).max() <= 1
    assert np.mean(got == want) > 0.999
    relu6 = requantize(acc, *quantize_multiplier(1e-3), zero=0, lo=0, hi=60)
    assert relu6.min() >= 0 and relu6.max() <= 60
    with pytest.raises(ValueError, match="channel axis"):
        requantize(acc, [1, 2, 3], [30, 30, 30], zero=0)


def test_worst_case_products_do_not_overflow() -> None:
    values = [2**31 - 1, -(2**31)]
    m, s = quantize_multiplier(0.999999)
    exact = [(v * m + (1 << (s - 1))) >> s for v in values]  # Python integers never overflow
    assert rounding_shift(np.array(values, dtype=np.int64), m, s).tolist() == exact
