"""Case generators of the sliding-window, matrix, normalisation, reduction and quantisation ops.

Weights that backends commonly bind at compile time (Conv's W and B, Gemm's B,
BatchNormalization's and LayerNormalization's parameters) are graph constants;
activations are graph inputs. Window geometries cover 1-, 2- and 3-D, strides,
asymmetric padding, dilation, grouped and depthwise convolution, ceil mode and
count_include_pad, always with at least one output element.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from hetero.core.ir.types import int_range
from hetero.errors import InputError
from hetero.testing.cases_base import (
    EXACT,
    FLOAT8,
    FLOATS,
    NARROW_INTS,
    Draw,
    Operand,
    Spec,
    Tolerance,
    away_from_zero,
    generates,
    integers,
    peak,
    rounded,
    shape,
    summed,
    uniform,
    values,
    with_nan,
)


def window(d: Draw, pool: bool) -> tuple[dict[str, Any], tuple[int, ...]]:
    """Window attributes and a spatial input shape they fit (pools pad less than the kernel)."""
    n = d.pick((2, 1, 3))
    kernel = [d.integer(1, 3 if n < 3 else 2) for _ in range(n)]
    dilations = [d.pick((1, 1, 2)) for _ in range(n)]
    strides = [d.integer(1, 2) for _ in range(n)]
    most = [k - 1 if pool else min(2, dl * (k - 1)) for k, dl in zip(kernel, dilations)]
    begin, end = [d.integer(0, m) for m in most], [d.integer(0, m) for m in most]
    spatial = []
    for i in range(n):
        extent = dilations[i] * (kernel[i] - 1) + 1
        smallest = max(1, extent - begin[i] - end[i])
        spatial.append(d.integer(smallest, smallest + (4 if n < 3 else 2)))
    attrs = {"kernel_shape": tuple(kernel), "strides": tuple(strides),
             "dilations": tuple(dilations), "pads": tuple(begin + end)}
    return attrs, tuple(spatial)


@generates(("Conv",), FLOATS)
def _conv(op: str, d: Draw, dtype: np.dtype) -> Spec:
    attrs, spatial = window(d, pool=False)
    kind = d.pick(("one", "grouped", "depthwise"))
    per_group = d.integer(1, 3)
    c_in = {"one": per_group, "grouped": 2 * per_group, "depthwise": per_group + 1}[kind]
    group = {"one": 1, "grouped": 2, "depthwise": c_in}[kind]
    c_out = group * d.integer(1, 2)
    x = uniform(d, (d.integer(1, 2), c_in) + spatial, dtype)
    w = uniform(d, (c_out, c_in // group) + attrs["kernel_shape"], dtype)
    b = uniform(d, (c_out,), dtype) if d.pick((True, False)) else None
    terms = (c_in // group) * math.prod(attrs["kernel_shape"])
    operands = (Operand("x", x), Operand("w", w, constant=True),
                None if b is None else Operand("b", b, constant=True))
    tolerance = summed(dtype, terms + 1, terms * peak(x) * peak(w) + peak(b))
    return Spec(operands, {**attrs, "group": group}, tolerance)


@generates(("AveragePool", "MaxPool"), FLOATS + ("int8", "uint8"))
def _pool(op: str, d: Draw, dtype: np.dtype) -> Spec:
    attrs, spatial = window(d, pool=True)
    attrs["ceil_mode"] = d.pick((0, 1))
    x = values(d, (d.integer(1, 2), d.integer(1, 3)) + spatial, dtype)
    if op == "MaxPool":
        # Indices: small integers tie often, so the first tap holding the maximum matters.
        if d.pick((False, True)):
            attrs.update(indices=1, storage_order=d.pick((0, 1)))
        return Spec((Operand("x", with_nan(d, x)),), attrs, EXACT)
    attrs["count_include_pad"] = d.pick((0, 1))
    terms = math.prod(attrs["kernel_shape"])
    return Spec((Operand("x", with_nan(d, x)),), attrs, summed(dtype, terms + 1, terms * peak(x)))


# AveragePool is float-only; MaxPool also takes int8 and uint8.
generates(("AveragePool",), FLOATS)(_pool)


@generates(("GlobalAveragePool", "GlobalMaxPool"), FLOATS)
def _global_pool(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = uniform(d, (d.integer(1, 2), d.integer(1, 3)) + shape(d, 1, 3, dim_hi=5), dtype, -4.0, 4.0)
    if op == "GlobalMaxPool":
        return Spec((Operand("x", with_nan(d, x)),), {}, EXACT)
    terms = math.prod(x.shape[2:])
    return Spec((Operand("x", with_nan(d, x)),), {}, summed(dtype, terms + 1, terms * peak(x)))


@generates(("BatchNormalization",), FLOATS)
def _batch_norm(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = uniform(d, (d.integer(1, 2), d.integer(1, 4)) + shape(d, 0, 2), dtype, -3.0, 3.0)
    c = x.shape[1]
    scale, bias, mean = (uniform(d, (c,), dtype, -2.0, 2.0) for _ in range(3))
    var = uniform(d, (c,), dtype, 0.25, 2.0)
    epsilon = d.pick((1e-5, 1e-3))
    params = [Operand(n, a, constant=True)
              for n, a in (("scale", scale), ("bias", bias), ("mean", mean), ("var", var))]
    # x - mean cancels; what survives is scaled by |scale| / sqrt(var).
    magnitude = (peak(x) + peak(mean)) * peak(scale) / math.sqrt(float(var.min()) + epsilon)
    return Spec((Operand("x", x), *params), {"epsilon": epsilon},
                rounded(dtype, 8, magnitude + peak(bias)))


@generates(("LayerNormalization",), FLOATS + ("float64", "bfloat16"))
def _layer_norm(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 3, dim_hi=5, dim_lo=2)
    axis = d.integer(-len(s), len(s) - 1)
    normalized = s[axis:]
    size = math.prod(normalized)
    # Each normalised group is a spread of values around an offset: variance well above 0.
    rows = [d.rng.permutation(np.linspace(-2.0, 2.0, size)) + d.rng.uniform(-1, 1)
            for _ in range(math.prod(s[:axis % len(s)]))]
    x = (np.array(rows) + d.rng.uniform(-0.1, 0.1, (len(rows), size))).reshape(s).astype(dtype)
    param_shape = normalized[d.integer(0, len(normalized) - 1):]
    scale = uniform(d, param_shape, dtype, -2.0, 2.0)
    bias = uniform(d, param_shape, dtype) if d.pick((True, False)) else None
    operands = (Operand("x", x), Operand("scale", scale, constant=True),
                None if bias is None else Operand("bias", bias, constant=True))
    # Mean and variance are sums of `size` terms; the centred values are at most 3/std.
    tolerance = summed(dtype, 2 * size + 8, 3.0 * size * peak(scale) + peak(bias), ulps=8)
    # statistics=1 adds each row's mean and 1/std (float32, at most 1/std of 1 here).
    attrs = {"axis": axis, "epsilon": d.pick((1e-5, 1e-3)), "statistics": d.pick((0, 1))}
    return Spec(operands, attrs, tolerance)


@generates(("LRN",), FLOATS)
def _lrn(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = uniform(d, (d.integer(1, 2), d.integer(1, 6)) + shape(d, 1, 2), dtype, -2.0, 2.0)
    size = d.integer(1, 5)
    attrs = {"size": size, "alpha": d.pick((1e-4, 0.1, 1.0)), "beta": d.pick((0.75, 0.5, 1.0)),
             "bias": d.pick((1.0, 2.0))}
    return Spec((Operand("x", x),), attrs, rounded(dtype, size + 16, peak(x)))


@generates(("Gemm",), FLOATS)
def _gemm(op: str, d: Draw, dtype: np.dtype) -> Spec:
    m, k, n = d.integer(1, 6), d.integer(1, 8), d.integer(1, 6)
    trans_a, trans_b = d.pick((0, 1)), d.pick((0, 1))
    a = uniform(d, (k, m) if trans_a else (m, k), dtype)
    b = uniform(d, (n, k) if trans_b else (k, n), dtype)
    c_shape = d.pick((None, (), (n,), (1, n), (m, 1), (m, n)))
    c = None if c_shape is None else uniform(d, c_shape, dtype)
    alpha, beta = d.pick((1.0, 0.5, 2.0)), d.pick((1.0, 0.5, 0.0))
    operands = (Operand("a", a), Operand("b", b, constant=d.pick((True, False))),
                None if c is None else Operand("c", c, constant=d.pick((True, False))))
    magnitude = alpha * k * peak(a) * peak(b) + beta * peak(c)
    attrs = {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b}
    return Spec(operands, attrs, summed(dtype, k + 2, magnitude))


@generates(("MatMul",), FLOATS + ("int32", "int64"))
def _matmul(op: str, d: Draw, dtype: np.dtype) -> Spec:
    m, k, n = d.integer(1, 5), d.integer(1, 8), d.integer(1, 5)
    batch = shape(d, 0, 2, dim_hi=3)
    a_batch = tuple(1 if d.pick((False, True)) else x for x in batch)[d.integer(0, len(batch)):]
    b_batch = tuple(1 if d.pick((False, True)) else x for x in batch)[d.integer(0, len(batch)):]
    # A 1-D operand is a row (A) or a column (B) vector, as in numpy.
    sa = (k,) if d.pick((False, False, True)) else a_batch + (m, k)
    sb = (k,) if d.pick((False, False, True)) else b_batch + (k, n)
    if dtype.kind == "f":
        a, b = uniform(d, sa, dtype), uniform(d, sb, dtype)
        return Spec((Operand("a", a), Operand("b", b)), {}, summed(dtype, k, k * peak(a) * peak(b)))
    a, b = integers(d, sa, dtype, -20, 20), integers(d, sb, dtype, -20, 20)
    return Spec((Operand("a", a), Operand("b", b)), {}, EXACT)


@generates(("Softmax",), FLOATS)
def _softmax(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = uniform(d, shape(d, 1, 3, dim_hi=6), dtype, -4.0, 4.0)
    axis = d.integer(-x.ndim, x.ndim - 1)
    # An exp per term and a sum of them: the outputs are at most 1.
    return Spec((Operand("x", x),), {"axis": axis}, rounded(dtype, x.shape[axis] + 8, 1.0))


@generates(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"), FLOATS + ("int8", "uint8", "int32", "int64"))
def _reduce(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 4, dim_hi=3)
    axes = [a for a in range(len(s)) if d.pick((True, False))]
    axes = [a - len(s) if d.pick((True, False)) else a for a in axes]  # negative axes too
    terms = math.prod(s[a] for a in axes) if axes else math.prod(s)
    # Sums of at most 81 values in [-1, 1] (or [0, 2] unsigned) stay inside int8 (uint8).
    x = integers(d, s, dtype, 0 if dtype.kind == "u" else -1, 2 if dtype.kind == "u" else 1) \
        if dtype.kind in "iu" else uniform(d, s, dtype)
    attrs = {"axes": tuple(d.rng.permutation(axes).tolist()), "keepdims": d.pick((1, 0))}
    if op in ("ReduceMax", "ReduceMin") or dtype.kind != "f":
        return Spec((Operand("x", with_nan(d, x)),), attrs, EXACT)
    return Spec((Operand("x", with_nan(d, x)),), attrs, summed(dtype, terms + 1, terms * peak(x)))


_QUANT_INTS = ("int8", "uint8", "int16", "uint16") + NARROW_INTS
_QUANT_FLOATS = FLOAT8 + ("float4_e2m1fn",)


def _quant_params(d: Draw, s: tuple[int, ...], scale_dtype: np.dtype, zero_dtype: np.dtype
                  ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """A scale and zero point, per tensor (shape () or [1]), per axis or blocked, and the
    attributes (axis, block_size) that say which."""
    axis = d.integer(-len(s), len(s) - 1)
    mode = d.pick(("tensor", "axis", "blocked")) if s[axis] > 1 else "tensor"
    attrs: dict[str, Any] = {"axis": axis}
    if mode == "blocked":
        block = d.integer(1, s[axis])
        attrs["block_size"] = block
        params = tuple(-(-n // block) if k == axis % len(s) else n for k, n in enumerate(s))
    else:
        params = (s[axis],) if mode == "axis" else d.pick(((), (1,)))
    scale = uniform(d, params, scale_dtype, 0.01, 0.5)
    if zero_dtype.name in _QUANT_FLOATS:  # their zero point is 0 by the spec
        return scale, np.zeros(params, zero_dtype), attrs
    lo, hi = int_range(zero_dtype)
    low = {"int8": -20, "uint8": 100, "int32": -1000, "int16": -3000, "uint16": 30000}.get(
        zero_dtype.name, lo)
    return scale, integers(d, params, zero_dtype, low, min(low + 40, hi)), attrs


def _along(param: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """``param`` shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    if param.size == 1:
        return param.reshape(())
    return param.reshape([-1 if i == axis % rank else 1 for i in range(rank)])


