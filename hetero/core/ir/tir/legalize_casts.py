"""Conversions legalised to primitives: float16 rounding, bfloat16 and the narrow types in bits.

Part of :mod:`hetero.core.ir.tir.legalize`. bfloat16, the float8 variants, float4
and int4/int2 are *storage types*: after legalisation a value of one is only loaded,
stored, selected and bitcast from or to the unsigned integer of its width (its bits,
as numpy with ml_dtypes holds them: bfloat16 in two bytes, the others in one, int4
and int2 in the low bits with the upper ones clear). Every conversion to or from them
becomes integer and float32 arithmetic on those bits, meaning what ``numpy.astype``
with ml_dtypes does:

- to bfloat16 or a narrow float: from float32 as it is, from float16 widened (exact),
  from float64 and integers through float32 rounded to odd, so that the one rounding
  to the narrow type is the direct one; then round to nearest, ties to even, with the
  type's subnormals, overflow (to infinity, to NaN, or saturating for float4) and NaN;
- from them: the exact float32 value, built in its bits;
- to int4/int2: floats truncate toward zero, 0 when that is out of range or NaN;
  integers wrap;
- to float16 from float64 or an integer: through float32 rounded to odd, since a
  direct conversion needs a runtime library call on many targets (compiler-rt's
  ``__truncdfhf2``).
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.tir.expr import (
    Const, Expr, binary, bitcast, call, cast, const, eq, gt, logical_and, logical_or, lt, ne,
    select, shift_right,
)
from hetero.core.ir.types import BFLOAT16, NARROW_FLOAT_DTYPES, NARROW_INT_DTYPES

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
U8, U16, U32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)

#: name: (mantissa bits, exponent bias, largest finite magnitude's bits, what overflow
#: gives ("inf", "nan" or "max"), bits of NaN or None, whether the sign has its own bit
#: beside zero (False: "fnuz", one zero and NaN at 0x80), sign bit position).
_FORMATS = {
    "float8_e4m3fn": (3, 7, 0x7E, "nan", 0x7F, True, 7),
    "float8_e4m3fnuz": (3, 8, 0x7F, "nan", None, False, 7),
    "float8_e5m2": (2, 15, 0x7B, "inf", 0x7E, True, 7),
    "float8_e5m2fnuz": (2, 16, 0x7F, "nan", None, False, 7),
    "float4_e2m1fn": (1, 1, 0x7, "max", None, True, 3),
}
_INT_RANGES = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}


def is_storage(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a storage type (bfloat16, a narrow float or integer)."""
    return dtype == BFLOAT16 or dtype in NARROW_FLOAT_DTYPES or dtype in NARROW_INT_DTYPES


def bits_dtype(dtype: np.dtype) -> np.dtype:
    """The unsigned integer holding a storage type's bits."""
    return U16 if dtype == BFLOAT16 else U8


def wide_dtype(dtype: np.dtype) -> np.dtype:
    """The standard type a storage type's values widen to exactly."""
    if dtype in NARROW_INT_DTYPES:
        return np.dtype(np.int8 if dtype.name.startswith("int") else np.uint8)
    return F32


def _width(dtype: np.dtype) -> int:
    return {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2, "float4_e2m1fn": 4}.get(dtype.name, 8)


def _u32(v: int) -> Const:
    return const(v, U32)


def _shl(a: Expr, amount: int) -> Expr:
    return binary("shl", a, amount)


def _and(a: Expr, mask: int) -> Expr:
    return binary("bit_and", a, mask)


def _or(a: Expr, b: Expr) -> Expr:
    return binary("bit_or", a, b)


def _shift_u32(op: str, a: Expr, amount: Expr) -> Expr:
    """A shift of a uint32 by an ``amount`` known to be below 32, in the primitive form."""
    return binary(op, a, binary("bit_and", amount, 31))


def storage_const(value: int | float | bool, dtype: np.dtype) -> Expr:
    """A literal of storage type ``dtype``: its bits, bitcast."""
    if dtype in NARROW_INT_DTYPES:
        bits = int(value) & ((1 << _width(dtype)) - 1)
    else:
        bits = int(np.array(value, dtype).view(bits_dtype(dtype)))
    return bitcast(const(bits, bits_dtype(dtype)), dtype)


