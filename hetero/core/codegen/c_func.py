"""A legalised tensor-IR function as a C99 function, for a backend that builds C with the
system compiler.

Expressions are the shared C-family printer's (:class:`~hetero.core.codegen.c_expr.CExprPrinter`,
whose docstring says how C is made to mean what the interpreter computes), here in its
C99 form, :class:`C99ExprPrinter`; this module writes the statements, after the same
rules as an HLS C++ emitter would follow, for a CPU:

- ``int NAME(const float* restrict x, float* restrict y)``: a parameter a pointer to its
  buffer's C type (:func:`~hetero.core.codegen.c_expr.c_type`), in the function's order,
  ``const`` where the function never stores to it; every buffer is addressed by its flat
  offset. The function returns 0, or 1 when a heap allocation failed (it then stops
  computing what needed the buffer: the caller must treat the outputs as undefined).
- ``For``: ``for (int64_t i = 0; i < N; ++i)`` over the static extent. A PARALLEL loop is
  ``#pragma omp parallel for`` when the printer is asked for OpenMP (``openmp=True``, and
  compiled with ``-fopenmp``), and only the outermost one of a nest (OpenMP does not nest
  by default); without OpenMP it is a serial loop, which is what the IR allows. A
  VECTORIZED loop is ``#pragma omp simd`` with OpenMP, else ``#pragma GCC ivdep``: both
  promise the compiler that iterations do not depend on each other, which the schedule's
  ``vectorize`` checked for the stores (every iteration writes its own element); the
  printer also checks the loads (a buffer the loop stores to is read only at the element
  being stored) and prints a plain loop when that fails. An UNROLLED loop is
  ``#pragma GCC unroll N`` with its extent; an ``unroll_factor`` annotation gives N.
  PIPELINED is serial on a CPU; a loop bound to a thread axis is refused.
- ``Allocate``: a block of its own holding the buffer, zero-initialised as the
  interpreter's are: a local array when it holds at most ``stack_limit`` bytes, else
  ``calloc``'d and freed at the end of the block.
- ``Seq`` in order; ``IfThenElse`` as ``if``/``else``; ``Evaluate`` as ``(void)call;``;
  a ``Block`` is flattened into its loops, under a comment naming it; a ``Barrier`` means
  nothing in one sequential function and prints nothing.

Subclass hooks (an HLS C++ emitter overrides them; :class:`CFuncPrinter`):
:meth:`~CFuncPrinter.loop_pragmas` (lines before a loop), :meth:`~CFuncPrinter.body_pragmas`
(lines at the top of its body, where HLS puts ``PIPELINE``), :meth:`~CFuncPrinter.loop_head`
(a label before ``for``), :meth:`~CFuncPrinter.declare` (an allocation) and
:meth:`~CFuncPrinter.param` (a parameter's declaration).

Several functions can share one translation unit: :func:`c_source` writes the includes and
each helper the printed expressions need (conversions, integer powers, bitcasts) once,
then the functions. Example::

    func = legalize(lower_node(node), Native())
    kernel = print_c_func(func, "relu")
    kernel.source        # a complete C99 file: cc -std=c99 -O2 -ffp-contract=off -fPIC -shared -lm

Compile with ``-ffp-contract=off`` (the default of GCC's ISO modes, not of Clang's) so that
no multiply and add are fused: each float operation then rounds as the interpreter's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
import re
from typing import Any

import numpy as np

from hetero.core.codegen.c_expr import C_MATH, CExprPrinter
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Call, Load
from hetero.core.ir.tir.functor import StmtExprVisitor, StmtFunctor
from hetero.core.ir.tir.legalize import Native
from hetero.core.ir.tir.stmt import Allocate, Block, For, ForKind, IfThenElse, PrimFunc, Seq, Store, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.errors import CodegenError

#: The headers every printed C function may need.
C99_INCLUDES = ("<math.h>", "<stdbool.h>", "<stdint.h>", "<stdlib.h>", "<string.h>")
#: Allocations of more bytes than this go on the heap (a thread's stack is a few MiB).
STACK_LIMIT = 64 * 1024
#: C99's own keywords and the library names printed code calls, beyond C++'s.
_C_RESERVED = ("restrict", "_Bool", "_Complex", "_Imaginary", "calloc", "free", "NULL", "INT32_MIN",
               "INT64_MIN", "pow", "powf", "fmod", "fmodf", "fabsf", "rintf",
               *C_MATH.values(), *(f"{name}f" for name in C_MATH.values()))


class C99ExprPrinter(CExprPrinter):
    """The C-family expression printer writing C99: a bitcast is a ``memcpy`` helper for its
    pair of types (C has no templates), and C's own keywords and the libm names the code
    calls are kept from identifiers."""

    def __init__(self, where: str, native: Native = Native()) -> None:
        super().__init__(where, native)
        for name in _C_RESERVED:
            self.reserve(name)

    def visit_Call(self, e: Call) -> str:
        if e.func != "bitcast" or e.dtype.kind == "b":
            return super().visit_Call(e)
        src, dst = e.args[0].dtype, e.dtype
        x = self.text(e.args[0])
        from_ty = "uint8_t" if src.kind == "b" else self.type_name(src)
        to_ty = self.type_name(dst)
        name = f"hetero_bitcast_{_word(to_ty)}_{_word(from_ty)}"
        self.helper(name, f"static inline {to_ty} {name}({from_ty} x) {{\n"
                          f"  {to_ty} y;\n  memcpy(&y, &x, sizeof y);\n  return y;\n}}")
        return f"{name}({'(uint8_t)' if src.kind == 'b' else ''}{x})"


def _word(c_type: str) -> str:
    return re.sub(r"\W", "", c_type).lower()


@dataclass(frozen=True)
class CFunction:
    """One printed function: its ``name``, its ``code`` (the definition), the
    ``helpers`` (name to definition) the code calls, its ``params`` in order, whether it
    was printed for OpenMP, and the headers it needs."""

    name: str
    code: str
    helpers: tuple[tuple[str, str], ...]
    params: tuple[Buffer, ...]
    openmp: bool = False
    includes: tuple[str, ...] = C99_INCLUDES

    @property
    def prototype(self) -> str:
        """The declaration: the definition's first line, as a statement."""
        return self.code.split(" {\n", 1)[0] + ";"

    @property
    def source(self) -> str:
        """A C file of this function alone (:func:`c_source`)."""
        return c_source([self])


