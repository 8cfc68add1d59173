"""A tensor-IR function as Vitis-HLS C++: one top function with its interfaces and pragmas.

The function is legalised (:func:`~hetero.core.ir.tir.legalize.legalize`, no native
extras) and its expressions printed by the shared C-family printer
(:class:`~hetero.core.codegen.c_expr.CExprPrinter`); this module writes the statements
and what HLS reads from the schedule:

- ``extern "C" void top(...)``: a pointer a parameter, in the function's order,
  ``const`` where the function never stores to it; each gets
  ``#pragma HLS INTERFACE m_axi port=P offset=slave bundle=gmemN depth=<elements>``
  (a bundle each, so every buffer has its own AXI port) and the function
  ``#pragma HLS INTERFACE s_axilite port=return``.
- Loops are labelled ``L_<var>`` (made unique: C++ labels are per function) over static
  bounds. A PIPELINED loop gets ``#pragma HLS PIPELINE II=<ii>`` (its ``ii`` annotation,
  1 without one); an UNROLLED loop ``#pragma HLS UNROLL``, and a VECTORIZED one too
  (an FPGA's lanes are an unrolled body); an ``unroll_factor`` annotation
  ``#pragma HLS UNROLL factor=<f>``. PARALLEL means nothing more on one kernel than a
  serial loop; a loop bound to a thread axis is refused.
- An allocation is a local array of its static shape, zero-initialised as the
  interpreter's are, with ``#pragma HLS ARRAY_PARTITION variable=T <kind> factor=<f>
  dim=<d+1>`` for each of its ``partition`` annotations (no factor for ``complete``).
  Allocations at the top of the function (the intermediates between stages) are
  declared at function scope, the others in a block of their own.
- ``#pragma HLS DATAFLOW`` is written when the function has the attribute
  :data:`DATAFLOW_ATTR` set true: its top-level stages then run as a dataflow region,
  each a process, their intermediates the channels. A default schedule sets it where
  the stages suit it (each intermediate written by one stage and read by the next);
  the emitter does not judge that.
- Barriers mean nothing in one sequential kernel and print nothing.
- Fixed point (``formats``, :mod:`.fixed`): the printer is a :class:`FixedExprPrinter`;
  the source includes ``<ap_fixed.h>``; float32 arrays are declared in their
  ``ap_fixed<W,I,AP_RND_CONV,AP_SAT>`` format (a typedef ``hetero_fxW_I`` each) and
  zeroed by loops (``= {}`` would leave ``ap_fixed`` values undefined: its default
  constructor sets nothing; the loops' cycles are not in the estimate); the top
  function keeps float pointers (the graph's dtypes, so the host, the testbench and
  C simulation pass float arrays), each element quantised to its tensor's format where
  it is loaded and stored.

What HLS refuses never appears: bounds are static, there is no dynamic memory, the
code calls only ``<cmath>`` functions and the helpers the printer defines (no
recursion). The result, an :class:`HlsKernel`, holds the source, a header with the
prototype, the top function's name and its parameters in order.

Example::

    kernel = emit_hls(lower_node(node))
    print(kernel.source)     # the .cpp;  kernel.header: the .h
"""

from __future__ import annotations

from dataclasses import dataclass
import hashlib
import json
import re
from typing import Any

import numpy as np

from hetero.plugin import CodegenError
from hetero.plugin.codegen import C_INCLUDES, CExprPrinter, c_type, split_stages
from hetero.plugin.tir import (
    Allocate, Binary, Buffer, Call, Cast, Const, Expr, For, ForKind, Load, Native, PrimFunc, Select, StmtExprVisitor,
    StmtFunctor, Store, legalize, remove_dead_buffers, verify_func, walk,
)
from hetero.plugins.fpga_hls.fixed import FixedFormat, KernelFormats, integer_bits

#: The function attribute that asks for ``#pragma HLS DATAFLOW`` over its top-level stages.
DATAFLOW_ATTR = "hls_dataflow"
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