def legal_cast(x: Expr, dst: np.dtype) -> Expr:
    """``cast(x, dst)`` in primitives, for an ``x`` that is already legal."""
    src = x.dtype
    if src == dst:
        return x
    if is_storage(src):
        return legal_cast(_widen(x), dst)
    if dst in NARROW_INT_DTYPES:
        return _to_narrow_int(x, dst)
    if is_storage(dst):
        wide = _exact_or_odd_f32(x)
        bits = _round_bf16(wide) if dst == BFLOAT16 else _encode(wide, dst)
        return bitcast(bits, dst)
    if dst == F16 and src.kind != "b" and (src.kind != "f" or src == F64):
        return cast(_exact_or_odd_f32(x), F16)
    return cast(x, dst)


def legal_bitcast(x: Expr, dst: np.dtype) -> Expr:
    """``bitcast(x, dst)`` in primitives: a storage type's bits go through its unsigned integer."""
    src = x.dtype
    if is_storage(src) and dst.kind not in "iu":
        return legal_bitcast(bitcast(x, bits_dtype(src)), dst)
    if is_storage(dst) and src.kind not in "iu":
        return bitcast(bitcast(x, bits_dtype(dst)), dst)
    return bitcast(x, dst)


def _widen(x: Expr) -> Expr:
    """A storage-type value as its exact standard-type value."""
    dtype = x.dtype
    if dtype in NARROW_INT_DTYPES:
        wide, width = wide_dtype(dtype), _width(dtype)
        v = bitcast(x, wide)
        if wide.kind == "i":
            return shift_right(_shl(v, 8 - width), 8 - width)
        return _and(v, (1 << width) - 1)
    bits = cast(bitcast(x, bits_dtype(dtype)), U32)
    if dtype == BFLOAT16:
        return bitcast(_shl(bits, 16), F32)
    return bitcast(_decode(bits, dtype), F32)


def _exact_or_odd_f32(x: Expr) -> Expr:
    """``x`` as float32: exactly from float16 and float32, rounded to odd from wider types
    (float64, integers through float64), so a later rounding to fewer bits is the direct one."""
    if x.dtype == F32:
        return x
    if x.dtype == F16:
        return cast(x, F32)
    wide = x if x.dtype == F64 else cast(x, F64)
    t = cast(wide, F32)
    inexact = ne(cast(t, F64), wide)
    finite = lt(call("abs", t), const(np.inf, F32))
    odd = bitcast(_or(bitcast(t, U32), _u32(1)), F32)
    return select(logical_and(inexact, finite), odd, t)


def _round_bf16(x: Expr) -> Expr:
    """float32 ``x`` rounded to bfloat16's bits (nearest, ties to even; NaN stays NaN, quiet)."""
    bits = bitcast(x, U32)
    lsb = _and(shift_right(bits, 16), 1)
    rounded = binary("add", binary("add", bits, 0x7FFF), lsb)
    kept = select(ne(x, x), _or(bits, _u32(0x400000)), rounded)
    return cast(shift_right(kept, 16), U16)


def _to_narrow_int(x: Expr, dst: np.dtype) -> Expr:
    """``x`` as int4/int2 bits: floats truncate (0 out of range or NaN), integers wrap."""
    wide, width = wide_dtype(dst), _width(dst)
    if x.dtype.kind == "f":
        lo, hi = _INT_RANGES[dst.name]
        fits = logical_and(gt(x, const(lo - 1.0, x.dtype)), lt(x, const(hi + 1.0, x.dtype)))
        v = cast(select(fits, x, const(0.0, x.dtype)), wide)
    else:
        v = cast(x, wide)
    return bitcast(_and(v, (1 << width) - 1), dst)


def _decode(bits: Expr, dtype: np.dtype) -> Expr:
    """The float32 bits of the narrow float whose bits are the uint32 ``bits``."""
    if dtype.name == "float8_e8m0fnu":
        # 2**(e - 127): the exponent field as it is, 2**-127 a float32 subnormal, 0xFF NaN.
        value = select(eq(bits, _u32(0)), _u32(0x400000), _shl(bits, 23))
        return select(eq(bits, _u32(0xFF)), _u32(0x7FC00000), value)
    mbits, bias, _, overflow, nan_bits, signed_zero, sign_at = _FORMATS[dtype.name]
    sign = _shl(_and(shift_right(bits, sign_at), 1), 31)
    mag = _and(bits, (1 << sign_at) - 1)
    e, m = shift_right(mag, mbits), _and(mag, (1 << mbits) - 1)
    normal = _or(_shl(binary("add", e, 127 - bias), 23), _shl(m, 23 - mbits))
    scale = const(2.0 ** (1 - bias - mbits), F32)
    subnormal = bitcast(binary("mul", cast(m, F32), scale), U32)
    value = select(eq(e, _u32(0)), subnormal, normal)
    if overflow == "inf":  # the top exponent holds infinity and the NaNs
        top = (1 << (sign_at - mbits)) - 1
        special = select(eq(m, _u32(0)), _u32(0x7F800000), _u32(0x7FC00000))
        value = select(eq(e, _u32(top)), special, value)
    elif nan_bits is not None:
        value = select(eq(mag, _u32(nan_bits)), _u32(0x7FC00000), value)
    out = _or(sign, value)
    if not signed_zero:  # fnuz: the pattern of minus zero is the one NaN
        out = select(eq(bits, _u32(0x80)), _u32(0x7FC00000), out)
    return out


