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
import re
from typing import Any

import numpy as np

from hetero.core.codegen.c_expr import C_INCLUDES, CExprPrinter
from hetero.core.codegen.stages import split_stages
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Load
from hetero.core.ir.tir.functor import StmtExprVisitor, StmtFunctor
from hetero.core.ir.tir.legalize import Native, legalize
from hetero.core.ir.tir.stmt import Allocate, For, ForKind, PrimFunc, Store, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.errors import CodegenError

#: The function attribute that asks for ``#pragma HLS DATAFLOW`` over its top-level stages.
DATAFLOW_ATTR = "hls_dataflow"


@dataclass(frozen=True)
class HlsKernel:
    """A function rendered as Vitis-HLS C++: ``source`` (the ``.cpp``), ``header`` (the
    ``.h`` with the prototype), the ``top`` function's name and its ``params`` in order
    (inputs, then outputs, as the function has them)."""

    top: str
    source: str
    header: str
    params: tuple[Buffer, ...]

    @property
    def param_names(self) -> tuple[str, ...]:
        """The parameters' names, in the order the top function takes them."""
        return tuple(b.name for b in self.params)


class HlsExprPrinter(CExprPrinter):
    """The C printer as HLS C++ uses it; where fixed-point types will name ``ap_fixed<W,I>``."""


def emit_hls(func: PrimFunc, top: str | None = None, printer: type[CExprPrinter] = HlsExprPrinter) -> HlsKernel:
    """``func`` as Vitis-HLS C++ with top function ``top`` (by default the function's name
    made an identifier, and ``_top``); see the module's docstring for what is written."""
    verify_func(func)
    func = legalize(func, Native())
    top = top or f"{_identifier(func.name)}_top"
    if not re.fullmatch(r"[A-Za-z_]\w*", top):
        raise CodegenError(f"kernel {func.name}: top function name {top!r} is not a C identifier")
    where = f"kernel {func.name}"
    exprs = printer(where)
    exprs.reserve(top)
    stored = {s.buffer for s in walk(func.body) if isinstance(s, Store)}
    loaded = _loaded(func)
    params = []
    for p in func.params:
        qual = "" if p in stored else "const "
        params.append(f"{qual}{exprs.type_name(p.dtype)}* {exprs.identifier(p)}")
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
    helpers = "".join(f"{code}\n\n" for code in exprs.helpers.values())
    source = (f"// {top}: tensor-IR function {func.name} as Vitis-HLS C++, written by hetero (fpga_hls)\n"
              f"{includes}\n{helpers}{prototype} {{\n" + "".join(f"  {ln}\n" for ln in lines) + "}\n")
    guard = f"HETERO_{top.upper()}_H"
    header = (f"#ifndef {guard}\n#define {guard}\n{includes}\n{prototype};\n\n#endif  // {guard}\n")
    return HlsKernel(top, source, header, func.params)


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
        dims = "".join(f"[{d}]" for d in b.shape) or "[1]"
        lines = [f"{self.exprs.type_name(b.dtype)} {name}{dims} = {{}};"]
        for p in s.partitions:
            factor = "" if p.kind == "complete" else f" factor={p.factor}"
            lines.append(f"#pragma HLS ARRAY_PARTITION variable={name} {p.kind}{factor} dim={p.dim + 1}")
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
        temps, (ref, value) = self.exprs.print_exprs((target, s.value))
        return [*temps, f"{ref} = {value};"]

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