def _expanded(param: np.ndarray, s: tuple[int, ...], attrs: dict[str, Any]) -> np.ndarray:
    """A scale or zero point repeated to broadcast against shape ``s``."""
    axis = attrs["axis"] % len(s)
    if "block_size" in attrs:
        return np.repeat(param, attrs["block_size"], axis=axis).take(range(s[axis]), axis=axis)
    return _along(param, len(s), axis)


@generates(("QuantizeLinear",), FLOATS + ("bfloat16",))
def _quantize(op: str, d: Draw, dtype: np.dtype) -> Spec:
    """To every quantised type: integers of 16, 8, 4 and 2 bits, float8 (saturating or
    not) and float4, per tensor, per axis or blocked."""
    s = shape(d, 1, 4)
    zero_dtype = np.dtype(d.pick(_QUANT_INTS + _QUANT_FLOATS))
    scale, zero, attrs = _quant_params(d, s, dtype, zero_dtype)
    wide_scale = _expanded(scale, s, attrs).astype(np.float64)
    if zero_dtype.name in _QUANT_FLOATS:
        # Quotients over the type's range and past it, infinities and NaN: the division
        # is the reference's (float32), the one rounding to the narrow type decides.
        top = float(ml_dtypes.finfo(zero_dtype).max)
        x = d.rng.uniform(-1.5, 1.5, s) * top * wide_scale * d.pick((1.0, 0.01))
        x[d.rng.random(s) < 0.1] = d.pick((np.inf, -np.inf, np.nan))
        if zero_dtype.name in FLOAT8:
            attrs["saturate"] = d.pick((1, 0))
    else:
        lo, hi = int_range(zero_dtype)
        # x = (q - zero + offset) * scale with |offset| <= 1/4: x / scale lies a quarter
        # away from any rounding tie, more than float16's rounding of x can move it; some
        # q fall outside the range and saturate.
        q = integers(d, s, np.int64, lo - 10, hi + 10)
        offset = d.rng.uniform(-0.25, 0.25, s)
        x = (q - _expanded(zero, s, attrs) + offset) * wide_scale
    operands = (Operand("x", x.astype(dtype)), Operand("scale", scale, constant=True),
                Operand("zero_point", zero, constant=True))
    return Spec(operands, attrs, EXACT)