@dataclass(frozen=True)
class HlsKernel:
    """A function rendered as Vitis-HLS C++: ``source`` (the ``.cpp``), ``header`` (the
    ``.h`` with the prototype), the ``top`` function's name and its ``params`` in order
    (inputs, then outputs, as the function has them); a fixed-point kernel's ``formats``;
    a calibration kernel's ``tracked`` buffers (:class:`RangeExprPrinter`)."""

    top: str
    source: str
    header: str
    params: tuple[Buffer, ...]
    formats: KernelFormats | None = None
    tracked: tuple[str, ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        """The parameters' names, in the order the top function takes them."""
        return tuple(b.name for b in self.params)


class HlsExprPrinter(CExprPrinter):
    """The C printer as HLS C++ uses it, with the hooks the emitter's statements need: the
    type of a parameter's pointer and of a declared array, and the value a store writes."""

    #: Headers the printed code needs beyond :data:`C_INCLUDES`.
    includes: tuple[str, ...] = ()

    def param_type(self, dtype: np.dtype) -> str:
        """The element type of a parameter's pointer: the graph's dtype, always."""
        return c_type(dtype, self.where)

    def storage_type(self, buffer: Buffer) -> str:
        """The element type of ``buffer`` declared as an array."""
        return self.type_name(buffer.dtype)

    def zero_fills(self, buffer: Buffer) -> bool:
        """Whether an array of ``buffer`` needs zeroing beyond ``= {}`` (a class type
        whose default constructor leaves it undefined)."""
        return False

    def mark_target(self, target: Load) -> None:
        """``target``, a load built to print a store's element, is an lvalue."""

    def stored(self, buffer: Buffer, value: str, expr: Expr | None = None) -> str:
        """The text a store to ``buffer`` assigns, from ``value`` (the text of ``expr``)."""
        return value


class RangeExprPrinter(HlsExprPrinter):
    """The float printer for calibration: every store to a float32 buffer also keeps the
    largest finite magnitude stored there in ``hetero_ranges[k]``, ``k`` the buffer's place in
    :attr:`tracked` (a global the C simulation reads after a run: :mod:`.fixed`)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.tracked: list[Buffer] = []

    def stored(self, buffer: Buffer, value: str, expr: Expr | None = None) -> str:
        if np.dtype(buffer.dtype) != np.float32:
            return value
        if buffer not in self.tracked:
            self.tracked.append(buffer)
        self.helper("hetero_track", "static inline float hetero_track(float* range, float v) {\n"
                    "  const float a = std::fabs(v);\n"
                    "  if (std::isfinite(a) && a > *range) *range = a;\n  return v;\n}")
        return f"hetero_track(&hetero_ranges[{self.tracked.index(buffer)}], {value})"


class FixedExprPrinter(HlsExprPrinter):
    """The HLS printer with float32 values in ``ap_fixed`` (:mod:`.fixed`).

    Each float32 buffer is stored in its format (a parameter stays a float pointer,
    quantised to its format where it is loaded and stored). A float32 expression is
    computed in the kernel's compute format (a load converted to it exactly, each
    ``+ - *`` and conversion rounded and saturated to it) unless it depends on an
    intrinsic or a division: those go through float (``<cmath>``'s functions, not
    ``hls_math``) and what is computed from them stays float until it is stored, where
    it is rounded to the buffer's format (Sigmoid's ``exp(-x)`` can be far outside any
    16-bit range its result would be clipped to). A literal outside the compute range
    has a type of its own (a pool's divisor 36 in ``ap_fixed<16,6>``). Integers keep their
    C types: at the IR's widths ``ap_int<8>`` ... ``ap_int<64>`` hold the same values, and
    the printer already wraps them.
    """

    includes = ("<ap_fixed.h>",)

    def __init__(self, where: str, formats: KernelFormats) -> None:
        super().__init__(where)
        self.formats = formats
        self._targets: set[int] = set()
        self._floats: dict[int, tuple[Expr, bool]] = {}

    @staticmethod
    def _fixed(dtype: np.dtype) -> bool:
        return np.dtype(dtype) == np.float32

    @property
    def _compute(self) -> str:
        return self.fixed_type(self.formats.compute)

    def fixed_type(self, fmt: FixedFormat) -> str:
        """The name of ``fmt`` in the source: ``hetero_fx16_6``, a typedef of
        ``ap_fixed<16,6,AP_RND_CONV,AP_SAT>`` placed before the function."""
        name = f"hetero_fx{fmt.width}_{fmt.integer}"
        return self.helper(name, f"typedef {fmt.c_type} {name};")

    def in_float(self, e: Expr) -> bool:
        """Whether the float32 ``e`` is computed in float: it depends on an intrinsic or a
        division (see the class's docstring)."""
        hit = self._floats.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if not self._fixed(e.dtype) or isinstance(e, (Load, Const, Cast)):
            found = False
        elif isinstance(e, Call):
            found = e.func != "fence" or self.in_float(e.args[0])
        elif isinstance(e, Binary):
            found = e.op not in ("add", "sub", "mul") or self.in_float(e.a) or self.in_float(e.b)
        elif isinstance(e, Select):
            found = self.in_float(e.a) or self.in_float(e.b)
        else:
            found = False
        self._floats[id(e)] = (e, found)
        return found

    def _as_float(self, e: Expr) -> str:
        text = self.text(e)
        return text if self.in_float(e) else f"({text}).to_float()"

    def _as_compute(self, e: Expr) -> str:
        text = self.text(e)
        if isinstance(e, Const) and not text.startswith(self._compute + "("):
            return f"{self._compute}({text})"  # a literal of its own type, saturated
        return text

    def type_name(self, dtype: np.dtype) -> str:
        return self._compute if self._fixed(dtype) else super().type_name(dtype)

    def storage_type(self, buffer: Buffer) -> str:
        return self.fixed_type(self.formats.of(buffer)) if self._fixed(buffer.dtype) else super().storage_type(buffer)

    def zero_fills(self, buffer: Buffer) -> bool:
        return self._fixed(buffer.dtype)

    def mark_target(self, target: Load) -> None:
        self._targets.add(id(target))

    def stored(self, buffer: Buffer, value: str, expr: Expr | None = None) -> str:
        if not self._fixed(buffer.dtype):
            return value
        fmt = self.formats.of(buffer)
        exact = expr is not None and not self.in_float(expr) and fmt == self.formats.compute
        if buffer in self.arrays:
            return value if exact else f"{self.fixed_type(fmt)}({value})"
        return f"{self.fixed_type(fmt)}({value}).to_float()"

    def text(self, e: Expr) -> str:
        out = super().text(e)
        # A shared float-path subexpression's temporary is a float, not the compute type.
        head = f"const {self._compute} {out} = "
        if self._lines and self._lines[-1].startswith(head) and self._fixed(e.dtype) and self.in_float(e):
            self._lines[-1] = f"const float {out} = " + self._lines[-1][len(head):]
        return out

    def visit_Load(self, e: Load) -> str:
        ref = self.buffer_ref(e.buffer, e.indices)
        if not self._fixed(e.dtype) or id(e) in self._targets:
            return ref
        fmt = self.formats.of(e.buffer)
        if e.buffer not in self.arrays:  # a float parameter: quantised to its format
            ref = f"{self.fixed_type(fmt)}({ref})"
        return ref if fmt == self.formats.compute else f"{self._compute}({ref})"

    def literal(self, value: Any, dtype: np.dtype) -> str:
        if not self._fixed(dtype):
            return super().literal(value, dtype)
        v = np.float32(value)
        if np.isnan(v):
            raise CodegenError(f"{self.where}: a NaN literal has no {self.formats.compute} value")
        compute = self.formats.compute
        if np.isinf(v):
            v = np.float32(compute.max if v > 0 else compute.min)
        text = super().literal(v, np.dtype(np.float32))
        if compute.min <= v <= compute.max or abs(float(v)) >= 2.0 ** 31:
            return f"{self._compute}({text})"
        integer = integer_bits(abs(float(v)), 64)  # its integer bits and the compute fraction bits
        return f"{self.fixed_type(FixedFormat(integer + compute.fraction, integer))}({text})"

    def visit_Select(self, e: Any) -> str:
        if not self._fixed(e.dtype):
            return super().visit_Select(e)
        if self.in_float(e):
            return f"({self.text(e.cond)} ? {self._as_float(e.a)} : {self._as_float(e.b)})"
        return f"({self.text(e.cond)} ? {self._as_compute(e.a)} : {self._as_compute(e.b)})"

    def visit_Compare(self, e: Any) -> str:
        if self._fixed(e.a.dtype) and (self.in_float(e.a) or self.in_float(e.b)):
            return f"({self._as_float(e.a)} {_CMP[e.op]} {self._as_float(e.b)})"
        return super().visit_Compare(e)

    def visit_Cast(self, e: Cast) -> str:
        if self._fixed(e.a.dtype) and self.in_float(e.a):  # a float's conversion, as the float printer has it
            return HlsExprPrinter.convert(self, self.text(e.a), e.a.dtype, e.dtype)
        return super().visit_Cast(e)

    def convert(self, x: str, src: np.dtype, dst: np.dtype) -> str:
        if src == dst or not (self._fixed(src) or self._fixed(dst)):
            return super().convert(x, src, dst)
        if self._fixed(src) and dst.kind == "f":
            return f"(({c_type(dst, self.where)})({x}).to_double())"
        if self._fixed(dst) and src.kind == "f":
            return f"{self._compute}((double){x})"
        if self._fixed(dst):
            return f"{self._compute}({x})"
        return super().convert(x, src, dst)

    def visit_Binary(self, e: Any) -> str:
        if not self._fixed(e.dtype):
            return super().visit_Binary(e)
        if e.op == "pow":
            return f"powf({self._as_float(e.a)}, {self._as_float(e.b)})"
        if e.op == "trem":
            return f"fmodf({self._as_float(e.a)}, {self._as_float(e.b)})"
        if e.op not in ("add", "sub", "mul", "div"):
            raise CodegenError(f"{self.where}: float32 {e.op} has no fixed-point rendering")
        op = _ARITH[e.op]
        if self.in_float(e):
            return f"({self._as_float(e.a)} {op} {self._as_float(e.b)})"
        return f"{self._compute}({self.text(e.a)} {op} {self.text(e.b)})"

    def visit_Call(self, e: Any) -> str:
        if e.func == "bitcast" and (self._fixed(e.dtype) or self._fixed(e.args[0].dtype)):
            raise CodegenError(f"{self.where}: a bitcast of float32 has no meaning in fixed point")
        if not self._fixed(e.dtype) or e.func in ("fence", "bitcast"):
            return super().visit_Call(e)
        return super().math_call(e.func, [self._as_float(a) for a in e.args], np.dtype(np.float32))


def emit_hls(func: PrimFunc, top: str | None = None, printer: type[HlsExprPrinter] = HlsExprPrinter,
             formats: KernelFormats | None = None) -> HlsKernel:
    """``func`` as Vitis-HLS C++ with top function ``top`` (by default the function's name
    made an identifier, and ``_top``; a fixed-point kernel has ``_fx`` and a digest of its
    formats before ``_top``); with ``formats``, its float32 values in fixed point
    (:class:`FixedExprPrinter`); see the module's docstring for what is written."""
    verify_func(func)
    # An intermediate nothing reads (a coordinate a one-wide axis made unused) would be a
    # variable set but never used, which the C simulation's -Werror refuses.
    func = remove_dead_buffers(legalize(func, Native()))
    if top is None:  # a fixed-point kernel's name tells its formats apart (auto gives one function several)
        tag = "" if formats is None else "_fx" + hashlib.sha256(
            json.dumps(formats.to_json(), sort_keys=True).encode()).hexdigest()[:8]
        top = f"{_identifier(func.name)}{tag}_top"
    if not re.fullmatch(r"[A-Za-z_]\w*", top):
        raise CodegenError(f"kernel {func.name}: top function name {top!r} is not a C identifier")
    where = f"kernel {func.name}"
    exprs = printer(where) if formats is None else FixedExprPrinter(where, formats)
    exprs.reserve(top)
    stored = {s.buffer for s in walk(func.body) if isinstance(s, Store)}
    loaded = _loaded(func)
    params = []
    for p in func.params:
        qual = "" if p in stored else "const "
        params.append(f"{qual}{exprs.param_type(p.dtype)}* {exprs.identifier(p)}")
    prototype = f'extern "C" void {top}({", ".join(params)})'
    body = _Body(exprs, where)
    lines = []
    for n, p in enumerate(func.params):
        lines.append(f"#pragma HLS INTERFACE m_axi port={exprs.identifier(p)} offset=slave "
                     f"bundle=gmem{n} depth={max(p.size, 1)}")
    lines.append("#pragma HLS INTERFACE s_axilite port=return")
    if func.attr(DATAFLOW_ATTR, False):
        lines.append("#pragma HLS DATAFLOW")
    lines += [f"(void){exprs.identifier(p)};" for p in func.params if p not in stored and p not in loaded]
    workspaces, stages = split_stages(func.body)
    top_allocs = {a.buffer: a for a in walk(func.body) if isinstance(a, Allocate) and a.buffer in workspaces}
    for buffer in workspaces:
        lines += body.declare(top_allocs[buffer])
    for stage in stages:
        lines += body.visit_stmt(stage)
    includes = "".join(f"#include {h}\n" for h in C_INCLUDES)
    fixed = "".join(f"#include {h}\n" for h in exprs.includes)
    tracked = tuple(b.name for b in getattr(exprs, "tracked", ()))
    if tracked:
        exprs.helpers = {"hetero_ranges": f'extern "C" {{ float hetero_ranges[{len(tracked)}] = {{}}; }}',
                         **exprs.helpers}
    helpers = "".join(f"{code}\n\n" for code in exprs.helpers.values())
    source = (f"// {top}: tensor-IR function {func.name} as Vitis-HLS C++, written by hetero (fpga_hls)\n"
              f"{includes}{fixed}\n{helpers}{prototype} {{\n" + "".join(f"  {ln}\n" for ln in lines) + "}\n")
    guard = f"HETERO_{top.upper()}_H"
    header = (f"#ifndef {guard}\n#define {guard}\n{includes}\n{prototype};\n\n#endif  // {guard}\n")
    return HlsKernel(top, source, header, func.params, formats, tracked)


def _identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name) or "top"
    return f"k_{text}" if text[0].isdigit() else text


def _loaded(func: PrimFunc) -> set[Buffer]:
    """The buffers ``func`` reads."""
    found: set[Buffer] = set()

    class _Loads(StmtExprVisitor):
        def visit_Load(self, e: Any) -> None:
            found.add(e.buffer)
            super().visit_Load(e)

    _Loads().visit_stmt(func.body)
    return found


class _Body(StmtFunctor[list[str]]):
    """Statements to lines of C++ (indented by two spaces a level)."""

    def __init__(self, exprs: CExprPrinter, where: str) -> None:
        self.exprs = exprs
        self.where = where
        self.labels: set[str] = set()

    def label(self, var_name: str) -> str:
        """``L_<var>``, unique in the function."""
        base = "L_" + re.sub(r"\W", "_", var_name)
        name, k = base, 1
        while name in self.labels:
            k += 1
            name = f"{base}_{k}"
        self.labels.add(name)
        self.exprs.reserve(name)
        return name

    def declare(self, s: Allocate) -> list[str]:
        """The declaration of ``s``'s buffer as a zero-initialised local array, and its partitions."""
        b = s.buffer
        name = self.exprs.identifier(b)
        self.exprs.arrays.add(b)
        shape = b.shape or (1,)
        dims = "".join(f"[{d}]" for d in shape)
        fills = self.exprs.zero_fills(b)
        lines = [f"{self.exprs.storage_type(b)} {name}{dims}{'' if fills else ' = {}'};"]
        for p in s.partitions:
            factor = "" if p.kind == "complete" else f" factor={p.factor}"
            lines.append(f"#pragma HLS ARRAY_PARTITION variable={name} {p.kind}{factor} dim={p.dim + 1}")
        if fills:  # ap_fixed's default constructor leaves the value undefined: zero it
            loops = [f"{name}_z{d}" for d in range(len(shape)) if shape[d] > 1]
            for v in loops:
                self.exprs.reserve(v)
            names = iter(loops)
            index = [next(names) if n > 1 else "0" for n in shape]
            fill = [f"{name}{''.join(f'[{v}]' for v in index)} = 0;"]
            for v, n in reversed([(v, n) for v, n in zip(index, shape) if n > 1]):
                fill = [f"{self.label(v)}: for (int64_t {v} = 0; {v} < {n}; ++{v}) {{", *_indent(fill), "}"]
            lines += fill
        return lines

    def visit_Allocate(self, s: Allocate) -> list[str]:
        return ["{", *_indent(self.declare(s) + self.visit_stmt(s.body)), "}"]

    def visit_For(self, s: For) -> list[str]:
        if s.kind is ForKind.THREAD_BINDING:
            raise CodegenError(f"{self.where}: loop {s.var.name} is bound to {s.thread_axis}; an HLS kernel "
                               "has no thread axes (pipeline or unroll it instead)")
        if s.var.dtype != np.int64:
            raise CodegenError(f"{self.where}: loop variable {s.var.name} is {s.var.dtype}, not int64")
        var = self.exprs.identifier(s.var)
        pragmas = []
        if s.kind is ForKind.PIPELINED:
            pragmas.append(f"#pragma HLS PIPELINE II={s.annotation('ii', 1)}")
        if s.kind in (ForKind.UNROLLED, ForKind.VECTORIZED):
            pragmas.append("#pragma HLS UNROLL")
        elif s.annotation("unroll_factor") is not None:
            pragmas.append(f"#pragma HLS UNROLL factor={s.annotation('unroll_factor')}")
        head = f"{self.label(s.var.name)}: for (int64_t {var} = 0; {var} < {s.extent}; ++{var}) {{"
        return [head, *_indent(pragmas + self.visit_stmt(s.body)), "}"]

    def visit_Seq(self, s: Any) -> list[str]:
        return [line for part in s.stmts for line in self.visit_stmt(part)]

    def visit_Block(self, s: Any) -> list[str]:
        return [f"// stage {s.name}", *self.visit_stmt(s.body)]

    def visit_Store(self, s: Store) -> list[str]:
        # The target printed as a load of it: the printer addresses arrays and pointers alike.
        target = Load(s.buffer, s.indices, s.buffer.dtype)
        self.exprs.mark_target(target)
        temps, (ref, value) = self.exprs.print_exprs((target, s.value))
        return [*temps, f"{ref} = {self.exprs.stored(s.buffer, value, s.value)};"]

    def visit_IfThenElse(self, s: Any) -> list[str]:
        temps, (cond,) = self.exprs.print_exprs((s.cond,))
        lines = [*temps, f"if ({cond}) {{", *_indent(self.visit_stmt(s.then))]
        if s.otherwise is not None:
            lines += ["} else {", *_indent(self.visit_stmt(s.otherwise))]
        return lines + ["}"]

    def visit_Barrier(self, s: Any) -> list[str]:
        return []

    def visit_Evaluate(self, s: Any) -> list[str]:
        temps, (text,) = self.exprs.print_exprs((s.call,))
        return [*temps, f"(void){text};"]


def _indent(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines]
