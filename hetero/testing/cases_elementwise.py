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
    FLOAT8,
    FLOATS,
    INTS,
    NARROW,
    NARROW_INTS,
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
           "Log": (0.05, 20.0), "Gelu": (-4.0, 4.0),
           "Sin": (-4.0, 4.0), "Cos": (-4.0, 4.0), "Tan": (-1.2, 1.2), "Asin": (-0.95, 0.95),
           "Acos": (-0.95, 0.95), "Atan": (-4.0, 4.0), "Sinh": (-4.0, 4.0), "Cosh": (-4.0, 4.0),
           "Asinh": (-4.0, 4.0), "Acosh": (1.05, 10.0), "Atanh": (-0.9, 0.9),
           "Elu": (-4.0, 4.0), "Selu": (-4.0, 4.0), "Celu": (-4.0, 4.0), "Softplus": (-6.0, 6.0),
           "Mish": (-4.0, 4.0), "Swish": (-6.0, 6.0)}
# Attribute values the activations among them are drawn with.
_SMOOTH_ATTRS = {"Elu": {"alpha": (1.0, 0.5, 2.0)}, "Celu": {"alpha": (1.0, 0.5, 2.0)},
                 "Selu": {"alpha": (1.6732632423543772, 1.0), "gamma": (1.0507009873554805, 2.0)},
                 "Swish": {"alpha": (1.0, 0.5, 1.702)}}
# Those whose result is x times a bounded factor, so their absolute error scales with |x|.
_TIMES_X = ("Gelu", "Selu", "Celu", "Mish", "Swish")


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
    attrs = {"approximate": d.pick(("none", "tanh"))} if op == "Gelu" else {
        name: d.pick(options) for name, options in _SMOOTH_ATTRS.get(op, {}).items()}
    # Gelu(x) = x·Phi(x) cancels for negative x: its absolute error scales with |x|.
    factors = [v for v in attrs.values() if isinstance(v, float)]
    scale = max(1.0, peak(x)) * max([1.0, *factors]) if op in _TIMES_X else 1.0
    if op in _SMOOTH_ATTRS or op in ("Softplus", "Mish"):  # NaN must come through
        x = with_nan(d, x)
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


@generates(("Softsign",), FLOATS)
def _softsign(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(with_nan(d, uniform(d, shape(d, 0, 4), dtype, -6.0, 6.0)), rounded(dtype, 4))


@generates(("ThresholdedRelu",), FLOATS)
def _thresholded_relu(op: str, d: Draw, dtype: np.dtype) -> Spec:
    # Quarters, so that some elements tie with the threshold (which they must not pass).
    x = (integers(d, shape(d, 0, 4), np.int64, -12, 12) / 4).astype(dtype)
    return _unary(with_nan(d, x), EXACT, alpha=d.pick((1.0, 0.0, -0.5, 2.0)))


@generates(("Shrink",), NUMERIC)
def _shrink(op: str, d: Draw, dtype: np.dtype) -> Spec:
    if dtype.kind == "f":
        x = (integers(d, shape(d, 0, 4), np.int64, -16, 16) / 4).astype(dtype)
        lambd, bias = d.pick((0.5, 1.0, 1.5)), d.pick((0.0, 0.5, 1.5))
        return _unary(with_nan(d, x), rounded(dtype, 2, peak(x)), lambd=lambd, bias=bias)
    # Integers: bias at most lambd, so that x - bias stays inside an unsigned dtype.
    x = values(d, shape(d, 0, 4), dtype)
    lambd, bias = d.pick(((0.5, 0.0), (1.5, 1.5), (3.0, 2.5), (10.0, 0.5)))
    return _unary(x, EXACT, lambd=lambd, bias=bias)


@generates(("Sign",), NUMERIC)
def _sign(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 0, 4), dtype)
    x = np.where(d.rng.random(x.shape) < 0.25, 0, x).astype(dtype)  # zeros are their own sign
    return _unary(with_nan(d, x), EXACT)


def _specials(d: Draw, x: np.ndarray) -> np.ndarray:
    """``x`` with some elements NaN, +inf and -inf."""
    x = np.array(x)
    pick = d.rng.random(x.shape)
    x[pick < 0.45] = np.nan
    x[pick < 0.3] = np.inf
    x[pick < 0.15] = -np.inf
    return x


