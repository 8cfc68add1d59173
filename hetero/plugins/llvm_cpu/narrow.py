"""bfloat16 and the narrow types (float8, float4, int4, int2) in LLVM IR, by bit manipulation.

Representation, in memory as numpy holds them (ml_dtypes: one element a byte, bfloat16
two) and in registers:

- bfloat16 is an ``i16`` in memory and a ``float`` in registers holding a value
  bfloat16 represents exactly: a load shifts its bits up, a conversion to it rounds
  to nearest even (NaN stays NaN, quiet), a store keeps the upper half. LLVM's own
  ``bfloat`` would need compiler-rt's ``__truncsfbf2``, which a JIT process lacks.
- a narrow float is its byte, in memory and in registers; the tensor IR only moves
  and converts it (:mod:`hetero.core.lower.narrow`). Decoding loads the float from a
  table of the type's 256 (or 16) bit patterns, made by ml_dtypes, so it is ml_dtypes'
  by construction; encoding rounds float32 bits to nearest even with the type's
  subnormals, overflow rule (to infinity, to NaN, or saturating for float4) and NaN.
- int4 and int2 are a byte in registers holding the value sign- or zero-extended, and
  in memory the low bits, as ml_dtypes stores them.

Every conversion means what ``numpy.astype`` with ml_dtypes does, so a compiled
kernel, the interpreter and the ops' references agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
import numpy as np

from hetero.core.ir.types import BFLOAT16, NARROW_FLOAT_DTYPES, NARROW_INT_DTYPES
from hetero.errors import CodegenError

if TYPE_CHECKING:
    from hetero.plugins.llvm_cpu.exprs import ExprEmitter

I8, I16, I32, I64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F32 = ir.FloatType()

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


def is_bf16(dtype: np.dtype) -> bool:
    return dtype == BFLOAT16


def is_narrow_float(dtype: np.dtype) -> bool:
    return dtype in NARROW_FLOAT_DTYPES


def is_narrow_int(dtype: np.dtype) -> bool:
    return dtype in NARROW_INT_DTYPES


def register_type(dtype: np.dtype, in_memory: bool) -> ir.Type | None:
    """The LLVM type of bfloat16 or a narrow type; None for the others."""
    if is_bf16(dtype):
        return I16 if in_memory else F32
    if is_narrow_float(dtype) or is_narrow_int(dtype):
        return I8
    return None


def bits_of(dtype: np.dtype) -> int:
    """How many bits of its byte a narrow type uses."""
    return {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2, "float4_e2m1fn": 4}.get(dtype.name, 8)


def signed_int(dtype: np.dtype) -> np.dtype:
    """The 8-bit integer type a narrow integer type widens to."""
    return np.dtype(np.int8 if dtype.name.startswith("int") else np.uint8)


def const(dtype: np.dtype, value: float) -> ir.Constant:
    """``value`` of ``dtype`` as its register constant."""
    if is_bf16(dtype):
        return ir.Constant(F32, float(np.float32(BFLOAT16.type(value))))
    if is_narrow_float(dtype):
        return ir.Constant(I8, int(np.array(value, dtype).view(np.uint8)))
    return ir.Constant(I8, int(value) & 0xFF)


def after_load(em: ExprEmitter, raw: ir.Value, dtype: np.dtype) -> ir.Value:
    """The register value of ``dtype``'s bits ``raw`` as loaded."""
    b = em.builder
    if is_bf16(dtype):
        return b.bitcast(b.shl(b.zext(raw, I32), ir.Constant(I32, 16)), F32)
    width = bits_of(dtype)
    if width == 8:
        return raw
    if is_narrow_int(dtype) and dtype.name.startswith("int"):
        up = ir.Constant(I8, 8 - width)
        return b.ashr(b.shl(raw, up), up)
    return b.and_(raw, ir.Constant(I8, (1 << width) - 1))


