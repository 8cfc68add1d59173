"""Tensor-IR expressions as LLVM IR: types, arithmetic with numpy's meaning, intrinsics.

Every expression is rendered with the meaning :func:`hetero.core.ir.tir.run_func` gives
it, so a compiled kernel and the interpreter agree: integer ``div`` truncates,
``floordiv``/``mod`` floor (Python's rule, for integers and floats alike), integer
division by zero gives 0, ``shr`` is ``floor(a / 2**b)`` for any amount ``b >= 0`` and
``shl`` 0 for an amount of the bit width or more,
float ``min``/``max`` propagate NaN, the IR's NaN rule (``llvm.minimum``/``llvm.maximum``;
``minnum``/``maxnum`` would drop NaN). Booleans are ``i1`` in registers and one byte in
memory, as numpy stores them. Float additions and multiplications carry the
``contract`` flag, which lets LLVM fuse them into FMAs: one rounding instead of two,
so results may differ from the interpreter's by an ulp per fused pair.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
import numpy as np

from hetero.core.ir.tir import Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var, cast
from hetero.core.ir.tir.buffer import Buffer, flat_index
from hetero.errors import CodegenError
from hetero.plugins.llvm_cpu import narrow, vecmath

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I64 = ir.IntType(64)
_FLOATS = {2: ir.HalfType(), 4: ir.FloatType(), 8: ir.DoubleType()}
_CONTRACT = ("contract",)
# LLVM intrinsics that take and return one float; abs/floor/ceil/round_even of an
# integer is the integer itself (abs aside), handled before these are reached.
_FLOAT_INTRINSICS = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "abs": "llvm.fabs",
                     "floor": "llvm.floor", "ceil": "llvm.ceil", "round_even": "llvm.roundeven",
                     "sin": "llvm.sin", "cos": "llvm.cos"}
# No LLVM intrinsic exists for these: call the C library (glibc: below 2 ulp in float).
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
_ICMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def llvm_type(dtype: np.dtype, where: str, in_memory: bool = False) -> ir.Type:
    """The LLVM type of ``dtype`` (bool is ``i8`` ``in_memory``, ``i1`` otherwise)."""
    dtype = np.dtype(dtype)
    special = narrow.register_type(dtype, in_memory)
    if special is not None:
        return special
    if dtype.kind == "f" and dtype.itemsize in _FLOATS:
        return _FLOATS[dtype.itemsize]
    if dtype.kind in "iu":
        return ir.IntType(8 * dtype.itemsize)
    if dtype.kind == "b":
        return I8 if in_memory else I1
    raise CodegenError(f"{where}: dtype {dtype} has no LLVM rendering; cast to float32 or an integer type")


class ExprEmitter:
    """Renders expressions at the builder's position.

    ``pointers`` maps each buffer in scope to its base pointer, ``env`` each bound loop
    variable to its ``i64`` value; the statement renderer keeps both up to date.
    """

    def __init__(self, module: ir.Module, where: str) -> None:
        self.module = module
        self.where = where
        self.builder: ir.IRBuilder = ir.IRBuilder()
        self.pointers: dict[Buffer, ir.Value] = {}
        self.env: dict[Var, ir.Value] = {}

    def type_of(self, dtype: np.dtype, in_memory: bool = False) -> ir.Type:
        return llvm_type(dtype, self.where, in_memory)

    def emit(self, e: Expr) -> ir.Value:
        """The value of ``e``."""
        method = getattr(self, f"_emit_{type(e).__name__.lower()}", None)
        if method is None:
            raise CodegenError(f"{self.where}: cannot render a {type(e).__name__} expression; "
                               "lower compute definitions with tir.lower before rendering")
        return method(e)

    def address(self, buffer: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        """The address of ``buffer[indices]`` (row-major, constant strides)."""
        if buffer not in self.pointers:
            raise CodegenError(f"{self.where}: buffer {buffer.name} is not in scope; verify the function")
        offset = self.emit(flat_index(buffer, tuple(cast(i, "int64") for i in indices)))
        return self.builder.gep(self.pointers[buffer], [offset], inbounds=True,
                                source_etype=self.type_of(buffer.dtype, in_memory=True))

    def to_memory(self, value: ir.Value, dtype: np.dtype) -> ir.Value:
        """``value`` as it is stored: booleans widen to a byte."""
        if narrow.register_type(np.dtype(dtype), True) is not None:
            return narrow.before_store(self, value, np.dtype(dtype))
        return self.builder.zext(value, I8) if np.dtype(dtype).kind == "b" else value

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """The function ``name`` of this module, declared on first use."""
        existing = self.module.globals.get(name)
        if isinstance(existing, ir.Function):
            return existing
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name=name)
        fn.attributes.add("nounwind")
        return fn

    def _emit_var(self, e: Var) -> ir.Value:
        if e not in self.env:
            raise CodegenError(f"{self.where}: variable {e.name} is not bound by an enclosing loop")
        value = self.env[e]
        return value if e.dtype == np.int64 else self._convert(value, np.dtype("int64"), e.dtype)

    def _emit_const(self, e: Const) -> ir.Value:
        ty = self.type_of(e.dtype)
        if narrow.register_type(e.dtype, False) is not None:
            return narrow.const(e.dtype, e.value)
        if e.dtype.kind == "f":
            # Round through the dtype: LLVM rejects a half or float literal it cannot hold exactly.
            return ir.Constant(ty, float(e.dtype.type(e.value)))
        return ir.Constant(ty, int(e.value) & ((1 << ty.width) - 1))

    def _emit_load(self, e: Load) -> ir.Value:
        loaded = self.builder.load(self.address(e.buffer, e.indices), align=e.buffer.dtype.itemsize,
                                   typ=self.type_of(e.buffer.dtype, in_memory=True))
        if e.dtype.kind == "b":
            return self.builder.icmp_unsigned("!=", loaded, ir.Constant(I8, 0))
        if narrow.register_type(e.dtype, True) is not None:
            return narrow.after_load(self, loaded, e.dtype)
        return loaded

    def _emit_cast(self, e: Cast) -> ir.Value:
        return self._convert(self.emit(e.a), e.a.dtype, e.dtype)

    def _convert(self, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
        if src == dst:
            return v
        if narrow.register_type(src, False) is not None or narrow.register_type(dst, False) is not None:
            return self._convert_narrow(v, src, dst)
        b, to = self.builder, self.type_of(dst)
        if dst.itemsize == 2 and dst.kind == "f" and src.kind != "b" and (src.kind != "f" or src.itemsize == 8):
            # LLVM turns these into compiler-rt calls (__truncdfhf2, __floatdihf) that a JIT
            # process lacks; go through float64, then float32 rounded to odd, which makes
            # the final rounding to half exactly the direct one.
            wide = v if src.kind == "f" else self._convert(v, src, np.dtype("float64"))
            return b.fptrunc(self._to_f32_round_to_odd(wide), to)
        if dst.kind == "b":
            if src.kind == "f":
                return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if src.kind == "f":
            if dst.kind == "f":
                return b.fpext(v, to) if dst.itemsize > src.itemsize else b.fptrunc(v, to)
            return b.fptosi(v, to) if dst.kind == "i" else b.fptoui(v, to)
        signed = src.kind == "i"
        if dst.kind == "f":
            return b.sitofp(v, to) if signed else b.uitofp(v, to)
        if to.width == v.type.width:
            return v
        if to.width < v.type.width:
            return b.trunc(v, to)
        return b.sext(v, to) if signed else b.zext(v, to)

    def _convert_narrow(self, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
        """Conversions from and to bfloat16 and the narrow types (see :mod:`.narrow`)."""
        f32 = np.dtype(np.float32)
        if narrow.is_bf16(src):
            return self._convert(v, f32, dst)
        if narrow.is_narrow_float(src):
            return self._convert(narrow.decode(self, v, src), f32, dst)
        if narrow.is_narrow_int(src):
            return self._convert(v, narrow.signed_int(src), dst)
        if narrow.is_narrow_int(dst):
            if src.kind == "f":
                return narrow.float_to_narrow_int(self, v, dst)
            return narrow.wrap_int(self, self._convert(v, src, narrow.signed_int(dst)), dst)
        # To bfloat16 or a narrow float, from float32 exactly or rounded to odd (float64
        # and integers), so that the one rounding to the narrow type is the direct one.
        if src == f32:
            wide = v
        elif src.kind == "f" and src.itemsize == 2:
            wide = self.builder.fpext(v, ir.FloatType())
        else:
            wide = self._to_f32_round_to_odd(v if src.kind == "f" else
                                             self._convert(v, src, np.dtype(np.float64)))
        if narrow.is_bf16(dst):
            return narrow.round_bf16(self, wide)
        return narrow.encode(self, wide, dst, self.where)

    def _to_f32_round_to_odd(self, x: ir.Value) -> ir.Value:
        b = self.builder
        f32, i32 = ir.FloatType(), ir.IntType(32)
        t = b.fptrunc(x, f32)
        inexact = b.fcmp_ordered("!=", b.fpext(t, x.type), x)
        finite = b.fcmp_ordered("<", self.intrinsic("llvm.fabs", [t]), ir.Constant(f32, float("inf")))
        odd = b.bitcast(b.or_(b.bitcast(t, i32), ir.Constant(i32, 1)), f32)
        return b.select(b.and_(inexact, finite), odd, t)

    def _emit_compare(self, e: Compare) -> ir.Value:
        a, b = self.emit(e.a), self.emit(e.b)
        op = _ICMP[e.op]
        if e.a.dtype.kind == "f":
            # NaN compares unequal to everything, as in numpy: ordered except for !=.
            return (self.builder.fcmp_unordered(op, a, b) if e.op == "ne"
                    else self.builder.fcmp_ordered(op, a, b))
        if e.a.dtype.kind == "i":
            return self.builder.icmp_signed(op, a, b)
        return self.builder.icmp_unsigned(op, a, b)

    def _emit_logical(self, e: Logical) -> ir.Value:
        a, b = self.emit(e.a), self.emit(e.b)
        return self.builder.and_(a, b) if e.op == "and" else self.builder.or_(a, b)

    def _emit_not(self, e: Not) -> ir.Value:
        return self.builder.xor(self.emit(e.a), ir.Constant(I1, 1))

    def _emit_select(self, e: Select) -> ir.Value:
        return self.builder.select(self.emit(e.cond), self.emit(e.a), self.emit(e.b))

    def _emit_binary(self, e: Binary) -> ir.Value:
        a, b = self.emit(e.a), self.emit(e.b)
        kind = e.dtype.kind
        if narrow.register_type(e.dtype, False) is not None:
            raise CodegenError(f"{self.where}: arithmetic '{e.op}' on {e.dtype.name}; "
                               "lower it through float32 (hetero.core.lower.narrow)")
        if kind == "b":
            raise CodegenError(f"{self.where}: arithmetic '{e.op}' on booleans; "
                               "cast to an integer type first")
        table = _FLOAT_OPS if kind == "f" else _INT_OPS
        return table[e.op](self, a, b, kind == "i")

    def _emit_call(self, e: Call) -> ir.Value:
        args = [self.emit(a) for a in e.args]
        x, dtype = args[0], e.args[0].dtype
        if e.func == "bitcast":
            return self._bitcast(x, dtype, e.dtype)
        if dtype.kind in "iub":
            if e.func in ("floor", "ceil", "round_even") or (e.func == "abs" and dtype.kind != "i"):
                return x
            if e.func == "abs":
                neg = self.builder.icmp_signed("<", x, ir.Constant(x.type, 0))
                return self.builder.select(neg, self.builder.neg(x), x)
            # numpy computes exp/log/... of an integer in float64, then the IR casts back.
            f64 = np.dtype("float64")
            return self._convert(self._float_call(e.func, self._convert(x, dtype, f64), f64), f64, e.dtype)
        return self._float_call(e.func, x, dtype)

    def _bitcast(self, x: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
        """``x``'s bits as ``dst``: through the bits as they are stored, since a bool (i1)
        is its byte and a bfloat16 register holds a float whose upper half it is."""
        b = self.builder
        if src.kind == "b":
            x = b.zext(x, I8)
        elif narrow.is_bf16(src):
            x = b.trunc(b.lshr(b.bitcast(x, ir.IntType(32)), ir.Constant(ir.IntType(32), 16)),
                        ir.IntType(16))
        if narrow.is_bf16(dst):
            x = x if x.type == ir.IntType(16) else b.bitcast(x, ir.IntType(16))
            wide = b.shl(b.zext(x, ir.IntType(32)), ir.Constant(ir.IntType(32), 16))
            return b.bitcast(wide, ir.FloatType())
        to = self.type_of(dst)
        return x if x.type == to else b.bitcast(x, to)

    def _float_call(self, func: str, x: ir.Value, dtype: np.dtype) -> ir.Value:
        if func == "fence":  # LLVM may not contract a multiply and an add across it
            return self.intrinsic("llvm.arithmetic.fence", [x])
        if func == "exp" and dtype.itemsize in (2, 4):
            # llvm.exp would be one expf call per lane (see vecmath); float16 via float32.
            f32 = ir.FloatType()
            wide = x if dtype.itemsize == 4 else self.builder.fpext(x, f32)
            out = vecmath.exp_f32(self.builder, wide, lambda v: self.intrinsic("llvm.floor", [v]))
            return out if dtype.itemsize == 4 else self.builder.fptrunc(out, x.type)
        if func in _VECTOR_MATH and dtype.itemsize in (2, 4):
            f32 = ir.FloatType()
            wide = x if dtype.itemsize == 4 else self.builder.fpext(x, f32)
            out = (vecmath.tanh_f32 if func == "tanh" else vecmath.erf_f32)(self.builder, wide)
            return out if dtype.itemsize == 4 else self.builder.fptrunc(out, x.type)
        if func in _LIBM:
            single, double = _LIBM[func]
            if dtype.itemsize == 8:
                return self.builder.call(self.declare(double, x.type, [x.type]), [x])
            f32 = ir.FloatType()
            wide = x if dtype.itemsize == 4 else self.builder.fpext(x, f32)
            out = self.builder.call(self.declare(single, f32, [f32]), [wide])
            return out if dtype.itemsize == 4 else self.builder.fptrunc(out, x.type)
        return self.intrinsic(_FLOAT_INTRINSICS[func], [x])

    def intrinsic(self, base: str, args: list[ir.Value], fastmath: tuple[str, ...] = ()) -> ir.Value:
        """Call the float intrinsic ``base`` overloaded on its first argument's type."""
        ty = args[0].type
        suffix = {2: "f16", 4: "f32", 8: "f64"}[{ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}[type(ty)]]
        return self.builder.call(self.declare(f"{base}.{suffix}", ty, [a.type for a in args]), args,
                                 fastmath=fastmath)


