"""Legalised tensor-IR expressions as C++14 text, for every C-family renderer (HLS C++,
a future OpenCL C).

The printer maps the primitive set of :mod:`hetero.core.ir.tir.legalize` and refuses
anything else with a :class:`CodegenError` naming the operation, as the LLVM emitter
does (:mod:`hetero.core.codegen.llvm_expr`), so the IR's semantics (floored division,
NaN rules, storage types) stay in the legaliser. What C itself leaves undefined the
printer writes so that it means what the interpreter computes:

- Integer ``add``, ``sub``, ``mul`` and ``shl`` are computed in the unsigned type of
  at least 32 bits and converted back: they wrap, with no signed overflow (undefined
  in C) and no promotion of ``uint16`` to a signed ``int`` that could overflow. Index
  arithmetic (int64 reading no memory: loop variables and literals under static
  bounds, which cannot overflow) is written plainly, ``i0 * 5 + i1``.
  Every integer result is converted back to its dtype, since C promotes narrow types
  (GCC, Clang and Vitis HLS convert out-of-range integers modulo 2**n).
- ``tdiv``/``trem`` are C's ``/`` and ``%`` (legalisation rules out a zero divisor and
  ``MIN / -1``); ``shr`` is ``>>``, arithmetic for signed types as GCC defines it.
- A float to integer conversion out of range or of NaN, which the IR leaves open and C
  leaves undefined, is a defined helper giving what numpy gives on x86-64 (so the
  interpreter on this machine): through ``int32`` for types up to 16 bits and ``int32``
  itself, through ``int64`` for ``uint32`` and ``int64``, the minimum of that type when
  out of range, then wrapped; ``uint64`` in its range exactly, else through ``int64``.
- Float arithmetic is the operator itself: with an ISO mode (``-std=c++14``, not
  ``gnu++14``) GCC contracts nothing and x86-64 evaluates in the type (SSE), so each
  operation rounds as numpy's does; the math intrinsics are ``<cmath>``'s C names
  (``expf``, ``tanhf``, ``erff``: what Vitis's ``hls_math`` provides too), within a
  few ulps of numpy's. float16 is ``_Float16`` in memory and computed in float, each
  operation rounded back (numpy's float16 loops do the same; float's 24 bits make the
  double rounding exact for ``+ - * /``).
- Comparisons are C's: ordered, ``!=`` true with a NaN, as the IR says.

Shared subexpressions: legalisation shares operands (``floordiv(a, b)`` names ``a`` and
``b`` several times), so text printed naively grows with every nesting. The printer
counts references by object within a statement and gives each compound expression used
more than once a ``const`` temporary (:meth:`CExprPrinter.print_exprs` returns their
declarations), which is safe because expressions have no effects and loads are in
bounds (lowerings clamp indices under a ``select``).

Subclass hooks: :meth:`CExprPrinter.type_name` (an HLS printer names ``ap_fixed<W,I>``),
:meth:`CExprPrinter.buffer_ref` (how an element is addressed: a pointer and a flat
offset by default, a declared array by its dimensions), :meth:`CExprPrinter.math_call`
(intrinsic functions, a plugin's own among them) and :meth:`CExprPrinter.identifier`.
Helper functions a printed expression needs (the conversions, integer ``pow``,
``bitcast``) are collected in :attr:`CExprPrinter.helpers` for the renderer to place
before its function.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import re
from typing import Any

import numpy as np

from hetero.core.ir.tir.buffer import Buffer, flat_index
from hetero.core.ir.tir.expr import Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var
from hetero.core.ir.tir.functor import ExprFunctor
from hetero.core.ir.tir.legalize import Native, require_primitive
from hetero.core.ir.tir.legalize_casts import is_storage
from hetero.errors import CodegenError

#: The headers every printed expression may need.
C_INCLUDES = ("<cmath>", "<cstdint>", "<cstring>")

_C_TYPES = {"bool": "bool", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
            "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
            "float16": "_Float16", "float32": "float", "float64": "double"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_INT_OPS = {"add": "+", "sub": "-", "mul": "*", "tdiv": "/", "trem": "%", "shr": ">>", "shl": "<<",
            "bit_and": "&", "bit_or": "|", "bit_xor": "^"}
#: Integer ops computed in a wide unsigned type, so that they wrap.
_WRAPPING = ("add", "sub", "mul", "shl")
_FLOAT_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
#: The C name (float64's; float32 adds ``f``) of each built-in math intrinsic.
C_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "erf": "erf", "abs": "fabs",
          "floor": "floor", "ceil": "ceil", "round_even": "rint", "expm1": "expm1", "log1p": "log1p",
          "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
          "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh"}
#: C++ keywords and names the printed code uses, which no identifier may take.
RESERVED = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t class
compl const constexpr const_cast continue decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new noexcept
not not_eq nullptr operator or or_eq private protected public register reinterpret_cast return short
signed sizeof static static_assert static_cast struct switch template this thread_local throw true try
typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
main std memcpy INFINITY NAN
""".split())