@generates(("DequantizeLinear",), ("int8", "uint8", "int32", "int16", "uint16") + NARROW_INTS
           + _QUANT_FLOATS)
def _dequantize(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 4)
    scale_dtype = np.dtype(d.pick(FLOATS + ("bfloat16",)))
    scale, zero, attrs = _quant_params(d, s, scale_dtype, dtype)
    if dtype.name in _QUANT_FLOATS:  # every bit pattern, NaN included
        count = 16 if dtype.name == "float4_e2m1fn" else 256
        x = integers(d, s, np.uint8, 0, count - 1).view(dtype)
    elif dtype.name in NARROW_INTS or dtype.itemsize == 1:
        lo, hi = int_range(dtype)
        x = integers(d, s, dtype, lo, hi)
    else:
        x = integers(d, s, dtype, -2000 if dtype.kind == "i" else 0, 2000)
    operands = (Operand("x", x), Operand("scale", scale, constant=True),
                Operand("zero_point", zero, constant=True) if d.pick((True, False)) else None)
    # x - zero is exact; one product, rounded once to float32 and again to float16.
    tolerance = rounded(scale_dtype, 2) if scale_dtype.name != "bfloat16" else Tolerance(2**-8, 0.0)
    return Spec(operands, attrs, tolerance)


def _reduced(d: Draw) -> tuple[tuple[int, ...], dict[str, Any], int]:
    """A shape, reduction attributes over some of its axes (negative ones too) and the
    number of terms each output reduces."""
    s = shape(d, 1, 4, dim_hi=3)
    axes = [a for a in range(len(s)) if d.pick((True, False))]
    axes = [a - len(s) if d.pick((True, False)) else a for a in axes]
    terms = math.prod(s[a] for a in axes) if axes else math.prod(s)
    attrs = {"axes": tuple(d.rng.permutation(axes).tolist()), "keepdims": d.pick((1, 0))}
    return s, attrs, terms


