"""Legalised tensor-IR expressions as LLVM IR (llvmlite): types, constants, loads,
arithmetic, compares, selects, casts; shared by every LLVM-based renderer (a CPU's,
an NVPTX one).

The emitter maps the primitive set of :mod:`hetero.core.ir.tir.legalize` one to one
and refuses anything else with a :class:`CodegenError` naming the operation, so the
IR's semantics (floored division, NaN rules, rounding) live in the legaliser, not here.
Representation: booleans are ``i1`` in registers and one byte in memory, as numpy
stores them; a storage type (bfloat16, the narrow types) is its bits in both (``i16``
or ``i8``). Float additions, subtractions and multiplications carry the ``contract``
flag, which lets LLVM fuse them into FMAs (one rounding instead of two).

What targets differ in are hooks: :meth:`ExprEmitter.math_call` renders an intrinsic
function (the CPU's vectorisable polynomials and libm, NVPTX's libdevice); its default
covers the functions LLVM has intrinsics for. :meth:`ExprEmitter.align` is the
alignment a load or store may promise (the element's size by default; NVPTX proves
more for the lanes of a vector loop, so LLVM can merge them into one vector access). A subclass may also declare more of
:class:`~hetero.core.ir.tir.legalize.Native` (this one maps ``ieee_minmax`` to
``llvm.minimum``/``llvm.maximum`` when told the target has them).

An expression object is emitted once per statement (memo by identity, cleared by
:meth:`ExprEmitter.forget` at each statement), since legalisation shares operands:
``floordiv(a, b)`` becomes a tree that names ``a`` and ``b`` several times.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir
import numpy as np

from hetero.core.ir.tir.buffer import Buffer, flat_index
from hetero.core.ir.tir.expr import Binary, Call, Expr, Var, cast
from hetero.core.ir.tir.functor import ExprFunctor
from hetero.core.ir.tir.legalize import Native, require_primitive
from hetero.core.ir.tir.legalize_casts import bits_dtype, is_storage
from hetero.errors import CodegenError

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I64 = ir.IntType(64)
_FLOATS = {2: ir.HalfType(), 4: ir.FloatType(), 8: ir.DoubleType()}
_SUFFIX = {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}
_CONTRACT = ("contract",)
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
#: Intrinsic functions with an LLVM intrinsic of one float operand.
LLVM_INTRINSICS = {"exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "abs": "llvm.fabs",
                   "floor": "llvm.floor", "ceil": "llvm.ceil", "round_even": "llvm.roundeven",
                   "sin": "llvm.sin", "cos": "llvm.cos"}


def llvm_type(dtype: np.dtype, where: str, in_memory: bool = False) -> ir.Type:
    """The LLVM type of ``dtype``: bool is ``i8`` ``in_memory`` and ``i1`` otherwise; a
    storage type is the integer of its bits."""
    dtype = np.dtype(dtype)
    if is_storage(dtype):
        return ir.IntType(8 * bits_dtype(dtype).itemsize)
    if dtype.kind == "f" and dtype.itemsize in _FLOATS:
        return _FLOATS[dtype.itemsize]
    if dtype.kind in "iu":
        return ir.IntType(8 * dtype.itemsize)
    if dtype.kind == "b":
        return I8 if in_memory else I1
    raise CodegenError(f"{where}: dtype {dtype} has no LLVM rendering; cast to float32 or an integer type")


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The function ``name`` of ``module``, declared (``nounwind``) on first use."""
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    fn.attributes.add("nounwind")
    return fn


