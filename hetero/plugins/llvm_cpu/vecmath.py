"""Float32 functions written as plain arithmetic, so LLVM's loop vectorizer widens them.

LLVM has no vector code for ``llvm.exp``: on x86 a vectorised loop calls ``expf`` once
per lane, which made ``exp`` most of Softmax's time. :func:`exp_f32` is Cephes'
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