BinaryFn = Callable[[ExprEmitter, ir.Value, ir.Value, bool], ir.Value]


def _int_div(em: ExprEmitter, a: ir.Value, b: ir.Value, signed: bool, want: str) -> ir.Value:
    """Truncating quotient or remainder with zero divisors giving 0 and, for signed
    types, ``MIN / -1`` wrapping instead of trapping (x86 raises SIGFPE on both)."""
    bld, zero, one = em.builder, ir.Constant(a.type, 0), ir.Constant(a.type, 1)
    known_safe = isinstance(b, ir.Constant) and b.constant not in (0, (1 << b.type.width) - 1)
    if known_safe:
        safe = b
    else:
        bad = bld.icmp_unsigned("==", b, zero)
        if signed:
            bad = bld.or_(bad, bld.icmp_signed("==", b, ir.Constant(a.type, -1)))
        safe = bld.select(bad, one, b)
    if want == "quot":
        out = bld.sdiv(a, safe) if signed else bld.udiv(a, safe)
        minus = bld.neg(a)
    else:
        out = bld.srem(a, safe) if signed else bld.urem(a, safe)
        minus = zero
    if known_safe:
        return out
    if signed:
        out = bld.select(bld.icmp_signed("==", b, ir.Constant(a.type, -1)), minus, out)
    return bld.select(bld.icmp_unsigned("==", b, zero), zero, out)