def _encode(x: Expr, dtype: np.dtype) -> Expr:
    """float32 ``x`` as the uint8 bits of narrow float ``dtype``: nearest, ties to even."""
    if dtype.name == "float8_e8m0fnu":
        return _encode_e8m0(x)
    mbits, bias, max_mag, overflow, nan_bits, signed_zero, sign_at = _FORMATS[dtype.name]
    bits = bitcast(x, U32)
    sign = shift_right(bits, 31)
    a = _and(bits, 0x7FFFFFFF)
    ex, mant = shift_right(a, 23), _and(a, 0x7FFFFF)
    # Below the type's smallest normal, the significand (with its implicit bit unless
    # float32's own exponent field is 0) is shifted to the subnormal grid.
    subnormal = lt(ex, _u32(128 - bias))
    denormal32 = eq(ex, _u32(0))
    sig = select(denormal32, mant, _or(mant, _u32(0x800000)))
    eff = select(denormal32, _u32(1), ex)
    sub_shift = binary("sub", _u32(151 - bias - mbits), eff)
    sub_shift = select(gt(sub_shift, _u32(31)), _u32(31), sub_shift)
    value = select(subnormal, sig, binary("sub", a, (127 - bias) << 23))
    shift = select(subnormal, sub_shift, _u32(23 - mbits))
    q = _shift_u32("shr", value, shift)
    rem = binary("bit_and", value, binary("sub", _shift_u32("shl", _u32(1), shift), 1))
    half = _shift_u32("shl", _u32(1), binary("sub", shift, 1))
    odd = ne(_and(q, 1), _u32(0))
    up = logical_or(gt(rem, half), logical_and(eq(rem, half), odd))
    mag = binary("add", q, cast(up, U32))
    too_big = gt(mag, _u32(max_mag))
    nan = gt(a, _u32(0x7F800000))
    signed = _shl(sign, sign_at)
    if signed_zero:
        big = {"inf": max_mag + 1, "nan": nan_bits or 0, "max": max_mag}[overflow]
        out = _or(signed, select(too_big, _u32(big), mag))
        if nan_bits is not None:
            out = select(nan, _or(signed, _u32(nan_bits)), out)
        else:  # float4 has no NaN: ml_dtypes gives the zero of the opposite sign
            out = select(nan, _shl(binary("bit_xor", sign, 1), sign_at), out)
    else:
        out = select(eq(mag, _u32(0)), _u32(0), _or(signed, mag))
        out = select(logical_or(nan, too_big), _u32(0x80), out)
    return cast(out, U8)


def _encode_e8m0(x: Expr) -> Expr:
    """float32 ``x`` as float8_e8m0 (a power of two) as ml_dtypes converts: the exponent,
    one up when the significand is 1.5 or more; NaN (0xFF) for zero, negatives, NaN,
    infinities and what rounds past 2**127; a float32 subnormal gives 2**-127 below
    1.5 * 2**-127 and 2**-126 from there."""
    bits = bitcast(x, U32)
    ex, mant = _and(shift_right(bits, 23), 0xFF), _and(bits, 0x7FFFFF)
    normal = binary("add", ex, cast(gt(mant, _u32(0x3FFFFF)), U32))
    sub = cast(gt(mant, _u32(0x5FFFFF)), U32)
    e = select(eq(ex, _u32(0)), sub, normal)
    bad = logical_or(logical_or(ne(shift_right(bits, 31), _u32(0)), eq(ex, _u32(0xFF))),
                     logical_or(eq(_and(bits, 0x7FFFFFFF), _u32(0)), gt(e, _u32(254))))
    return cast(select(bad, _u32(0xFF), e), U8)
