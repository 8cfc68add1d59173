"""The tensor IR, from one module: ``from hetero.plugin.tir import ...`` (part of the kit).

Every codegen backend lowers to this one IR (ARCHITECTURE.md, rule 4) and renders it:

- Buffers (:class:`Buffer`, with a memory ``scope`` and HLS-style :class:`Partition`\\ s),
  expressions (:class:`Var`, :class:`Const`, :class:`Binary`, :class:`Load`, :class:`Cast`,
  :class:`Select`, :class:`Call` of an intrinsic, with their builders :func:`const`,
  :func:`cast`, :func:`binary`, :func:`select`, ...), statements (:class:`For` of a
  :class:`ForKind`, :class:`Store`, :class:`Allocate`, :class:`Seq`, :class:`IfThenElse`,
  :class:`Barrier`, :class:`Evaluate`, :class:`Block` with :class:`IterKind`\\ s) and
  functions (:class:`PrimFunc`).
- Compute definitions after TVM's TE (:func:`placeholder`, :func:`compute`,
  :func:`reduce_axis`, :func:`sum_`, :func:`max_`, :func:`min_`), lowered to loop nests by
  :func:`lower`.
- Walks: the functors (:class:`ExprFunctor`, :class:`StmtFunctor` and their visitors and
  mutators), :func:`walk`, :func:`exprs_of`, :func:`mentions`, :func:`substitute`.
- Checks and execution: :func:`verify_func` and :func:`func_problems`; :func:`run_func`,
  the interpreter (numpy semantics, threads and barriers included).
- Legalisation to primitives: :func:`legalize` with the renderer's :class:`Native`
  declaration, :func:`check_legal`; :func:`remove_dead_buffers` drops the intermediates
  nothing reads; :func:`canonical_names` renames a function's
  buffers and variables so equal kernels compare equal.
- Registries a backend extends: :func:`register_scope`, :func:`register_intrinsic`,
  :func:`register_thread_axis`, :func:`register_annotation`.
- Printing for dumps: :func:`format_func`, :func:`format_stmt`, :func:`format_expr`.
"""

from __future__ import annotations

from hetero.core.ir.tir.buffer import Buffer, Partition, flat_index
from hetero.core.ir.tir.canon import canonical_names
from hetero.core.ir.tir.dead import remove_dead_buffers
from hetero.core.ir.tir.compute import (
    IterVar, Reduce, Tensor, compute, lower, max_, min_, placeholder, reduce_axis, sum_,
)
from hetero.core.ir.tir.expr import (
    BOOL, INDEX, Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var, as_expr, binary, call,
    cast, const, eq, ge, gt, le, logical_and, logical_or, lt, maximum, minimum, ne, select, shift_right,
)
from hetero.core.ir.tir.functor import (
    ExprFunctor, ExprMutator, ExprVisitor, StmtExprMutator, StmtExprVisitor, StmtFunctor, StmtMutator,
    StmtVisitor,
)
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.legalize import Native, check_legal, legalize
from hetero.core.ir.tir.printer import format_expr, format_func, format_stmt
from hetero.core.ir.tir.registry import (
    register_annotation, register_intrinsic, register_scope, register_thread_axis,
)
from hetero.core.ir.tir.stmt import (
    Allocate, Barrier, Block, BlockIter, Evaluate, For, ForKind, IfThenElse, IterKind, PrimFunc, Seq,
    Stmt, Store, annotate, seq, stores_in_loops, walk,
)
from hetero.core.ir.tir.verify import func_problems, verify_func
from hetero.core.ir.tir.visit import exprs_of, mentions, substitute, substitute_stmt

__all__ = [
    "BOOL", "INDEX", "Allocate", "Barrier", "Binary", "Block", "BlockIter", "Buffer", "Call", "Cast", "Compare",
    "Const", "Evaluate", "Expr", "ExprFunctor", "ExprMutator", "ExprVisitor", "For", "ForKind", "IfThenElse",
    "IterKind", "IterVar", "Load", "Logical", "Native", "Not", "Partition", "PrimFunc", "Reduce", "Select", "Seq",
    "Stmt", "StmtExprMutator", "StmtExprVisitor", "StmtFunctor", "StmtMutator", "StmtVisitor", "Store", "Tensor",
    "Var", "annotate", "as_expr", "binary", "call", "canonical_names", "cast", "check_legal", "compute",
    "const", "eq", "exprs_of", "flat_index", "format_expr", "format_func", "format_stmt", "func_problems", "ge",
    "gt", "le", "legalize", "logical_and", "logical_or", "lower", "lt", "max_", "maximum", "mentions", "min_",
    "minimum", "ne", "placeholder", "reduce_axis", "register_annotation", "register_intrinsic", "register_scope",
    "register_thread_axis", "remove_dead_buffers", "run_func", "select", "seq", "shift_right", "stores_in_loops",
    "substitute", "substitute_stmt", "sum_", "verify_func", "walk",
]