def _int_floor(em: ExprEmitter, a: ir.Value, b: ir.Value, signed: bool, want: str) -> ir.Value:
    quot, rem = _int_div(em, a, b, signed, "quot"), _int_div(em, a, b, signed, "rem")
    if not signed:
        return quot if want == "quot" else rem
    bld, zero = em.builder, ir.Constant(a.type, 0)
    # Round toward minus infinity: step down when the remainder's sign differs from b's.
    fix = bld.and_(bld.icmp_signed("!=", rem, zero),
                   bld.icmp_signed("!=", bld.icmp_signed("<", rem, zero), bld.icmp_signed("<", b, zero)))
    if want == "quot":
        return bld.sub(quot, bld.zext(fix, a.type))
    return bld.select(fix, bld.add(rem, b), rem)


def _int_shr(em: ExprEmitter, a: ir.Value, b: ir.Value, signed: bool) -> ir.Value:
    """``floor(a / 2**b)``: LLVM's shift is poison for ``b`` of the bit width or more, so
    the amount is clamped (read as unsigned): to ``width - 1`` for signed types, whose
    arithmetic shift then fills with the sign, and to a zero result for unsigned ones."""
    bld, width = em.builder, a.type.width
    top = ir.Constant(a.type, width - 1)
    if isinstance(b, ir.Constant) and 0 <= b.constant < width:
        return bld.ashr(a, b) if signed else bld.lshr(a, b)
    wide = bld.icmp_unsigned(">", b, top)
    if signed:
        return bld.ashr(a, bld.select(wide, top, b))
    return bld.select(wide, ir.Constant(a.type, 0), bld.lshr(a, bld.select(wide, top, b)))