_FTOI_32 = ("static inline int32_t hetero_ftoi_i32(double x) {\n"
            "  return (x > -2147483649.0 && x < 2147483648.0) ? (int32_t)x : INT32_MIN;\n}")
_FTOI_64 = ("static inline int64_t hetero_ftoi_i64(double x) {\n"
            "  return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (int64_t)x : INT64_MIN;\n}")
_FTOI_U64 = ("static inline uint64_t hetero_ftoi_u64(double x) {\n"
             "  return (x > -1.0 && x < 18446744073709551616.0) ? (uint64_t)x : (uint64_t)hetero_ftoi_i64(x);\n}")
_BITCAST = ("template <typename To, typename From>\nstatic inline To hetero_bitcast(From x) {\n"
            "  To y;\n  std::memcpy(&y, &x, sizeof y);\n  return y;\n}")


def c_type(dtype: np.dtype, where: str) -> str:
    """The C type of ``dtype``: ``<cstdint>``'s integers, ``bool``, ``float``, ``double``,
    ``_Float16``; a storage type is the unsigned integer of its bits."""
    dtype = np.dtype(dtype)
    if is_storage(dtype):
        return "uint16_t" if dtype.itemsize == 2 else "uint8_t"
    if dtype.name not in _C_TYPES:
        raise CodegenError(f"{where}: dtype {dtype} has no C rendering; cast to float32 or an integer type")
    return _C_TYPES[dtype.name]


def _children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, (Binary, Compare, Logical)):
        return (e.a, e.b)
    if isinstance(e, (Not, Cast)):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.a, e.b)
    if isinstance(e, Load):
        return e.indices
    if isinstance(e, Call):
        return e.args
    return ()