def c_source(functions: Sequence[CFunction], comment: str = "") -> str:
    """One translation unit of ``functions``: their includes, every helper once, the
    functions in order; ``comment`` (one line) heads it."""
    includes = dict.fromkeys(h for f in functions for h in f.includes)
    helpers = dict(pair for f in functions for pair in f.helpers)
    head = f"/* {comment} */\n" if comment else ""
    return (head + "".join(f"#include {h}\n" for h in includes) + "\n"
            + "".join(f"{code}\n\n" for code in helpers.values())
            + "\n".join(f.code for f in functions))


def print_c_func(func: PrimFunc, name: str | None = None, *, openmp: bool = False,
                 stack_limit: int = STACK_LIMIT, native: Native = Native()) -> CFunction:
    """``func`` (legalised for ``native``) as a C99 function called ``name`` (by default
    the function's name made an identifier); see the module's docstring."""
    return CFuncPrinter(C99ExprPrinter(f"kernel {func.name}", native), openmp=openmp,
                        stack_limit=stack_limit).print_func(func, name)


class CFuncPrinter(StmtFunctor[list[str]]):
    """Statements to lines of C (indented two spaces a level) over an expression printer.

    ``exprs`` prints the expressions (a :class:`C99ExprPrinter`, or a subclass's own);
    ``openmp`` turns parallel and vectorized loops into OpenMP pragmas; allocations above
    ``stack_limit`` bytes go on the heap.
    """

    #: How the language spells a pointer that no other pointer aliases.
    restrict = "restrict"

    def __init__(self, exprs: CExprPrinter, *, openmp: bool = False, stack_limit: int = STACK_LIMIT) -> None:
        self.exprs = exprs
        self.openmp = openmp
        self.stack_limit = stack_limit
        self.where = exprs.where
        self._parallel_depth = 0
        self._heap = False

    # -- hooks ------------------------------------------------------------------------

    def param(self, buffer: Buffer, written: bool) -> str:
        """The declaration of ``buffer`` as a parameter: a restrict pointer, const unless
        the function stores to it."""
        qual = "" if written else "const "
        return f"{qual}{self.exprs.type_name(buffer.dtype)}* {self.restrict} {self.exprs.identifier(buffer)}"

    def loop_pragmas(self, s: For) -> list[str]:
        """The lines written before loop ``s`` (see the module's docstring)."""
        lines = []
        if s.kind is ForKind.PARALLEL and self.openmp and self._parallel_depth == 0:
            lines.append("#pragma omp parallel for")
        elif s.kind is ForKind.VECTORIZED and _independent(s):
            lines.append("#pragma omp simd" if self.openmp else "#pragma GCC ivdep")
        factor = s.extent if s.kind is ForKind.UNROLLED else s.annotation("unroll_factor")
        if factor is not None:
            lines.append(f"#pragma GCC unroll {max(1, min(int(factor), 65534))}")
        return lines

    def body_pragmas(self, s: For) -> list[str]:
        """The lines written first in the body of loop ``s`` (none in C)."""
        return []

    def loop_head(self, s: For, var: str) -> str:
        """The ``for`` line of loop ``s`` over the C variable ``var``."""
        return f"for (int64_t {var} = 0; {var} < {s.extent}; ++{var}) {{"

    def declare(self, s: Allocate, body: list[str]) -> list[str]:
        """``s``'s buffer declared zero-initialised around ``body`` (the printed lines of
        its scope): a local array up to :attr:`stack_limit` bytes, else on the heap."""
        b = s.buffer
        name = self.exprs.identifier(b)
        ty = self.exprs.type_name(b.dtype)
        size = max(b.size, 1)
        if size * np.dtype(b.dtype).itemsize <= self.stack_limit:
            return ["{", f"  {ty} {name}[{size}] = {{0}};", *_indent(body), "}"]
        self._heap = True
        failed = ["#pragma omp atomic write"] if self.openmp and self._parallel_depth else []
        return ["{", f"  {ty}* {name} = ({ty}*)calloc({size}, sizeof({ty}));",
                f"  if ({name} == NULL) {{", *_indent(_indent(failed + ["hetero_status = 1;"])),
                "  } else {", *_indent(_indent(body)), f"    free({name});", "  }", "}"]

    # -- driving ----------------------------------------------------------------------

    def print_func(self, func: PrimFunc, name: str | None = None) -> CFunction:
        """``func`` as one C function called ``name``."""
        verify_func(func)
        name = name or _identifier(func.name)
        if not re.fullmatch(r"[A-Za-z_]\w*", name) or name.startswith("hetero_"):
            raise CodegenError(f"{self.where}: function name {name!r} is not a C identifier of its own")
        self.exprs.reserve(name)
        stored = {s.buffer for s in walk(func.body) if isinstance(s, Store)}
        used = _loaded(func) | stored
        params = ", ".join(self.param(p, p in stored) for p in func.params) or "void"
        self._heap = False
        body = [f"(void){self.exprs.identifier(p)};" for p in func.params if p not in used]
        body += self.visit_stmt(func.body)
        if self._heap:
            body = ["int hetero_status = 0;", *body, "return hetero_status;"]
        else:
            body.append("return 0;")
        code = f"int {name}({params}) {{\n" + "".join(f"  {line}\n" for line in body) + "}\n"
        return CFunction(name, code, tuple(self.exprs.helpers.items()), func.params, self.openmp)

    # -- statements -------------------------------------------------------------------

    def visit_For(self, s: For) -> list[str]:
        if s.kind is ForKind.THREAD_BINDING:
            raise CodegenError(f"{self.where}: loop {s.var.name} is bound to {s.thread_axis}; a C function "
                               "has no hardware axes (run it in parallel instead)")
        if s.var.dtype != np.int64:
            raise CodegenError(f"{self.where}: loop variable {s.var.name} is {s.var.dtype}, not int64")
        var = self.exprs.identifier(s.var)
        pragmas = self.loop_pragmas(s)
        parallel = s.kind is ForKind.PARALLEL and self.openmp
        self._parallel_depth += parallel
        try:
            body = self.body_pragmas(s) + self.visit_stmt(s.body)
        finally:
            self._parallel_depth -= parallel
        return [*pragmas, self.loop_head(s, var), *_indent(body), "}"]

    def visit_Allocate(self, s: Allocate) -> list[str]:
        return self.declare(s, self.visit_stmt(s.body))

    def visit_Seq(self, s: Seq) -> list[str]:
        return [line for part in s.stmts for line in self.visit_stmt(part)]

    def visit_Block(self, s: Block) -> list[str]:
        return [f"/* block {s.name} */", *self.visit_stmt(s.body)]

    def visit_Store(self, s: Store) -> list[str]:
        # The target printed as a load of it: the printer addresses every buffer alike.
        target = Load(s.buffer, s.indices, s.buffer.dtype)
        temps, (ref, value) = self.exprs.print_exprs((target, s.value))
        return [*temps, f"{ref} = {value};"]

    def visit_IfThenElse(self, s: IfThenElse) -> list[str]:
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