def _int_shl(em: ExprEmitter, a: ir.Value, b: ir.Value, signed: bool) -> ir.Value:
    """``a * 2**b`` wrapped: 0 for ``b`` of the bit width or more (read as unsigned),
    where LLVM's ``shl`` would be poison."""
    bld, width = em.builder, a.type.width
    if isinstance(b, ir.Constant) and 0 <= b.constant < width:
        return bld.shl(a, b)
    top = ir.Constant(a.type, width - 1)
    wide = bld.icmp_unsigned(">", b, top)
    return bld.select(wide, ir.Constant(a.type, 0), bld.shl(a, bld.select(wide, top, b)))


def _int_pow(em: ExprEmitter, a: ir.Value, b: ir.Value, signed: bool) -> ir.Value:
    return em.builder.call(_ipow_helper(em, a.type, signed), [a, b])


def _ipow_helper(em: ExprEmitter, ty: ir.IntType, signed: bool) -> ir.Function:
    """``base ** exp`` by squaring; a negative exponent gives ``trunc(1 / base**-exp)``."""
    name = f"hetero.ipow.{'i' if signed else 'u'}{ty.width}"
    existing = em.module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    fn = ir.Function(em.module, ir.FunctionType(ty, [ty, ty]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    base, exp = fn.args
    entry, loop, done = (fn.append_basic_block(n) for n in ("entry", "loop", "done"))
    bld = ir.IRBuilder(entry)
    zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
    negative = bld.icmp_signed("<", exp, zero) if signed else ir.Constant(I1, 0)
    bld.cbranch(bld.icmp_signed(">", exp, zero) if signed else bld.icmp_unsigned(">", exp, zero), loop, done)
    bld.position_at_end(loop)
    acc, sq, e = bld.phi(ty), bld.phi(ty), bld.phi(ty)
    odd = bld.trunc(e, I1)
    acc2 = bld.select(odd, bld.mul(acc, sq), acc)
    sq2, e2 = bld.mul(sq, sq), bld.lshr(e, one)
    for phi, start, step in ((acc, one, acc2), (sq, base, sq2), (e, exp, e2)):
        phi.add_incoming(start, entry)
        phi.add_incoming(step, loop)
    bld.cbranch(bld.icmp_unsigned("!=", e2, zero), loop, done)
    bld.position_at_end(done)
    result = bld.phi(ty)
    result.add_incoming(one, entry)
    result.add_incoming(acc2, loop)
    # 1 / base**n truncates to 0 unless base is 1 or -1 (then the sign follows n's parity).
    recip = bld.select(bld.icmp_signed("==", base, one), one,
                       bld.select(bld.icmp_signed("==", base, ir.Constant(ty, -1)),
                                  bld.select(bld.trunc(exp, I1), ir.Constant(ty, -1), one), zero))
    bld.ret(bld.select(negative, recip, result))
    return fn


def _float_mod(em: ExprEmitter, a: ir.Value, b: ir.Value) -> tuple[ir.Value, ir.Value]:
    """numpy's divmod for floats: the remainder takes the divisor's sign."""
    bld, zero = em.builder, ir.Constant(a.type, 0.0)
    raw = bld.frem(a, b)
    fix = bld.and_(bld.fcmp_ordered("!=", raw, zero),
                   bld.icmp_unsigned("!=", bld.fcmp_ordered("<", b, zero), bld.fcmp_ordered("<", raw, zero)))
    return raw, fix


def _float_floordiv(em: ExprEmitter, a: ir.Value, b: ir.Value, _: bool) -> ir.Value:
    bld = em.builder
    raw, fix = _float_mod(em, a, b)
    div = bld.fdiv(bld.fsub(a, raw), b)
    div = bld.select(fix, bld.fsub(div, ir.Constant(a.type, 1.0)), div)
    floor = em.intrinsic("llvm.floor", [div])
    floor = bld.select(bld.fcmp_ordered(">", bld.fsub(div, floor), ir.Constant(a.type, 0.5)),
                       bld.fadd(floor, ir.Constant(a.type, 1.0)), floor)
    quotient = bld.fdiv(a, b)
    signed_zero = em.intrinsic("llvm.copysign", [ir.Constant(a.type, 0.0), quotient])
    floor = bld.select(bld.fcmp_ordered("==", div, ir.Constant(a.type, 0.0)), signed_zero, floor)
    # A zero divisor gives a / b (an infinity or NaN), as numpy's divmod does.
    return bld.select(bld.fcmp_ordered("==", b, ir.Constant(a.type, 0.0)), quotient, floor)


def _float_modulo(em: ExprEmitter, a: ir.Value, b: ir.Value, _: bool) -> ir.Value:
    bld = em.builder
    raw, fix = _float_mod(em, a, b)
    mod = bld.select(fix, bld.fadd(raw, b), raw)
    signed_zero = em.intrinsic("llvm.copysign", [ir.Constant(a.type, 0.0), b])
    return bld.select(bld.fcmp_ordered("==", mod, ir.Constant(a.type, 0.0)), signed_zero, mod)


def _pick(em: ExprEmitter, a: ir.Value, b: ir.Value, take_b: ir.Value) -> ir.Value:
    return em.builder.select(take_b, b, a)


def _float_extreme(em: ExprEmitter, a: ir.Value, b: ir.Value, base: str) -> ir.Value:
    """The IR's float ``min``/``max``: NaN if either operand is NaN. ``nsz``, since the IR
    leaves open the sign of a zero that ties with the other zero: that spares LLVM the
    sign fix-up, and the operation stays associative, so max/min reductions vectorise."""
    return em.intrinsic(base, [a, b], fastmath=("nsz",))


_FLOAT_OPS: dict[str, BinaryFn] = {
    "add": lambda em, a, b, _: em.builder.fadd(a, b, flags=_CONTRACT),
    "sub": lambda em, a, b, _: em.builder.fsub(a, b, flags=_CONTRACT),
    "mul": lambda em, a, b, _: em.builder.fmul(a, b, flags=_CONTRACT),
    "div": lambda em, a, b, _: em.builder.fdiv(a, b),
    "floordiv": _float_floordiv,
    "mod": _float_modulo,
    "min": lambda em, a, b, _: _float_extreme(em, a, b, "llvm.minimum"),
    "max": lambda em, a, b, _: _float_extreme(em, a, b, "llvm.maximum"),
    "pow": lambda em, a, b, _: em.intrinsic("llvm.pow", [a, b]),
}

_INT_OPS: dict[str, BinaryFn] = {
    "add": lambda em, a, b, _: em.builder.add(a, b),
    "sub": lambda em, a, b, _: em.builder.sub(a, b),
    "mul": lambda em, a, b, _: em.builder.mul(a, b),
    "div": lambda em, a, b, signed: _int_div(em, a, b, signed, "quot"),
    "floordiv": lambda em, a, b, signed: _int_floor(em, a, b, signed, "quot"),
    "mod": lambda em, a, b, signed: _int_floor(em, a, b, signed, "rem"),
    "min": lambda em, a, b, signed: _pick(em, a, b, (em.builder.icmp_signed if signed
                                                     else em.builder.icmp_unsigned)("<", b, a)),
    "max": lambda em, a, b, signed: _pick(em, a, b, (em.builder.icmp_signed if signed
                                                     else em.builder.icmp_unsigned)(">", b, a)),
    "pow": _int_pow,
    "shr": _int_shr,
    "shl": _int_shl,
    "bit_and": lambda em, a, b, _: em.builder.and_(a, b),
    "bit_or": lambda em, a, b, _: em.builder.or_(a, b),
    "bit_xor": lambda em, a, b, _: em.builder.xor(a, b),
}