class CExprPrinter(ExprFunctor[str]):
    """Prints legalised expressions as C++14 (see the module's docstring).

    ``where`` names the kernel in errors. ``arrays`` maps each buffer declared as a
    C array (a local allocation) to True; every other buffer in scope is a pointer
    indexed by its flat offset. ``native`` must match what the function was legalised
    for (only the primitives are accepted: float ``min``/``max`` are not).
    """

    def __init__(self, where: str, native: Native = Native()) -> None:
        if native.ieee_minmax:
            raise CodegenError(f"{where}: the C printer has no IEEE minimum/maximum; legalize with Native()")
        self.where = where
        self.native = native
        self.arrays: set[Buffer] = set()
        self.helpers: dict[str, str] = {}
        self._names: dict[Any, str] = {}
        self._taken: set[str] = set(RESERVED)
        self._uses: dict[int, int] = {}
        self._temps: dict[int, tuple[Expr, str]] = {}
        self._lines: list[str] = []
        self._count = 0
        self._pure: dict[int, tuple[Expr, bool]] = {}

    # -- hooks ------------------------------------------------------------------------

    def type_name(self, dtype: np.dtype) -> str:
        """The C type of values of ``dtype`` (a subclass names its fixed-point types here)."""
        return c_type(dtype, self.where)

    def identifier(self, obj: Buffer | Var) -> str:
        """The C name of a buffer or loop variable: its own where it is a free identifier,
        else made one (characters replaced, a suffix against clashes), stable per object."""
        key = obj
        if key not in self._names:
            base = re.sub(r"\W", "_", obj.name) or "v"
            if base[0].isdigit() or base.startswith("hetero_") or base.startswith("__"):
                base = f"v_{base}"
            name, k = base, 1
            while name in self._taken:
                k += 1
                name = f"{base}_{k}"
            self._taken.add(name)
            self._names[key] = name
        return self._names[key]

    def reserve(self, name: str) -> None:
        """Keep ``name`` (a label, the top function's) from every identifier."""
        self._taken.add(name)

    def buffer_ref(self, buffer: Buffer, indices: Sequence[Expr]) -> str:
        """The lvalue ``buffer[indices]``: ``T[i][j]`` for an array, ``p[flat]`` for a pointer."""
        name = self.identifier(buffer)
        if buffer in self.arrays:
            if not buffer.shape:
                return f"{name}[0]"
            return name + "".join(f"[{self.text(i)}]" for i in indices)
        if not buffer.shape:
            return f"{name}[0]"
        return f"{name}[{self.text(flat_index(buffer, tuple(indices)))}]"

    def math_call(self, func: str, args: list[str], dtype: np.dtype) -> str:
        """The intrinsic ``func`` (or ``pow``) of float ``args`` of ``dtype``: ``<cmath>``'s
        C name, float32's with ``f``, float16 computed in float. A plugin's intrinsic is
        refused here; a subclass that provides it overrides this."""
        name = "pow" if func == "pow" else C_MATH.get(func)
        if name is None:
            raise CodegenError(f"{self.where}: intrinsic {func} has no C rendering; the renderer's "
                               "math_call provides intrinsics beyond the built-in math functions")
        if dtype.name == "float64":
            return f"{name}({', '.join(args)})"
        if dtype.name == "float32":
            return f"{name}f({', '.join(args)})"
        if dtype.name == "float16":
            wide = ", ".join(f"(float){a}" for a in args)
            return f"((_Float16){name}f({wide}))"
        raise CodegenError(f"{self.where}: intrinsic {func} of {dtype} has no C rendering")

    # -- driving ----------------------------------------------------------------------

    def print_exprs(self, exprs: Iterable[Expr]) -> tuple[list[str], list[str]]:
        """The texts of ``exprs`` (one statement's), and the declarations of the
        temporaries they share, to be placed before the statement."""
        exprs = list(exprs)
        self._uses, self._temps, self._lines = {}, {}, []
        stack = list(reversed(exprs))
        while stack:
            e = stack.pop()
            k = id(e)
            self._uses[k] = self._uses.get(k, 0) + 1
            if self._uses[k] == 1:
                stack.extend(_children(e))
        texts = [self.text(e) for e in exprs]
        lines, self._lines, self._temps = self._lines, [], {}
        return lines, texts

    def text(self, e: Expr) -> str:
        """The C text of the primitive expression ``e``, or its temporary's name."""
        hit = self._temps.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        require_primitive(e, self.native, self.where)
        out = self.visit_expr(e)
        if self._uses.get(id(e), 0) > 1 and not isinstance(e, (Var, Const)):
            self._count += 1
            name = f"hetero_t{self._count}"
            self._lines.append(f"const {self.type_name(e.dtype)} {name} = {out};")
            self._temps[id(e)] = (e, name)
            return name
        return out

    def helper(self, name: str, code: str) -> str:
        """Note that the printed code needs the helper ``name`` (defined by ``code``)."""
        self.helpers.setdefault(name, code)
        return name

    # -- the primitives ---------------------------------------------------------------

    def visit_Expr(self, e: Any) -> str:
        raise CodegenError(f"{self.where}: cannot render a {type(e).__name__} expression; "
                           "lower compute definitions with tir.lower and legalize before rendering")

    def visit_Var(self, e: Var) -> str:
        name = self.identifier(e)
        return name if e.dtype == np.int64 else f"(({self.type_name(e.dtype)}){name})"

    def visit_Const(self, e: Const) -> str:
        return self.literal(e.value, e.dtype)

    def literal(self, value: Any, dtype: np.dtype) -> str:
        """A C literal of ``value`` as ``dtype``, exact."""
        if dtype.kind == "b":
            return "true" if value else "false"
        ty = self.type_name(dtype)
        if dtype.kind == "f":
            v = dtype.type(value)
            if np.isnan(v):
                return f"(({ty})NAN)"
            if np.isinf(v):
                return f"(({ty})INFINITY)" if v > 0 else f"(-({ty})INFINITY)"
            if dtype.name == "float64":
                return repr(float(v))
            text = np.format_float_scientific(np.float32(v), unique=True) + "f"
            return text if dtype.name == "float32" else f"(({ty}){text})"
        v = int(value)
        bits = 8 * dtype.itemsize
        if dtype.kind == "u":
            return f"(({ty}){v}ULL)"
        if dtype == np.int64 and -(1 << 31) <= v < 1 << 31:
            return str(v)  # an int, which converts to int64_t wherever it meets one
        if v == -(1 << (bits - 1)):
            return f"(({ty})({v + 1}LL - 1))"
        return f"(({ty}){v}LL)"

    def visit_Load(self, e: Load) -> str:
        return self.buffer_ref(e.buffer, e.indices)

    def visit_Cast(self, e: Cast) -> str:
        return self.convert(self.text(e.a), e.a.dtype, e.dtype)

    def convert(self, x: str, src: np.dtype, dst: np.dtype) -> str:
        """``x`` of ``src`` converted to ``dst`` with the IR's meaning."""
        if src == dst:
            return x
        if dst.kind == "b":
            return f"({x} != 0)"
        ty = self.type_name(dst)
        if src.kind == "f" and dst.kind in "iu":
            wide = f"(double){x}"
            if dst.itemsize <= 2 or dst.name == "int32":
                return f"(({ty}){self.helper('hetero_ftoi_i32', _FTOI_32)}({wide}))"
            self.helper("hetero_ftoi_i64", _FTOI_64)
            if dst.name == "uint64":
                return f"{self.helper('hetero_ftoi_u64', _FTOI_U64)}({wide})"
            return f"(({ty})hetero_ftoi_i64({wide}))"
        return f"(({ty}){x})"

    def visit_Compare(self, e: Compare) -> str:
        dtype = e.a.dtype
        if dtype.kind == "u" and isinstance(e.b, Const) and e.b.value == 0 and e.op in ("lt", "ge"):
            return "false" if e.op == "lt" else "true"  # GCC's -Wtype-limits refuses the comparison
        return f"({self.text(e.a)} {_CMP[e.op]} {self.text(e.b)})"

    def visit_Logical(self, e: Logical) -> str:
        return f"({self.text(e.a)} {'&&' if e.op == 'and' else '||'} {self.text(e.b)})"

    def visit_Not(self, e: Not) -> str:
        return f"(!{self.text(e.a)})"

    def visit_Select(self, e: Select) -> str:
        return f"({self.text(e.cond)} ? {self.text(e.a)} : {self.text(e.b)})"

    def visit_Binary(self, e: Binary) -> str:
        a, b = self.text(e.a), self.text(e.b)
        dtype, ty = e.dtype, self.type_name(e.dtype)
        if dtype.kind == "f":
            if e.op == "pow":
                return self.math_call("pow", [a, b], dtype)
            if e.op == "trem":
                return self._fmod(a, b, dtype)
            if dtype.name == "float16":
                return f"((_Float16)((float){a} {_FLOAT_OPS[e.op]} (float){b}))"
            return f"({a} {_FLOAT_OPS[e.op]} {b})"
        if e.op == "pow":
            return f"{self._ipow(dtype)}({a}, {b})"
        if e.op in ("min", "max"):
            return f"({b} {'<' if e.op == 'min' else '>'} {a} ? {b} : {a})"
        if e.op in ("add", "sub", "mul") and dtype == np.int64 and self._index_only(e):
            return f"({a} {_INT_OPS[e.op]} {b})"
        if e.op in _WRAPPING:
            wide = "uint64_t" if dtype.itemsize == 8 else "uint32_t"
            return f"(({ty})(({wide}){a} {_INT_OPS[e.op]} ({wide}){b}))"
        return f"(({ty})({a} {_INT_OPS[e.op]} {b}))"

    def _index_only(self, e: Expr) -> bool:
        """Whether ``e`` reads no memory: a function of loop variables and literals, bounded
        by the static extents, which cannot overflow int64 (so needs no wrapping)."""
        hit = self._pure.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        pure = not isinstance(e, Load) and all(self._index_only(c) for c in _children(e))
        self._pure[id(e)] = (e, pure)
        return pure

    def _fmod(self, a: str, b: str, dtype: np.dtype) -> str:
        if dtype.name == "float64":
            return f"fmod({a}, {b})"
        if dtype.name == "float32":
            return f"fmodf({a}, {b})"
        return f"((_Float16)fmodf((float){a}, (float){b}))"

    def _ipow(self, dtype: np.dtype) -> str:
        """The helper raising an integer of ``dtype`` to a power by squaring, wrapped; a
        negative exponent gives ``trunc(1 / a**-b)`` (0 unless ``a`` is 1 or -1)."""
        ty = self.type_name(dtype)
        wide = "uint64_t" if dtype.itemsize == 8 else "uint32_t"
        name = f"hetero_ipow_{dtype.name}"
        negative = ("  if (e < 0) return (" + ty + ")(b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0);\n"
                    if dtype.kind == "i" else "")
        code = (f"static inline {ty} {name}({ty} b, {ty} e) {{\n{negative}"
                f"  {wide} acc = 1, sq = ({wide})b, n = ({wide})e;\n"
                "  while (n) {\n    if (n & 1) acc *= sq;\n    sq *= sq;\n    n >>= 1;\n  }\n"
                f"  return ({ty})acc;\n}}")
        return self.helper(name, code)

    def visit_Call(self, e: Call) -> str:
        args = [self.text(a) for a in e.args]
        if e.func == "bitcast":
            src, dst = e.args[0].dtype, e.dtype
            if dst.kind == "b":
                return f"({args[0]} != 0)"
            x = f"(uint8_t){args[0]}" if src.kind == "b" else args[0]
            from_ty = "uint8_t" if src.kind == "b" else self.type_name(src)
            self.helper("hetero_bitcast", _BITCAST)
            return f"hetero_bitcast<{self.type_name(dst)}, {from_ty}>({x})"
        if e.func == "fence":  # nothing contracts here (an ISO mode), so the value is itself
            return args[0]
        return self.math_call(e.func, args, e.args[0].dtype)
