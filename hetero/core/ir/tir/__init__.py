"""The tensor IR: buffers, expressions, loop statements, functions, and compute definitions.

One IR for every codegen plugin (ARCHITECTURE.md, rule 4): the LLVM, PTX and HLS C++
renderers differ, the IR does not. Passes and renderers walk it with the functors of
:mod:`~hetero.core.ir.tir.functor`; plugins add memory scopes, intrinsics, thread axes
and annotation keys through :mod:`~hetero.core.ir.tir.registry`.
"""

from hetero.core.ir.tir.buffer import Buffer, Partition
from hetero.core.ir.tir.compute import (
    IterVar, Reduce, Tensor, compute, lower, max_, min_, placeholder, reduce_axis, sum_,
)
from hetero.core.ir.tir.expr import (
    Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var, as_expr, call,
    cast, const, eq, ge, gt, le, logical_and, logical_or, lt, maximum, minimum, ne, select,
    shift_right,
)
from hetero.core.ir.tir.functor import (
    ExprFunctor, ExprMutator, ExprVisitor, StmtExprMutator, StmtExprVisitor, StmtFunctor, StmtMutator,
    StmtVisitor,
)
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.registry import (
    register_annotation, register_intrinsic, register_scope, register_thread_axis,
)
from hetero.core.ir.tir.stmt import (
    Allocate, Barrier, Block, BlockIter, Evaluate, For, ForKind, IfThenElse, IterKind, PrimFunc, Seq,
    Stmt, Store, annotate, seq, walk,
)
from hetero.core.ir.tir.verify import func_problems, verify_func

__all__ = [
    "Allocate", "Barrier", "Binary", "Block", "BlockIter", "Buffer", "Call", "Cast", "Compare",
    "Const", "Evaluate", "Expr", "ExprFunctor", "ExprMutator", "ExprVisitor", "For", "ForKind",
    "IfThenElse", "IterKind", "IterVar", "Load", "Logical", "Not", "Partition", "PrimFunc", "Reduce",
    "Select", "Seq", "Stmt", "StmtExprMutator", "StmtExprVisitor", "StmtFunctor", "StmtMutator",
    "StmtVisitor", "Store", "Tensor", "Var", "annotate", "as_expr", "call", "cast", "compute", "const",
    "eq", "func_problems", "ge", "gt", "le", "logical_and", "logical_or", "lower", "lt", "max_",
    "maximum", "min_", "minimum", "ne", "placeholder", "reduce_axis", "register_annotation",
    "register_intrinsic", "register_scope", "register_thread_axis", "run_func", "select", "seq",
    "shift_right", "sum_", "verify_func", "walk",
]
