"""Float32 functions written as plain arithmetic, so LLVM's loop vectorizer widens them.

LLVM has no vector code for ``llvm.exp``: on x86 a vectorised loop calls ``expf`` once
per lane, which made ``exp`` most of Softmax's time; ``tanh`` and ``erf`` are libm
calls LLVM cannot widen at all (GELU, LSTM gates). :func:`tanh_f32` and
:func:`erf_f32` are Eigen's rational approximations (odd polynomial over even
polynomial on a clamped argument), within 4 eps of the float64 result (the
conformance tolerance of transcendentals is 8). :func:`exp_f32` is Cephes'
``expf`` (Moshier): ``x = n·ln2 + r`` with ``|r| <= ln2/2`` (Cody-Waite's two-part
ln2), a degree-6 polynomial for ``e^r``, and ``2^n`` built in the exponent bits. Its
error is within 2 ulp of the correctly rounded result over the whole float range
(``tests/plugins/llvm_cpu/test_llvm_vecmath.py`` measures it against float64 numpy
on every 1,021st float32), with IEEE's answers at the edges: ``+inf`` past
ln(FLT_MAX), gradual underflow to 0 below ln of the smallest denormal, NaN for NaN.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

F32 = ir.FloatType()
I32 = ir.IntType(32)

#: x is clamped to this range first: past it the result is +inf or 0 whatever x is,
#: and ``2^n`` stays within two normal exponents.
_HIGH, _LOW = 89.0, -150.0
_LOG2E = 1.44269504088896341
# ln 2 as C1 + C2, C1 exact in few bits, so n·C1 is exact for every n reached.
_C1, _C2 = 0.693359375, -2.12194440e-4
_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
         1.6666665459e-1, 5.0000001201e-1)


def exp_f32(builder: ir.IRBuilder, x: ir.Value, floor: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """``e^x`` of the float32 ``x``; ``floor`` renders ``llvm.floor.f32``."""
    b = builder

    def c(v: float) -> ir.Constant:
        return ir.Constant(F32, v)

    clamped = b.select(b.fcmp_ordered(">", x, c(_HIGH)), c(_HIGH), x)
    clamped = b.select(b.fcmp_ordered("<", clamped, c(_LOW)), c(_LOW), clamped)
    n = floor(b.fadd(b.fmul(clamped, c(_LOG2E)), c(0.5)))
    r = b.fsub(b.fsub(clamped, b.fmul(n, c(_C1))), b.fmul(n, c(_C2)))
    y = c(_POLY[0])
    for coefficient in _POLY[1:]:
        y = b.fadd(b.fmul(y, r), c(coefficient))
    y = b.fadd(b.fadd(b.fmul(y, b.fmul(r, r)), r), c(1.0))
    # 2^n as two factors 2^(n/2) and 2^(n - n/2), each a normal float for n in
    # [-217, 129], so results between the smallest normal and denormal round gradually.
    whole = b.fptosi(n, I32)
    half = b.ashr(whole, ir.Constant(I32, 1))
    for part in (half, b.sub(whole, half)):
        bits = b.shl(b.add(part, ir.Constant(I32, 127)), ir.Constant(I32, 23))
        y = b.fmul(y, b.bitcast(bits, F32))
    return b.select(b.fcmp_unordered("uno", x, x), x, y)


#: tanh(x) rounds to +-1 in float32 past this, and erf(x) past 4.
_TANH_CLAMP, _ERF_CLAMP = 7.90531110763549805, 4.0
_TANH_P = (4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
           -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16)
_TANH_Q = (4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06)
_ERF_P = (-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
          -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10)
_ERF_Q = (-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
          -1.45660718464996e-05)


def tanh_f32(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``tanh(x)`` of the float32 ``x`` (NaN for NaN, +-1 for +-inf)."""
    return _odd_rational(builder, x, _TANH_CLAMP, _TANH_P, _TANH_Q)


def erf_f32(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """``erf(x)`` of the float32 ``x`` (NaN for NaN, +-1 for +-inf)."""
    return _odd_rational(builder, x, _ERF_CLAMP, _ERF_P, _ERF_Q)


def _odd_rational(b: ir.IRBuilder, x: ir.Value, clamp: float, p: tuple[float, ...],
                  q: tuple[float, ...]) -> ir.Value:
    """``x·(P(x²) / Q(x²))`` at ``x`` clamped to ``[-clamp, clamp]`` (a NaN passes through)."""
    def c(v: float) -> ir.Constant:
        return ir.Constant(F32, v)

    x = b.select(b.fcmp_ordered(">", x, c(clamp)), c(clamp), x)
    x = b.select(b.fcmp_ordered("<", x, c(-clamp)), c(-clamp), x)
    x2 = b.fmul(x, x)

    def horner(coefficients: tuple[float, ...]) -> ir.Value:
        acc = c(coefficients[-1])
        for k in reversed(coefficients[:-1]):
            acc = b.fadd(b.fmul(acc, x2), c(k))
        return acc

    # x times the ratio, not x·P over Q: a denormal x·P would lose its low bits.
    return b.fmul(x, b.fdiv(horner(p), horner(q)))
