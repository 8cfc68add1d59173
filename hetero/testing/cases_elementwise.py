"""Case generators of the elementwise ops: unary maths, activations, Cast, binary ops, Where.

Binary ops and Where broadcast their operands in every way numpy allows (missing
leading axes, size-1 axes on either side, scalars). Integer operands stay small
enough that no sum, difference or product leaves the dtype, so wrap-around, which
ONNX leaves undefined, is never exercised.
"""

from __future__ import annotations

import numpy as np

from hetero.testing.cases_base import (
    ALL,
    EXACT,
    FLOATS,
    NUMERIC,
    Draw,
    Operand,
    Spec,
    Tolerance,
    away_from_zero,
    exact_or,
    generates,
    integers,
    peak,
    rounded,
    shape,
    uniform,
    values,
    with_nan,
)

_SIGNED = ("float32", "float16", "int8", "int32", "int64")
_TRANSCENDENTAL_ULPS = 8

# Input ranges on which each op is well conditioned and its output finite in float16.
_SMOOTH = {"Sigmoid": (-6.0, 6.0), "Tanh": (-4.0, 4.0), "Erf": (-3.0, 3.0), "Exp": (-5.0, 5.0),
           "Log": (0.05, 20.0), "Gelu": (-4.0, 4.0)}


def broadcast_shapes(d: Draw, count: int, rank_hi: int = 4) -> list[tuple[int, ...]]:
    """``count`` shapes that broadcast together: suffixes of one shape, some dims set to 1."""
    full = shape(d, 0, rank_hi)
    shapes = []
    for _ in range(count):
        dims = full[len(full) - d.integer(0, len(full)):]
        shapes.append(tuple(1 if d.pick((False, False, True)) else n for n in dims))
    return shapes


def _unary(x: np.ndarray, tolerance: Tolerance, **attrs: object) -> Spec:
    return Spec((Operand("x", x),), dict(attrs), tolerance)


@generates(tuple(_SMOOTH), FLOATS)
def _smooth(op: str, d: Draw, dtype: np.dtype) -> Spec:
    lo, hi = _SMOOTH[op]
    x = uniform(d, shape(d, 0, 4), dtype, lo, hi)
    attrs = {"approximate": d.pick(("none", "tanh"))} if op == "Gelu" else {}
    # Gelu(x) = x·Phi(x) cancels for negative x: its absolute error scales with |x|.
    scale = max(1.0, peak(x)) if op == "Gelu" else 1.0
    return _unary(x, rounded(dtype, _TRANSCENDENTAL_ULPS, scale), **attrs)


@generates(("Sqrt", "Reciprocal"), FLOATS)
def _correctly_rounded(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 0, 4)
    x = uniform(d, s, dtype, 0.1, 10.0) if op == "Sqrt" else away_from_zero(d, s, dtype, 0.25, 4.0)
    return _unary(x, rounded(dtype, 2))