def before_store(em: ExprEmitter, value: ir.Value, dtype: np.dtype) -> ir.Value:
    """The bits of register ``value`` of ``dtype`` as they are stored."""
    b = em.builder
    if is_bf16(dtype):
        return b.trunc(b.lshr(b.bitcast(value, I32), ir.Constant(I32, 16)), I16)
    width = bits_of(dtype)
    return value if width == 8 else b.and_(value, ir.Constant(I8, (1 << width) - 1))


def round_bf16(em: ExprEmitter, x: ir.Value) -> ir.Value:
    """float32 ``x`` rounded to bfloat16 (nearest, ties to even; NaN quiet), still float32."""
    b = em.builder
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 16)), ir.Constant(I32, 1))
    rounded = b.add(b.add(bits, ir.Constant(I32, 0x7FFF)), lsb)
    nan = b.fcmp_unordered("uno", x, x)
    kept = b.select(nan, b.or_(bits, ir.Constant(I32, 0x400000)), rounded)
    return b.bitcast(b.and_(kept, ir.Constant(I32, 0xFFFF0000 - (1 << 32))), F32)


def decode(em: ExprEmitter, raw: ir.Value, dtype: np.dtype) -> ir.Value:
    """The float32 value of narrow-float bits ``raw`` (an ``i8``)."""
    count = 1 << bits_of(dtype)
    name = f"hetero.decode.{dtype.name}"
    table = em.module.globals.get(name)
    if table is None:
        values = np.arange(count, dtype=np.uint8).view(dtype).astype(np.float32).view(np.uint32)
        ty = ir.ArrayType(I32, count)
        table = ir.GlobalVariable(em.module, ty, name=name)
        table.initializer = ir.Constant(ty, [ir.Constant(I32, int(v) - (1 << 32) if v >= 1 << 31 else int(v))
                                             for v in values])
        table.global_constant = True
        table.linkage = "internal"
    b = em.builder
    index = b.zext(b.and_(raw, ir.Constant(I8, count - 1)), I64)
    ptr = b.gep(table, [ir.Constant(I64, 0), index], inbounds=True)
    return b.bitcast(b.load(ptr, typ=I32), F32)


def encode(em: ExprEmitter, x: ir.Value, dtype: np.dtype, where: str) -> ir.Value:
    """float32 ``x`` as the bits of narrow float ``dtype``: nearest, ties to even."""
    if dtype.name == "float8_e8m0fnu":
        return _encode_e8m0(em, x)
    if dtype.name not in _FORMATS:
        raise CodegenError(f"{where}: a conversion to {dtype.name} is not supported by llvm_cpu")
    mbits, bias, max_mag, overflow, nan_bits, signed_zero, sign_at = _FORMATS[dtype.name]
    b = em.builder

    def c(v: int) -> ir.Constant:
        return ir.Constant(I32, v)

    bits = b.bitcast(x, I32)
    sign = b.lshr(bits, c(31))
    a = b.and_(bits, c(0x7FFFFFFF))
    ex = b.lshr(a, c(23))
    mant = b.and_(a, c(0x7FFFFF))
    # Below the type's smallest normal, the significand (with its implicit bit unless
    # float32's own exponent field is 0) is shifted to the subnormal grid.
    subnormal = b.icmp_unsigned("<", ex, c(128 - bias))
    denormal32 = b.icmp_unsigned("==", ex, c(0))
    sig = b.select(denormal32, mant, b.or_(mant, c(0x800000)))
    eff = b.select(denormal32, c(1), ex)
    sub_shift = b.sub(c(151 - bias - mbits), eff)
    sub_shift = b.select(b.icmp_unsigned(">", sub_shift, c(31)), c(31), sub_shift)
    value = b.select(subnormal, sig, b.sub(a, c((127 - bias) << 23)))
    shift = b.select(subnormal, sub_shift, c(23 - mbits))
    q = b.lshr(value, shift)
    rem = b.and_(value, b.sub(b.shl(c(1), shift), c(1)))
    half = b.shl(c(1), b.sub(shift, c(1)))
    odd = b.icmp_unsigned("!=", b.and_(q, c(1)), c(0))
    up = b.or_(b.icmp_unsigned(">", rem, half), b.and_(b.icmp_unsigned("==", rem, half), odd))
    mag = b.add(q, b.zext(up, I32))
    too_big = b.icmp_unsigned(">", mag, c(max_mag))
    nan = b.icmp_unsigned(">", a, c(0x7F800000))
    signed = b.shl(sign, c(sign_at))
    if signed_zero:
        big = {"inf": c(max_mag + 1), "nan": c(nan_bits or 0), "max": c(max_mag)}[overflow]
        mag = b.select(too_big, big, mag)
        out = b.or_(signed, mag)
        if nan_bits is not None:
            out = b.select(nan, b.or_(signed, c(nan_bits)), out)
        else:  # float4 has no NaN: ml_dtypes gives the zero of the opposite sign
            out = b.select(nan, b.shl(b.xor(sign, c(1)), c(sign_at)), out)
    else:
        out = b.select(b.icmp_unsigned("==", mag, c(0)), c(0), b.or_(signed, mag))
        out = b.select(b.or_(nan, too_big), c(0x80), out)
    return b.trunc(out, I8)


