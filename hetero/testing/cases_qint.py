"""Case generators of the integer quantised ops (QConv, QMatMul, QAdd, QMul, QAveragePool,
Requantize): int8 in, exact int32 accumulation, int8 out, so every case is exact.

Each draws real scale ratios and turns them into fixed-point multipliers and
shifts the way the quantiser does (:func:`quantize_multiplier`), per tensor or per
output channel, with the output clamp sometimes raised or lowered as a fused Relu
or Clip would.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.core.ir.ops.qint import quantize_add_multipliers
from hetero.testing.cases_base import (
    EXACT,
    Draw,
    Operand,
    Spec,
    generates,
    integers,
    shape,
)
from hetero.testing.cases_nn import window

_INT8 = ("int8",)


def _int8(d: Draw, s: tuple[int, ...]) -> np.ndarray:
    return integers(d, s, np.int8, -128, 127)


def _output(d: Draw) -> dict[str, Any]:
    """The output's zero point and clamp: full range, a fused Relu, or a fused Clip."""
    y_zero = d.integer(-20, 20)
    y_min, y_max = d.pick(((-128, 127), (y_zero, 127), (-50, 60)))
    return {"y_zero": y_zero, "y_min": y_min, "y_max": y_max}


def _factors(d: Draw, typical: float, count: int) -> dict[str, tuple[int, ...]]:
    """Multipliers and shifts for ``count`` real ratios within a factor 2 of ``typical``."""
    pairs = [quantize_multiplier(typical * d.rng.uniform(0.5, 2.0)) for _ in range(count)]
    return {"multiplier": tuple(p[0] for p in pairs), "shift": tuple(p[1] for p in pairs)}


@generates(("QConv",), _INT8)
def _qconv(op: str, d: Draw, dtype: np.dtype) -> Spec:
    attrs, spatial = window(d, pool=False)
    per_group, group = d.integer(1, 3), d.pick((1, 2))
    c_in, c_out = per_group * group, group * d.integer(1, 2)
    x = _int8(d, (d.integer(1, 2), c_in) + spatial)
    w = _int8(d, (c_out, per_group) + attrs["kernel_shape"])
    bias = integers(d, (c_out,), np.int32, -5000, 5000) if d.pick((True, False)) else None
    terms = per_group * math.prod(attrs["kernel_shape"])
    # A ratio that maps a typical accumulator (about sqrt(terms)·128·74) into int8.
    factors = _factors(d, 1.0 / (math.sqrt(terms) * 128 * 74 / 64), d.pick((1, c_out)))
    operands = (Operand("x", x), Operand("w", w, constant=True),
                None if bias is None else Operand("b", bias, constant=True))
    attrs = {**attrs, "group": group, "x_zero": d.integer(-20, 20), **factors, **_output(d)}
    return Spec(operands, attrs, EXACT)


@generates(("QMatMul",), _INT8)
def _qmatmul(op: str, d: Draw, dtype: np.dtype) -> Spec:
    k, n = d.integer(1, 8), d.integer(1, 5)
    a = _int8(d, shape(d, 0, 2, dim_hi=3) + (k,))
    b = _int8(d, (k, n))
    bias = integers(d, (n,), np.int32, -5000, 5000) if d.pick((True, False)) else None
    factors = _factors(d, 1.0 / (math.sqrt(k) * 128 * 74 / 64), d.pick((1, n)))
    operands = (Operand("a", a), Operand("b", b, constant=True),
                None if bias is None else Operand("bias", bias, constant=True))
    return Spec(operands, {"a_zero": d.integer(-20, 20), **factors, **_output(d)}, EXACT)


def _broadcast_pair(d: Draw) -> tuple[tuple[int, ...], tuple[int, ...]]:
    full = shape(d, 0, 3)
    return tuple(tuple(1 if d.pick((False, True)) else n for n in full[d.integer(0, len(full)):])
                 for _ in range(2))


@generates(("QAdd", "QMul"), _INT8)
def _qbinary(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = _broadcast_pair(d)
    operands = (Operand("a", _int8(d, sa)), Operand("b", _int8(d, sb)))
    attrs: dict[str, Any] = {"a_zero": d.integer(-20, 20), "b_zero": d.integer(-20, 20), **_output(d)}
    if op == "QAdd":
        a_mult, b_mult, shift = quantize_add_multipliers(d.rng.uniform(0.2, 1.0), d.rng.uniform(0.2, 1.0))
        attrs.update(a_multiplier=a_mult, b_multiplier=b_mult, shift=shift)
    else:
        multiplier, shift = quantize_multiplier(d.rng.uniform(1 / 256, 1 / 64))
        attrs.update(multiplier=multiplier, shift=shift)
    return Spec(operands, attrs, EXACT)


@generates(("QAveragePool",), _INT8)
def _qaverage_pool(op: str, d: Draw, dtype: np.dtype) -> Spec:
    attrs, spatial = window(d, pool=True)
    x = _int8(d, (d.integer(1, 2), d.integer(1, 3)) + spatial)
    # The division by the window size is folded into the multiplier.
    multiplier, shift = quantize_multiplier(d.rng.uniform(0.5, 1.0) / math.prod(attrs["kernel_shape"]))
    attrs.update(x_zero=d.integer(-20, 20), multiplier=multiplier, shift=shift, **_output(d))
    return Spec((Operand("x", x),), attrs, EXACT)


@generates(("Requantize",), ("int8", "int32"))
def _requantize(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 4)
    axis = d.integer(0, len(s) - 1)
    if dtype == np.int8:
        x, typical = _int8(d, s), 0.5
    else:
        x, typical = integers(d, s, np.int32, -100_000, 100_000), 1 / 1000
    factors = _factors(d, typical, s[axis] if d.pick((True, False)) else 1)
    attrs = {"x_zero": d.integer(-20, 20), "axis": axis, **factors, **_output(d)}
    return Spec((Operand("x", x),), attrs, EXACT)