class ExprEmitter(ExprFunctor[ir.Value]):
    """Renders legalised expressions at the builder's position.

    ``pointers`` maps each buffer in scope to its base pointer, ``env`` each bound loop
    variable to its ``i64`` value; the statement emitter keeps both up to date.
    ``native`` says what beyond the primitives the target maps (it must match what
    the function was legalised for).
    """

    def __init__(self, module: ir.Module, where: str, native: Native = Native()) -> None:
        self.module = module
        self.where = where
        self.native = native
        self.builder: ir.IRBuilder = ir.IRBuilder()
        self.pointers: dict[Buffer, ir.Value] = {}
        self.env: dict[Var, ir.Value] = {}
        self._emitted: dict[int, tuple[Expr, ir.Value]] = {}

    def type_of(self, dtype: np.dtype, in_memory: bool = False) -> ir.Type:
        return llvm_type(dtype, self.where, in_memory)

    def forget(self) -> None:
        """Drop the values emitted so far: the next statement may sit in another block."""
        self._emitted.clear()

    def emit(self, e: Expr) -> ir.Value:
        """The value of the primitive expression ``e``."""
        hit = self._emitted.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        require_primitive(e, self.native, self.where)
        value = self.visit_expr(e)
        self._emitted[id(e)] = (e, value)
        return value

    def address(self, buffer: Buffer, indices: tuple[Expr, ...]) -> ir.Value:
        """The address of ``buffer[indices]`` (row-major, constant strides)."""
        if buffer not in self.pointers:
            raise CodegenError(f"{self.where}: buffer {buffer.name} is not in scope; verify the function")
        offset = self.emit(flat_index(buffer, tuple(cast(i, "int64") for i in indices)))
        return self.builder.gep(self.pointers[buffer], [offset], inbounds=True,
                                source_etype=self.type_of(buffer.dtype, in_memory=True))

    def align(self, buffer: Buffer, indices: tuple[Expr, ...]) -> int:
        """The alignment in bytes of ``buffer[indices]`` that a load or store of it
        promises: the element's size, unless the target proves more."""
        return buffer.dtype.itemsize

    def to_memory(self, value: ir.Value, dtype: np.dtype) -> ir.Value:
        """``value`` as it is stored: booleans widen to a byte."""
        return self.builder.zext(value, I8) if np.dtype(dtype).kind == "b" else value

    def declare(self, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
        """The function ``name`` of this module, declared on first use."""
        return declare(self.module, name, ret, args)

    def intrinsic(self, base: str, args: list[ir.Value], fastmath: tuple[str, ...] = ()) -> ir.Value:
        """Call the float intrinsic ``base`` overloaded on its first argument's type."""
        ty = args[0].type
        name = f"{base}.{_SUFFIX[type(ty)]}"
        return self.builder.call(self.declare(name, ty, [a.type for a in args]), args, fastmath=fastmath)

    def math_call(self, func: str, args: list[ir.Value], dtype: np.dtype) -> ir.Value:
        """The intrinsic function ``func`` (or ``pow``) of float ``args`` of ``dtype``.

        The hook where targets differ: this default covers the LLVM intrinsics
        (:data:`LLVM_INTRINSICS`, ``pow``); a renderer overrides it for the rest
        (libm on a CPU, libdevice on NVPTX) and where it has a faster form."""
        if func == "pow":
            return self.intrinsic("llvm.pow", args)
        if func in LLVM_INTRINSICS:
            return self.intrinsic(LLVM_INTRINSICS[func], args)
        raise CodegenError(f"{self.where}: intrinsic {func} of {dtype} has no rendering on this target; "
                           "the renderer's math_call provides the functions LLVM has no intrinsic for")

    # -- the primitives ---------------------------------------------------------------

    def visit_Expr(self, e: Any) -> ir.Value:
        raise CodegenError(f"{self.where}: cannot render a {type(e).__name__} expression; "
                           "lower compute definitions with tir.lower and legalize before rendering")

    def visit_Var(self, e: Any) -> ir.Value:
        if e not in self.env:
            raise CodegenError(f"{self.where}: variable {e.name} is not bound by an enclosing loop")
        value = self.env[e]
        return value if e.dtype == np.int64 else self._convert(value, np.dtype("int64"), e.dtype)

    def visit_Const(self, e: Any) -> ir.Value:
        ty = self.type_of(e.dtype)
        if e.dtype.kind == "f":
            # Round through the dtype: LLVM rejects a half or float literal it cannot hold exactly.
            return ir.Constant(ty, float(e.dtype.type(e.value)))
        return ir.Constant(ty, int(e.value) & ((1 << ty.width) - 1))

    def visit_Load(self, e: Any) -> ir.Value:
        loaded = self.builder.load(self.address(e.buffer, e.indices), align=self.align(e.buffer, e.indices),
                                   typ=self.type_of(e.buffer.dtype, in_memory=True))
        if e.dtype.kind == "b":
            return self.builder.icmp_unsigned("!=", loaded, ir.Constant(I8, 0))
        return loaded

    def visit_Cast(self, e: Any) -> ir.Value:
        return self._convert(self.emit(e.a), e.a.dtype, e.dtype)

    def _convert(self, v: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
        """A primitive conversion between booleans, integers and float16/32/64."""
        b, to = self.builder, self.type_of(dst)
        if src == dst:
            return v
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

    def visit_Compare(self, e: Any) -> ir.Value:
        a, b = self.emit(e.a), self.emit(e.b)
        op = _CMP[e.op]
        if e.a.dtype.kind == "f":
            # NaN compares unequal to everything, as in numpy: ordered except for !=.
            return (self.builder.fcmp_unordered(op, a, b) if e.op == "ne"
                    else self.builder.fcmp_ordered(op, a, b))
        if e.a.dtype.kind == "i":
            return self.builder.icmp_signed(op, a, b)
        return self.builder.icmp_unsigned(op, a, b)

    def visit_Logical(self, e: Any) -> ir.Value:
        a, b = self.emit(e.a), self.emit(e.b)
        return self.builder.and_(a, b) if e.op == "and" else self.builder.or_(a, b)

    def visit_Not(self, e: Any) -> ir.Value:
        return self.builder.xor(self.emit(e.a), ir.Constant(I1, 1))

    def visit_Select(self, e: Any) -> ir.Value:
        return self.builder.select(self.emit(e.cond), self.emit(e.a), self.emit(e.b))

    def visit_Binary(self, e: Binary) -> ir.Value:
        a, b = self.emit(e.a), self.emit(e.b)
        bld = self.builder
        if e.dtype.kind == "f":
            if e.op == "pow":
                return self.math_call("pow", [a, b], e.dtype)
            if e.op in ("min", "max"):
                # nsz: the IR leaves open which zero a tie of -0 and +0 gives, which spares
                # LLVM the sign fix-up and keeps min/max reductions vectorisable.
                return self.intrinsic("llvm.minimum" if e.op == "min" else "llvm.maximum", [a, b],
                                      fastmath=("nsz",))
            return _FLOAT_OPS[e.op](bld, a, b)
        signed = e.dtype.kind == "i"
        if e.op == "pow":
            return bld.call(_ipow_helper(self.module, a.type, signed), [a, b])
        if e.op in ("min", "max"):
            cmp = bld.icmp_signed if signed else bld.icmp_unsigned
            return bld.select(cmp("<" if e.op == "min" else ">", b, a), b, a)
        return _INT_OPS[e.op](bld, a, b, signed)

    def visit_Call(self, e: Call) -> ir.Value:
        args = [self.emit(a) for a in e.args]
        if e.func == "bitcast":
            return self._bitcast(args[0], e.args[0].dtype, e.dtype)
        if e.func == "fence":  # LLVM may not contract a multiply and an add across it
            return self.intrinsic("llvm.arithmetic.fence", args)
        return self.math_call(e.func, args, e.args[0].dtype)

    def _bitcast(self, x: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
        """``x``'s bits as ``dst`` (a bool is its byte, 0 or 1)."""
        b = self.builder
        if src.kind == "b":
            x = b.zext(x, I8)
        if dst.kind == "b":
            return b.icmp_unsigned("!=", x if x.type == I8 else b.bitcast(x, I8), ir.Constant(I8, 0))
        to = self.type_of(dst)
        return x if x.type == to else b.bitcast(x, to)


_FLOAT_OPS = {
    "add": lambda b, x, y: b.fadd(x, y, flags=_CONTRACT),
    "sub": lambda b, x, y: b.fsub(x, y, flags=_CONTRACT),
    "mul": lambda b, x, y: b.fmul(x, y, flags=_CONTRACT),
    "div": lambda b, x, y: b.fdiv(x, y),
    "trem": lambda b, x, y: b.frem(x, y),
}

_INT_OPS = {
    "add": lambda b, x, y, s: b.add(x, y),
    "sub": lambda b, x, y, s: b.sub(x, y),
    "mul": lambda b, x, y, s: b.mul(x, y),
    "tdiv": lambda b, x, y, s: b.sdiv(x, y) if s else b.udiv(x, y),
    "trem": lambda b, x, y, s: b.srem(x, y) if s else b.urem(x, y),
    "shr": lambda b, x, y, s: b.ashr(x, y) if s else b.lshr(x, y),
    "shl": lambda b, x, y, s: b.shl(x, y),
    "bit_and": lambda b, x, y, s: b.and_(x, y),
    "bit_or": lambda b, x, y, s: b.or_(x, y),
    "bit_xor": lambda b, x, y, s: b.xor(x, y),
}


def _ipow_helper(module: ir.Module, ty: ir.IntType, signed: bool) -> ir.Function:
    """``base ** exp`` by squaring, wrapped; a negative exponent gives ``trunc(1 / base**-exp)``."""
    name = f"hetero.ipow.{'i' if signed else 'u'}{ty.width}"
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    fn = ir.Function(module, ir.FunctionType(ty, [ty, ty]), name=name)
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
