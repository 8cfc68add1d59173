"""llvm_cpu's expression emitter: the shared LLVM emission with the CPU's math library.

Everything but the intrinsic functions comes from :class:`hetero.core.codegen.ExprEmitter`,
which maps legalised primitives only. The CPU's part: ``exp``, ``tanh`` and ``erf`` of
float32 and float16 as plain arithmetic (:mod:`.vecmath`), which LLVM's loop vectorizer
widens; the functions LLVM has no intrinsic for from the C library (glibc: below 2 ulp
in float); the rest as LLVM intrinsics; ``dot4_u8s8`` as a function the loop
vectorizer widens into ``vpdpbusd`` (:mod:`.dot4`). Float ``min``/``max`` are ``llvm.minimum``/
``llvm.maximum`` (:data:`CPU_NATIVE`), which x86 and AArch64 lower to a few vector
instructions.
"""

from __future__ import annotations

from llvmlite import ir
import numpy as np

from hetero.plugin.codegen import ExprEmitter
from hetero.plugin.tir import Call, Native
from hetero.plugins.llvm_cpu import vecmath
from hetero.plugins.llvm_cpu.dot4 import dot4_function

#: What the CPU maps beyond the primitives: IEEE 754-2019 minimum/maximum, and the
#: 4-way byte dot product (:mod:`.dot4`).
CPU_NATIVE = Native(ieee_minmax=True, dot4_u8s8=True)
# No LLVM intrinsic exists for these: call the C library.
_LIBM = {"tanh": ("tanhf", "tanh"), "erf": ("erff", "erf"), "expm1": ("expm1f", "expm1"),
         "log1p": ("log1pf", "log1p"), "tan": ("tanf", "tan"), "asin": ("asinf", "asin"),
         "acos": ("acosf", "acos"), "atan": ("atanf", "atan"), "sinh": ("sinhf", "sinh"),
         "cosh": ("coshf", "cosh"), "asinh": ("asinhf", "asinh"), "acosh": ("acoshf", "acosh"),
         "atanh": ("atanhf", "atanh")}
#: Of those, the ones rendered as plain arithmetic in float32 and float16 (vecmath).
_VECTOR_MATH = frozenset({"tanh", "erf"})


def is_scalar_call(e: Call) -> bool:
    """Whether ``e`` renders as a call LLVM's loop vectorizer cannot widen (a C library
    function, an arithmetic fence)."""
    dtype = e.args[0].dtype if e.args else e.dtype
    if e.func == "fence":  # llvm.arithmetic.fence: LLVM's loop vectorizer does not widen it
        return True
    if e.func not in _LIBM:
        return False
    return not (e.func in _VECTOR_MATH and dtype.kind == "f" and dtype.itemsize in (2, 4))


class CpuExprEmitter(ExprEmitter):
    """The shared emitter with the CPU's intrinsic functions."""

    def __init__(self, module: ir.Module, where: str, vnni: bool = False) -> None:
        super().__init__(module, where, CPU_NATIVE)
        self.vnni = vnni  # dot4_u8s8 may be vpdpbusd (the module runs on an AVX-512 VNNI host)

    def visit_Call(self, e: Call) -> ir.Value:
        if e.func == "dot4_u8s8":
            fn = dot4_function(self.module, self.vnni)
            return self.builder.call(fn, [self.emit(a) for a in e.args])
        return super().visit_Call(e)

    def math_call(self, func: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value:
        x, bld, f32 = args[0], self.builder, ir.FloatType()
        half = dtype.itemsize == 2
        if func == "exp" and dtype.itemsize in (2, 4):
            # llvm.exp would be one expf call per lane (see vecmath); float16 via float32.
            wide = bld.fpext(x, f32) if half else x
            out = vecmath.exp_f32(bld, wide, lambda v: self.intrinsic("llvm.floor", [v]))
            return bld.fptrunc(out, x.type) if half else out
        if func in _VECTOR_MATH and dtype.itemsize in (2, 4):
            wide = bld.fpext(x, f32) if half else x
            out = (vecmath.tanh_f32 if func == "tanh" else vecmath.erf_f32)(bld, wide)
            return bld.fptrunc(out, x.type) if half else out
        if func in _LIBM:
            single, double = _LIBM[func]
            if dtype.itemsize == 8:
                return bld.call(self.declare(double, x.type, [x.type]), [x])
            wide = bld.fpext(x, f32) if half else x
            out = bld.call(self.declare(single, f32, [f32]), [wide])
            return bld.fptrunc(out, x.type) if half else out
        return super().math_call(func, args, dtype)