def _identifier(name: str) -> str:
    text = re.sub(r"\W", "_", name) or "kernel"
    return f"k_{text}" if text[0].isdigit() or text.startswith("hetero_") else text


class _Loads(StmtExprVisitor):
    """Collects every load under the statements it visits."""

    def __init__(self) -> None:
        self.loads: list[Load] = []

    def visit_Load(self, e: Any) -> None:
        self.loads.append(e)
        super().visit_Load(e)


def _all_loads(stmts: Iterable[Any]) -> list[Load]:
    visitor = _Loads()
    for s in stmts:
        visitor.visit_stmt(s)
    return visitor.loads


def _loaded(func: PrimFunc) -> set[Buffer]:
    """The buffers ``func`` reads."""
    return {e.buffer for e in _all_loads([func.body])}


def _independent(loop: For) -> bool:
    """Whether no iteration of ``loop`` reads what another writes: every buffer stored to
    under it is loaded there only at the indices of a store to it (its own element)."""
    stores = [s for s in walk(loop.body) if isinstance(s, Store)]
    written = {b: {s.indices for s in stores if s.buffer == b} for b in {s.buffer for s in stores}}
    return all(e.indices in written[e.buffer] for e in _all_loads([loop.body]) if e.buffer in written)


def _indent(lines: list[str]) -> list[str]:
    return [f"  {line}" for line in lines]


__all__ = ["C99_INCLUDES", "STACK_LIMIT", "C99ExprPrinter", "CFuncPrinter", "CFunction", "c_source",
           "print_c_func"]