@generates(("ReduceProd", "ReduceL1", "ReduceSumSquare"), FLOATS + ("int32", "int64"))
def _reduce_more(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s, attrs, terms = _reduced(d)
    if dtype.kind in "iu":
        # Products of -1, 0 and 1, and sums of at most 81 small squares, stay exact.
        x = integers(d, s, dtype, -1 if op == "ReduceProd" else -3, 1 if op == "ReduceProd" else 3)
        return Spec((Operand("x", x),), attrs, EXACT)
    if op == "ReduceProd":
        # Magnitudes in [0.5, 1.5]: each factor adds one rounding, relative to the product.
        x = away_from_zero(d, s, dtype, 0.5, 1.5)
        return Spec((Operand("x", with_nan(d, x)),), attrs, rounded(dtype, terms + 2))
    x = uniform(d, s, dtype)
    magnitude = terms * peak(x) ** (2 if op == "ReduceSumSquare" else 1)
    return Spec((Operand("x", with_nan(d, x)),), attrs, summed(dtype, terms + 2, magnitude))


@generates(("ReduceL2", "ReduceLogSum", "ReduceLogSumExp"), FLOATS)
def _reduce_log_sqrt(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s, attrs, terms = _reduced(d)
    if op == "ReduceL2":
        # A sum of squares is a sum of positive terms: k roundings relative to itself,
        # halved by the square root.
        x = uniform(d, s, dtype)
        return Spec((Operand("x", with_nan(d, x)),), attrs, rounded(dtype, terms + 4))
    if op == "ReduceLogSum":
        # A positive sum, k roundings relative; the log turns them absolute.
        x = uniform(d, s, dtype, 0.5, 2.0)
        return Spec((Operand("x", with_nan(d, x)),), attrs, rounded(dtype, terms + 8, 1.0))
    # exp of x - max has a few ulps each; the log of their sum carries k of them
    # absolute, and the max added back rounds relative to the result.
    x = uniform(d, s, dtype, -4.0, 4.0)
    return Spec((Operand("x", with_nan(d, x)),), attrs,
                rounded(dtype, terms + 8, peak(x) + math.log(terms) + 1.0))


@generates(("ArgMax", "ArgMin"), FLOATS + ("int8", "uint8", "int32", "int64"))
def _arg_extreme(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 4, dim_hi=4)
    # Few distinct values, so ties (where select_last_index matters) are common.
    x = integers(d, s, dtype, 0, 4) if dtype.kind in "iu" else \
        (integers(d, s, np.int64, -3, 3) * 0.5).astype(dtype)
    attrs = {"axis": d.integer(-len(s), len(s) - 1), "keepdims": d.pick((1, 0)),
             "select_last_index": d.pick((0, 1))}
    return Spec((Operand("x", with_nan(d, x)),), attrs, EXACT)


@generates(("LogSoftmax",), FLOATS)
def _log_softmax(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = uniform(d, shape(d, 1, 3, dim_hi=6), dtype, -4.0, 4.0)
    axis = d.integer(-x.ndim, x.ndim - 1)
    n = x.shape[axis]
    # x - max - log(sum of n exps): the outputs are at most 8 + log(n) in magnitude.
    return Spec((Operand("x", x),), {"axis": axis}, rounded(dtype, n + 8, 8.0 + math.log(n)))


@generates(("Hardmax",), FLOATS)
def _hardmax(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 3, dim_hi=5)
    # Few distinct values, so ties (the first maximum wins) are common.
    x = (integers(d, s, np.int64, -3, 3) * 0.5).astype(dtype)
    return Spec((Operand("x", with_nan(d, x)),), {"axis": d.integer(-len(s), len(s) - 1)}, EXACT)


def _spread_rows(d: Draw, rows: int, size: int) -> np.ndarray:
    """``rows`` rows of ``size`` values spread over [-2, 2] around an offset: each row's
    variance is well above 0."""
    return np.array([d.rng.permutation(np.linspace(-2.0, 2.0, size)) + d.rng.uniform(-1, 1)
                     + d.rng.uniform(-0.1, 0.1, size) for _ in range(rows)])


@generates(("InstanceNormalization", "GroupNormalization"), FLOATS)
def _instance_group_norm(op: str, d: Draw, dtype: np.dtype) -> Spec:
    n, spatial = d.integer(1, 2), shape(d, 1, 2, dim_hi=4, dim_lo=2)
    groups = d.integer(1, 3)
    per_group = 1 if op == "InstanceNormalization" else d.integer(1, 2)
    c = groups * per_group
    size = per_group * math.prod(spatial)
    # Rows are (n, group) pairs: channels of a group are contiguous in memory.
    x = _spread_rows(d, n * groups, size).reshape((n, c) + spatial).astype(dtype)
    params = (c,) if op == "InstanceNormalization" or d.pick((True, False)) else (groups,)
    scale, bias = uniform(d, params, dtype, -2.0, 2.0), uniform(d, params, dtype)
    attrs: dict[str, Any] = {"epsilon": d.pick((1e-5, 1e-3))}
    if op == "GroupNormalization":
        attrs["num_groups"] = groups
    operands = (Operand("x", x), Operand("scale", scale, constant=d.pick((True, False))),
                Operand("bias", bias, constant=d.pick((True, False))))
    # As LayerNormalization: two sums of `size` terms, centred values at most 3/std.
    tolerance = summed(dtype, 2 * size + 8, 3.0 * size * peak(scale) + peak(bias), ulps=8)
    return Spec(operands, attrs, tolerance)


@generates(("RMSNormalization",), FLOATS)
def _rms_norm(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 3, dim_hi=5)
    axis = d.integer(-len(s), len(s) - 1)
    normalized = s[axis:]
    size = math.prod(normalized)
    # Magnitudes in [0.5, 2]: the root mean square is at least 0.5, |x / rms| at most 4.
    x = away_from_zero(d, s, dtype, 0.5, 2.0)
    scale = uniform(d, normalized[d.integer(0, len(normalized) - 1):], dtype, -2.0, 2.0)
    attrs = {"axis": axis, "epsilon": d.pick((1e-5, 1e-3))}
    operands = (Operand("x", x), Operand("scale", scale, constant=d.pick((True, False))))
    return Spec(operands, attrs, rounded(dtype, size + 8, 4.0 * peak(scale)))


@generates(("LpNormalization",), FLOATS)
def _lp_norm(op: str, d: Draw, dtype: np.dtype) -> Spec:
    s = shape(d, 1, 3, dim_hi=5)
    axis = d.integer(-len(s), len(s) - 1)
    # Magnitudes in [0.25, 2]: no norm is near 0; the outputs are at most 1.
    x = away_from_zero(d, s, dtype, 0.25, 2.0)
    attrs = {"axis": axis, "p": d.pick((1, 2))}
    return Spec((Operand("x", x),), attrs, rounded(dtype, s[axis] + 8, 1.0))


@generates(("LpPool", "GlobalLpPool"), FLOATS)
def _lp_pool(op: str, d: Draw, dtype: np.dtype) -> Spec:
    p = d.pick((1, 2, 3))
    if op == "GlobalLpPool":
        x = uniform(d, (d.integer(1, 2), d.integer(1, 3)) + shape(d, 1, 3, dim_hi=5), dtype)
        attrs: dict[str, Any] = {"p": p}
        terms = math.prod(x.shape[2:])
    else:
        attrs, spatial = window(d, pool=True)
        attrs.update(ceil_mode=d.pick((0, 1)), p=p)
        x = uniform(d, (d.integer(1, 2), d.integer(1, 3)) + spatial, dtype)
        terms = math.prod(attrs["kernel_shape"])
    # A sum of positive terms, each a few roundings: relative to itself, and the root
    # keeps it relative.
    return Spec((Operand("x", with_nan(d, x)),), attrs, rounded(dtype, terms + 8))


@generates(("Col2Im",), FLOATS + ("float64", "bfloat16", "int32", "int64"))
def _col2im(op: str, d: Draw, dtype: np.dtype) -> Spec:
    """Overlapping (stride below the block), spaced and padded windows in 1 to 3 dims."""
    n = d.pick((2, 1, 3))
    block = [d.integer(1, 3 if n < 3 else 2) for _ in range(n)]
    dilations = [d.pick((1, 1, 2)) for _ in range(n)]
    strides = [d.integer(1, 3) for _ in range(n)]
    pads = [d.integer(0, 2) for _ in range(2 * n)]
    image, count = [], []
    for i in range(n):
        extent = dilations[i] * (block[i] - 1) + 1
        size = d.integer(max(1, extent - pads[i] - pads[i + n]), extent + 4)
        image.append(size)
        count.append((size + pads[i] + pads[i + n] - extent) // strides[i] + 1)
    cols = (d.integer(1, 2), d.integer(1, 2) * math.prod(block), math.prod(count))
    floating = dtype.kind == "f" or dtype.name == "bfloat16"
    x = uniform(d, cols, dtype, -4.0, 4.0) if floating else values(d, cols, dtype)
    attrs = {"image_shape": tuple(image), "block_shape": tuple(block), "strides": tuple(strides),
             "dilations": tuple(dilations), "pads": tuple(pads)}
    terms = math.prod(block)  # at most every tap lands on one element
    return Spec((Operand("x", x),), attrs,
                summed(dtype, terms + 1, terms * peak(x)) if floating else EXACT)


@generates(("MaxUnpool",), FLOATS + ("float64", "bfloat16"))
def _max_unpool(op: str, d: Draw, dtype: np.dtype) -> Spec:
    """Indices anywhere in the output, repeats included (the later element wins), constant
    or at run time, and sometimes an output_shape other than the inferred one (an odd
    size MaxPool rounded down); as an edge case an index past the end, which must be
    refused."""
    n = d.pick((2, 1, 3))
    kernel = [d.integer(1, 3) for _ in range(n)]
    strides = [d.integer(1, 3) for _ in range(n)]
    pads = [d.integer(0, k - 1) for k in kernel] + [d.integer(0, k - 1) for k in kernel]
    spatial = [d.integer(max(1, 1 + (pads[i] + pads[i + n] - kernel[i]) // strides[i] + 1), 4)
               for i in range(n)]
    x = values(d, (d.integer(1, 2), d.integer(1, 3), *spatial), dtype)
    out = [x.shape[0], x.shape[1]] + [
        (spatial[i] - 1) * strides[i] + kernel[i] - pads[i] - pads[i + n] for i in range(n)]
    attrs: dict[str, Any] = {"kernel_shape": tuple(kernel), "strides": tuple(strides),
                             "pads": tuple(pads)}
    if d.pick((False, True)):
        out = out[:2] + [v + d.integer(0, 2) for v in out[2:]]
        attrs["output_shape"] = tuple(out)
    size = math.prod(out)
    indices = integers(d, x.shape, np.int64, 0, size - 1)
    if d.edge():
        indices.reshape(-1)[int(d.rng.integers(indices.size))] = size
        return Spec((Operand("x", x), Operand("i", indices)), attrs, EXACT, error=InputError)
    return Spec((Operand("x", x), Operand("i", indices, constant=d.pick((False, True)))), attrs,
                EXACT)


@generates(("DeformConv",), FLOATS)
def _deform_conv(op: str, d: Draw, dtype: np.dtype) -> Spec:
    kh, kw = d.integer(1, 3), d.integer(1, 3)
    group, offset_group = d.pick((1, 2)), d.pick((1, 2))
    c = 2 * d.integer(1, 2)
    oc = group * d.integer(1, 2)
    height, width = d.integer(kh, 6), d.integer(kw, 6)
    pads = [d.integer(0, 1) for _ in range(4)]
    attrs = {"kernel_shape": [kh, kw], "pads": pads, "group": group, "offset_group": offset_group,
             "strides": [d.integer(1, 2), d.integer(1, 2)], "dilations": [1, d.integer(1, 2)]}
    oh = (height + pads[0] + pads[2] - kh) // attrs["strides"][0] + 1
    ow = (width + pads[1] + pads[3] - (kw - 1) * attrs["dilations"][1] - 1) // attrs["strides"][1] + 1
    if ow < 1:
        attrs["dilations"][1], ow = 1, (width + pads[1] + pads[3] - kw) // attrs["strides"][1] + 1
    n, taps = d.integer(1, 2), offset_group * kh * kw
    x = uniform(d, (n, c, height, width), dtype)
    w = uniform(d, (oc, c // group, kh, kw), dtype)
    # Offsets of a few pixels move taps across pixel borders and past the image's edge.
    offset = uniform(d, (n, 2 * taps, oh, ow), dtype, -2.5, 2.5)
    b = uniform(d, (oc,), dtype) if d.pick((True, False)) else None
    mask = uniform(d, (n, taps, oh, ow), dtype, 0.0, 1.0) if d.pick((True, False)) else None
    terms = (c // group) * kh * kw
    tolerance = summed(dtype, terms + 1, terms * peak(x) * peak(w) + peak(b))
    operands = (Operand("X", x), Operand("W", w, constant=True), Operand("offset", offset),
                None if b is None else Operand("B", b, constant=True),
                None if mask is None else Operand("mask", mask))
    return Spec(operands, attrs, tolerance)
