"""Case generators of the selection and linear-algebra ops: TopK (and ConvTranspose).

TopK's cases draw rows with repeated values, so the tie rule (the lower index first)
is always exercised, and NaN among the floats as an edge (NaN ranks above every
number). Selection only moves values, so its cases are exact.
"""

from __future__ import annotations

import numpy as np

from hetero.testing.cases_base import (
    EXACT,
    NUMERIC,
    Draw,
    Operand,
    Spec,
    generates,
    shape,
    with_nan,
)


@generates(("TopK",), NUMERIC)
def _topk(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 3, dim_hi=6)
    axis = d.integer(-len(s), len(s) - 1)
    k = d.integer(0, s[axis])
    # Few distinct values: ties in most rows. Unsigned dtypes stay non-negative.
    lo = 0 if dtype.kind == "u" else -4
    x = (d.rng.integers(lo, lo + 8, s) / (2 if dtype.kind == "f" else 1)).astype(dtype)
    return Spec((Operand("x", with_nan(d, x)),),
                {"k": k, "axis": axis, "largest": d.pick((1, 0))}, EXACT)