def float_to_narrow_int(em: ExprEmitter, x: ir.Value, dtype: np.dtype) -> ir.Value:
    """Float ``x`` as int4/int2 (register form): truncated toward zero, 0 when that is out
    of range or ``x`` is NaN, as ml_dtypes converts."""
    b = em.builder
    info = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}[dtype.name]
    fits = b.and_(b.fcmp_ordered(">", x, ir.Constant(x.type, info[0] - 1.0)),
                  b.fcmp_ordered("<", x, ir.Constant(x.type, info[1] + 1.0)))
    safe = b.select(fits, x, ir.Constant(x.type, 0.0))
    return b.fptosi(safe, I8)


def wrap_int(em: ExprEmitter, v: ir.Value, dtype: np.dtype) -> ir.Value:
    """Integer ``v`` (an ``i8``) wrapped to int4/int2 in register form."""
    b = em.builder
    width = bits_of(dtype)
    if dtype.name.startswith("int"):
        up = ir.Constant(I8, 8 - width)
        return b.ashr(b.shl(v, up), up)
    return b.and_(v, ir.Constant(I8, (1 << width) - 1))


def _encode_e8m0(em: ExprEmitter, x: ir.Value) -> ir.Value:
    """float32 ``x`` as float8_e8m0 (a power of two) as ml_dtypes converts: the exponent,
    one up when the significand is 1.5 or more; NaN (0xFF) for zero, negatives, NaN,
    infinities and what rounds past 2**127; a float32 subnormal gives 2**-127 below
    1.5 * 2**-127 and 2**-126 from there."""
    b = em.builder

    def c(v: int) -> ir.Constant:
        return ir.Constant(I32, v)

    bits = b.bitcast(x, I32)
    ex = b.and_(b.lshr(bits, c(23)), c(0xFF))
    mant = b.and_(bits, c(0x7FFFFF))
    normal = b.add(ex, b.zext(b.icmp_unsigned(">=", mant, c(0x400000)), I32))
    sub = b.zext(b.icmp_unsigned(">=", mant, c(0x600000)), I32)
    e = b.select(b.icmp_unsigned("==", ex, c(0)), sub, normal)
    bad = b.or_(b.or_(b.icmp_unsigned("!=", b.lshr(bits, c(31)), c(0)), b.icmp_unsigned("==", ex, c(0xFF))),
                b.or_(b.icmp_unsigned("==", b.and_(bits, c(0x7FFFFFFF)), c(0)),
                      b.icmp_unsigned(">", e, c(254))))
    return b.trunc(b.select(bad, c(0xFF), e), I8)
