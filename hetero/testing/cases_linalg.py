"""Case generators of the selection and linear-algebra ops: TopK and ConvTranspose.

TopK's cases draw rows with repeated values, so the tie rule (the lower index first)
is always exercised, and NaN among the floats as an edge (NaN ranks above every
number). Selection only moves values, so its cases are exact. ConvTranspose's cover
1-, 2- and 3-D, strides, dilations, output_padding, pads (negative ones extending the
output too), groups and bias, within the bound on a sum of its terms.
"""

from __future__ import annotations

import math

import numpy as np

from hetero.testing.cases_base import (
    EXACT,
    FLOATS,
    NUMERIC,
    Draw,
    Operand,
    Spec,
    Tolerance,
    generates,
    peak,
    shape,
    summed,
    uniform,
    with_nan,
)


@generates(("TopK",), NUMERIC)
def _topk(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 3, dim_hi=6)
    axis = d.integer(-len(s), len(s) - 1)
    # k = 0 gives empty outputs, which cases leave out (a backend may refuse empty tensors).
    k = d.integer(1, s[axis])
    # Few distinct values: ties in most rows. Unsigned dtypes stay non-negative.
    lo = 0 if dtype.kind == "u" else -4
    x = (d.rng.integers(lo, lo + 8, s) / (2 if dtype.kind == "f" else 1)).astype(dtype)
    return Spec((Operand("x", with_nan(d, x)),),
                {"k": k, "axis": axis, "largest": d.pick((1, 0))}, EXACT)


@generates(("ConvTranspose",), FLOATS)
def _conv_transpose(op: str, d: Draw, dtype: np.dtype) -> Spec:
    n = d.pick((2, 1, 3))
    kernel = tuple(d.integer(1, 3 if n < 3 else 2) for _ in range(n))
    strides = tuple(d.integer(1, 3) for _ in range(n))
    dilations = tuple(d.pick((1, 1, 2)) for _ in range(n))
    output_padding = tuple(d.integer(0, s - 1) for s in strides)
    spatial = tuple(d.integer(1, 4 if n < 3 else 2) for _ in range(n))
    begins, ends = [], []
    for i in range(n):
        natural = (strides[i] * (spatial[i] - 1) + output_padding[i]
                   + dilations[i] * (kernel[i] - 1) + 1)
        begins.append(d.integer(-1, min(2, natural - 1)))
        ends.append(d.integer(-1, min(2, natural - 1 - begins[-1])))
    group = d.pick((1, 1, 2))
    per_in, per_out = d.integer(1, 3), d.integer(1, 2)
    x = uniform(d, (d.integer(1, 2), per_in * group) + spatial, dtype)
    w = uniform(d, (per_in * group, per_out) + kernel, dtype)
    b = uniform(d, (per_out * group,), dtype) if d.pick((True, False)) else None
    terms = per_in * math.prod(kernel)
    operands = (Operand("x", x), Operand("w", w, constant=True),
                None if b is None else Operand("b", b, constant=True))
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilations,
             "pads": tuple(begins + ends), "output_padding": output_padding, "group": group}
    return Spec(operands, attrs, summed(dtype, terms + 1, terms * peak(x) * peak(w) + peak(b)))


@generates(("Det",), FLOATS)
def _det(op: str, d: Draw, dtype: np.dtype) -> Spec:
    n = d.integer(1, 5)
    x = uniform(d, (*shape(d, 0, 2, dim_hi=3), n, n), dtype, -2.0, 2.0)
    if d.edge() and n > 1:  # a singular matrix: two equal rows
        x[..., 1, :] = x[..., 0, :]
    # The reference and llvm_cpu both eliminate in float64 and round once: one rounding
    # of the dtype apart, plus float64's error on the n! products that may cancel.
    terms = math.factorial(n)
    big = float(np.float64(peak(x)) ** n)
    tolerance = Tolerance(2 * float(np.finfo(dtype).eps),
                          terms * terms * big * float(np.finfo(np.float64).eps) + float(np.finfo(dtype).tiny))
    return Spec((Operand("X", x),), {}, tolerance)