@generates(("HardSigmoid", "HardSwish", "LeakyRelu"), FLOATS)
def _piecewise_linear(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = uniform(d, shape(d, 0, 4), dtype, -5.0, 5.0)
    if op == "HardSigmoid":
        alpha, beta = d.pick((0.2, 0.5, 1 / 6)), d.pick((0.5, 0.0, 0.3))
        return _unary(with_nan(d, x), rounded(dtype, 4, alpha * peak(x) + beta), alpha=alpha, beta=beta)
    if op == "LeakyRelu":
        return _unary(with_nan(d, x), rounded(dtype, 2), alpha=d.pick((0.01, 0.1, 0.2, 1.5)))
    # x · (x/6 + 1/2): the bracket cancels near x = -3, leaving an error of eps·|x|.
    return _unary(with_nan(d, x), rounded(dtype, 4, peak(x)))


@generates(("Floor", "Ceil"), FLOATS)
def _rounding(op: str, d: Draw, dtype: np.dtype) -> Spec:
    # Quarters: integers, halves and values in between, all exact in float16.
    return _unary((integers(d, shape(d, 0, 4), np.int64, -20, 20) / 4).astype(dtype), EXACT)


@generates(("Relu", "Neg"), _SIGNED)
def _signed_exact(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(with_nan(d, values(d, shape(d, 0, 4), dtype)), EXACT)


@generates(("Abs",), NUMERIC)
def _abs(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(values(d, shape(d, 0, 4), dtype), EXACT)


@generates(("Not",), ("bool",))
def _not(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(values(d, shape(d, 0, 4), dtype), EXACT)


@generates(("Identity",), ALL)
def _identity(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(values(d, shape(d, 0, 4), dtype), EXACT)


@generates(("Dropout",), FLOATS)
def _dropout(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(values(d, shape(d, 0, 4), dtype), EXACT)


@generates(("Clip",), NUMERIC)
def _clip(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 0, 4), dtype)
    # Fractional bounds check that integer inputs clip to ceil(min) and floor(max).
    low, high = d.pick(((0.0, 6.0), (-1.5, 2.5), (-np.inf, 2.0), (-30.0, np.inf),
                        (-np.inf, np.inf), (-300.0, 300.0)))
    return _unary(with_nan(d, x), EXACT, min=low, max=high)


@generates(("Cast",), ALL)
def _cast(op: str, d: Draw, dtype: np.dtype) -> Spec:
    to = np.dtype(d.pick(ALL))
    s = shape(d, 0, 4)
    # Only values that fit the target: C leaves out-of-range float-to-int casts undefined.
    low = 0 if to.kind in "ub" or dtype.kind == "u" else -100
    if dtype.kind == "f":
        x = uniform(d, s, dtype, low, 100.0)
        x[d.rng.random(s) < 0.25] = 0  # exact zeros make False when cast to bool
    elif dtype.kind == "b":
        x = values(d, s, dtype)
    else:
        x = integers(d, s, dtype, low, 100)
    return _unary(x, EXACT, to=to)


def _int_range(op: str, dtype: np.dtype) -> tuple[tuple[int, int], tuple[int, int]]:
    """Ranges of A and B on which ``op`` stays inside ``dtype``."""
    if dtype == np.uint8:
        return ((16, 31), (0, 15)) if op == "Sub" else ((0, 15), (0, 15))
    if dtype == np.int8:
        return (-10, 10), (-10, 10)
    return (-100, 100), (-100, 100)


@generates(("Add", "Sub", "Mul", "Div", "Max", "Min"), NUMERIC)
def _arithmetic(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = broadcast_shapes(d, 2)
    if dtype.kind == "f":
        a = uniform(d, sa, dtype, -4.0, 4.0)
        b = away_from_zero(d, sb, dtype, 0.5, 4.0) if op == "Div" else uniform(d, sb, dtype, -4.0, 4.0)
    else:
        (alo, ahi), (blo, bhi) = _int_range(op, dtype)
        a = integers(d, sa, dtype, alo, ahi)
        if op == "Div":  # truncating division by 1..10 of either sign, never by 0
            signs = integers(d, sb, np.int64, 0, 1) * 2 - 1 if dtype.kind == "i" else 1
            b = (integers(d, sb, np.int64, 1, 10) * signs).astype(dtype)
        else:
            b = integers(d, sb, dtype, blo, bhi)
    tolerance = EXACT if op in ("Max", "Min") else exact_or(dtype, lambda: rounded(dtype, 2))
    if op in ("Max", "Min"):  # a NaN on either side must win
        a, b = with_nan(d, a), with_nan(d, b)
    return Spec((Operand("a", a), Operand("b", b)), {}, tolerance)


@generates(("Pow",), FLOATS)
def _pow(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = broadcast_shapes(d, 2)
    a, b = uniform(d, sa, dtype, 0.5, 2.0), uniform(d, sb, dtype, -2.0, 2.0)
    return Spec((Operand("a", a), Operand("b", b)), {}, rounded(dtype, _TRANSCENDENTAL_ULPS, 1.0))


def _tied(d: Draw, s: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Values from a set of seven, so that comparisons meet many ties."""
    if dtype.kind == "b":
        return values(d, s, dtype)
    if dtype.kind == "f":
        return (integers(d, s, np.int64, -3, 3) / 4).astype(dtype)
    return integers(d, s, dtype, 0 if dtype.kind == "u" else -3, 6 if dtype.kind == "u" else 3)


@generates(("Less", "LessOrEqual", "Greater", "GreaterOrEqual"), NUMERIC)
def _compare(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = broadcast_shapes(d, 2)
    a, b = _tied(d, sa, dtype), _tied(d, sb, dtype)
    return Spec((Operand("a", with_nan(d, a)), Operand("b", with_nan(d, b))), {}, EXACT)


generates(("Equal",), NUMERIC + ("bool",))(_compare)
generates(("And", "Or"), ("bool",))(_compare)


@generates(("Where",), ALL)
def _where(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sc, sx, sy = broadcast_shapes(d, 3)
    operands = (Operand("condition", values(d, sc, np.dtype(bool))),
                Operand("x", values(d, sx, dtype)), Operand("y", values(d, sy, dtype)))
    return Spec(operands, {}, EXACT)