@generates(("IsNaN", "IsInf"), FLOATS)
def _float_class(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = _specials(d, values(d, shape(d, 0, 4), dtype))
    attrs = {} if op == "IsNaN" else {"detect_positive": d.pick((0, 1)),
                                     "detect_negative": d.pick((0, 1))}
    return _unary(x, EXACT, **attrs)


@generates(("Floor", "Ceil", "Round"), FLOATS)
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


def _narrow_values(d: Draw, s: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Any bit patterns of bfloat16 or a narrow type (NaN included), one byte (two) each."""
    if dtype.name in NARROW_INTS or dtype.name == "float4_e2m1fn":
        width = 2 if dtype.name.endswith("int2") else 4
        return integers(d, s, np.uint8, 0, (1 << width) - 1).view(dtype)
    raw = integers(d, s, np.uint16 if dtype.itemsize == 2 else np.uint8, 0, (1 << 8 * dtype.itemsize) - 1)
    return raw.view(dtype)


def _into_narrow(d: Draw, s: tuple[int, ...], dtype: np.dtype, to: np.dtype) -> np.ndarray:
    """Floats for a cast to a narrow float or bfloat16: each target value's neighbourhood,
    its rounding midpoints exactly, values past its range, infinities and NaN."""
    grid = np.arange(1 << (4 if to.name == "float4_e2m1fn" else 8 * to.itemsize), dtype=np.uint64)
    with np.errstate(invalid="ignore"):  # the NaN patterns among the target's codes, dropped below
        grid = grid.astype(np.uint8 if to.itemsize == 1 else np.uint16).view(to).astype(np.float64)
    grid = np.unique(grid[np.isfinite(grid)])
    picks = grid[d.rng.integers(0, grid.size - 1, s)]
    nxt = grid[np.minimum(np.searchsorted(grid, picks) + 1, grid.size - 1)]
    kind = d.rng.integers(0, 4, s)
    x = np.where(kind == 0, picks, np.where(kind == 1, (picks + nxt) / 2,
                 np.where(kind == 2, picks * d.rng.uniform(0.9, 1.1, s), picks * 8)))
    x = np.where(d.rng.random(s) < 0.05, np.inf * d.rng.choice((-1, 1), s), x)
    x = np.where(d.rng.random(s) < 0.05, np.nan, x)
    with np.errstate(over="ignore"):
        return x.astype(dtype)


@generates(("Cast",), ALL + NARROW)
def _cast(op: str, d: Draw, dtype: np.dtype) -> Spec:
    to = np.dtype(d.pick(ALL + NARROW))
    s = shape(d, 0, 4)
    narrow_to, narrow_from = to.name in NARROW, dtype.name in NARROW
    if narrow_to or narrow_from:
        return _cast_narrow(d, s, dtype, to)
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


def _cast_narrow(d: Draw, s: tuple[int, ...], dtype: np.dtype, to: np.dtype) -> Spec:
    """Casts from or to bfloat16 and the narrow types, compared bit for bit with what
    ml_dtypes gives (float8 targets saturating or not, float8_e8m0 rounding up, down or
    to nearest)."""
    attrs: dict[str, object] = {"to": to}
    if to.name in FLOAT8:
        attrs["saturate"] = d.pick((1, 0))
    if to.name == "float8_e8m0fnu":
        attrs.update(saturate=d.pick((1, 0)), round_mode=d.pick(("up", "down", "nearest")))
    integral_to = to.kind in "iub" or to.name in NARROW_INTS
    if dtype.name in NARROW:
        x = _narrow_values(d, s, dtype)
        if integral_to and dtype.name not in NARROW_INTS:
            # Only values that fit the target: C leaves the others (and NaN) undefined.
            wide = x.astype(np.float32)
            low = 0.0 if to.kind in "ub" or to.name.startswith("u") else -100.0
            x = np.where(np.isfinite(wide) & (wide > low - 1) & (wide < 100), wide, 1).astype(dtype)
    elif dtype.kind == "f" and not integral_to:
        x = _into_narrow(d, s, dtype, to)
    elif dtype.kind == "f":  # to int4/int2: ml_dtypes truncates, and gives 0 out of range
        x = uniform(d, s, dtype, -20.0, 20.0)
    else:  # integers and bool within ±100, which int4 and int2 wrap
        x = values(d, s, dtype)
    return _unary(x, EXACT, **attrs)


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


@generates(("Pow",), NUMERIC)
def _pow(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = broadcast_shapes(d, 2)
    if dtype.kind in "iu":  # powers that stay inside the dtype; negative exponents too
        small = dtype.itemsize == 1
        a = integers(d, sa, dtype, 0 if dtype.kind == "u" else (-2 if small else -5), 3 if small else 5)
        b = integers(d, sb, dtype, 0 if dtype.kind == "u" else -2, 5 if small else 8)
        return Spec((Operand("a", a), Operand("b", b)), {}, EXACT)
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
generates(("And", "Or", "Xor"), ("bool",))(_compare)


@generates(("Where",), ALL)
def _where(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sc, sx, sy = broadcast_shapes(d, 3)
    operands = (Operand("condition", values(d, sc, np.dtype(bool))),
                Operand("x", values(d, sx, dtype)), Operand("y", values(d, sy, dtype)))
    return Spec(operands, {}, EXACT)


@generates(("Mod",), NUMERIC)
def _mod(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = broadcast_shapes(d, 2)
    fmod = d.pick((0, 1))
    if dtype.kind == "f":
        a = uniform(d, sa, dtype, -10.0, 10.0)
        b = away_from_zero(d, sb, dtype, 0.5, 4.0)
        # A floored remainder of the opposite sign adds b: one rounding. fmod is exact.
        tolerance = EXACT if fmod else rounded(dtype, 2, peak(b))
        return Spec((Operand("a", with_nan(d, a)), Operand("b", b)), {"fmod": fmod}, tolerance)
    (alo, ahi), _ = _int_range(op, dtype)
    a = integers(d, sa, dtype, alo, ahi)
    b = integers(d, sb, np.int64, 1, 12)
    if dtype.kind == "i":
        b = b * (integers(d, sb, np.int64, 0, 1) * 2 - 1)
    return Spec((Operand("a", a), Operand("b", b.astype(dtype))), {"fmod": fmod}, EXACT)


@generates(("PRelu",), ("float32", "float16", "int32", "int64"))
def _prelu(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sx = shape(d, 0, 4)
    # The slope broadcasts to X's shape: a suffix of it, with some dims 1.
    ss = tuple(1 if d.pick((False, True)) else n for n in sx[len(sx) - d.integer(0, len(sx)):])
    if dtype.kind == "f":
        x, slope = uniform(d, sx, dtype, -4.0, 4.0), uniform(d, ss, dtype, -1.0, 1.0)
        x = with_nan(d, x)
    else:
        x, slope = integers(d, sx, dtype, -100, 100), integers(d, ss, dtype, -10, 10)
    return Spec((Operand("x", x), Operand("slope", slope)), {}, EXACT)


def _bits(d: Draw, s: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Any values of the integer ``dtype``, its extremes included."""
    info = np.iinfo(dtype)
    x = d.rng.integers(info.min, info.max, s, dtype=dtype, endpoint=True)
    pick = d.rng.random(s)
    x[pick < 0.1] = info.min
    x[pick > 0.9] = info.max
    return np.asarray(x)


@generates(("BitwiseAnd", "BitwiseOr", "BitwiseXor"), INTS)
def _bitwise(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sa, sb = broadcast_shapes(d, 2)
    return Spec((Operand("a", _bits(d, sa, dtype)), Operand("b", _bits(d, sb, dtype))), {}, EXACT)


@generates(("BitwiseNot",), INTS)
def _bitwise_not(op: str, d: Draw, dtype: np.dtype) -> Spec:
    return _unary(_bits(d, shape(d, 0, 4), dtype), EXACT)


@generates(("BitShift",), INTS)
def _bit_shift(op: str, d: Draw, dtype: np.dtype) -> Spec:
    sx, sy = broadcast_shapes(d, 2)
    bits = 8 * dtype.itemsize
    # Amounts past the bit width (and negative ones for signed types) give the fill alone.
    y = integers(d, sy, np.int64, -3 if dtype.kind == "i" else 0, bits + 3).astype(dtype)
    return Spec((Operand("x", _bits(d, sx, dtype)), Operand("y", y)),
                {"direction": d.pick(("LEFT", "RIGHT"))}, EXACT)
