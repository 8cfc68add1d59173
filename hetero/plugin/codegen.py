"""Rendering the tensor IR: the shared LLVM emitters and the C printer (part of the kit).

- A function is split into the stages a target launches one by one (thread-parallel or
  hardware-axis nests) by :func:`split_stages`.
- LLVM IR: :class:`ExprEmitter` and :class:`StmtEmitter` emit a legalised function
  (types, loads and stores, primitives, loops with a phi induction variable, branches,
  allocations, address spaces by scope); a renderer subclasses them for what its target
  does its own way (math calls, loop hints, hardware axes). :func:`declare`,
  :func:`llvm_type` and the integer types :data:`I1`, :data:`I8`, :data:`I64` help.
- C: :class:`CExprPrinter` prints legalised expressions as C or C++ (:func:`c_type` for
  a dtype, :data:`C_INCLUDES` the headers its output needs); :func:`print_c_func` prints a
  legalised function as a C99 function (:class:`CFunction`) through :class:`CFuncPrinter`
  (statements, with hooks for loop pragmas) over :class:`C99ExprPrinter`, and
  :func:`c_source` puts several in one translation unit (:data:`C99_INCLUDES` its headers;
  allocations above :data:`STACK_LIMIT` bytes go on the heap).
"""

from __future__ import annotations

from hetero.core.codegen import I1, I8, I64, LLVM_INTRINSICS, ExprEmitter, LoopID, StmtEmitter, declare, llvm_type
from hetero.core.codegen.c_expr import C_INCLUDES, CExprPrinter, c_type
from hetero.core.codegen.c_func import (
    C99_INCLUDES, STACK_LIMIT, C99ExprPrinter, CFuncPrinter, CFunction, c_source, print_c_func,
)
from hetero.core.codegen.stages import split_stages

__all__ = [
    "C99_INCLUDES", "C_INCLUDES", "I1", "I8", "I64", "LLVM_INTRINSICS", "STACK_LIMIT", "C99ExprPrinter",
    "CExprPrinter", "CFuncPrinter", "CFunction", "ExprEmitter", "LoopID", "StmtEmitter", "c_source", "c_type",
    "declare", "llvm_type", "print_c_func", "split_stages",
]
