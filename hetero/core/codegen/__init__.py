"""Code generation shared by the renderers: LLVM IR emission for every LLVM-based target.

A renderer legalises its function first (:func:`hetero.core.ir.tir.legalize.legalize`),
then emits it with :class:`ExprEmitter` and :class:`StmtEmitter`, subclassed for what
the target does its own way (intrinsic functions, loop hints, allocations, address
spaces, hardware axes): a CPU renderer is one, an NVPTX renderer another.
"""

from hetero.core.codegen.llvm_expr import I1, I8, I64, LLVM_INTRINSICS, ExprEmitter, declare, llvm_type
from hetero.core.codegen.llvm_stmt import LoopID, StmtEmitter

__all__ = ["I1", "I8", "I64", "LLVM_INTRINSICS", "ExprEmitter", "LoopID", "StmtEmitter", "declare",
           "llvm_type"]
