"""The tensor IR: buffers, expressions, loop statements, functions, and compute definitions.

One IR for every codegen plugin (ARCHITECTURE.md, rule 4): the LLVM, PTX and HLS C++
renderers differ, the IR does not.
"""

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import (
    IterVar, Reduce, Tensor, compute, lower, max_, min_, placeholder, reduce_axis, sum_,
)
from hetero.core.ir.tir.expr import (
    Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var, as_expr, call,
    cast, const, eq, ge, gt, le, logical_and, logical_or, lt, maximum, minimum, ne, select,
    shift_right,
)
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import (
    Allocate, Block, For, ForKind, IfThenElse, PrimFunc, Seq, Stmt, Store, seq, walk,
)
from hetero.core.ir.tir.verify import func_problems, verify_func

__all__ = [
    "Allocate", "Binary", "Block", "Buffer", "Call", "Cast", "Compare", "Const", "Expr", "For",
    "ForKind", "IfThenElse", "IterVar", "Load", "Logical", "Not", "PrimFunc", "Reduce", "Select",
    "Seq", "Stmt", "Store", "Tensor", "Var", "as_expr", "call", "cast", "compute", "const", "eq",
    "func_problems", "ge", "gt", "le", "logical_and", "logical_or", "lower", "lt", "max_",
    "maximum", "min_", "minimum", "ne", "placeholder", "reduce_axis", "run_func", "select", "seq",
    "shift_right", "sum_", "verify_func", "walk",
]
