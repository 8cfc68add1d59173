"""A direct interpreter of tensor IR on numpy arrays.

Slow (a Python loop per iteration) and exact about dtypes: it is how tests check
that a schedule or a lowering keeps a function's meaning, independently of any
renderer.
"""

from __future__ import annotations

from collections.abc import Mapping
import math
from typing import Any

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Binary, Call, Cast, Compare, Const, Expr, Load, Logical, Not, Select, Var
from hetero.core.ir.tir.stmt import Allocate, Block, For, IfThenElse, PrimFunc, Seq, Stmt, Store
from hetero.core.ir.tir.verify import verify_func
from hetero.errors import InputError

_INTRINSICS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round_even": np.rint,
    "expm1": np.expm1, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": lambda x: type(x)(math.erf(float(x))),
    "fence": lambda x: x,
}


def run_func(func: PrimFunc, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``func``: ``arrays`` gives every parameter by name (outputs are written in place
    into copies); returns every parameter's final array by name."""
    verify_func(func)
    memory: dict[Buffer, np.ndarray] = {}
    for b in func.params:
        if b.name not in arrays:
            raise InputError(f"func {func.name}: no array for parameter {b.name}")
        a = np.array(arrays[b.name], dtype=b.dtype, copy=True)
        if a.shape != b.shape:
            raise InputError(f"func {func.name}: {b.name} must have shape {b.shape}, got {a.shape}")
        memory[b] = a
    _exec(func.body, memory, {})
    return {b.name: memory[b] for b in func.params}


def _exec(s: Stmt, memory: dict[Buffer, np.ndarray], env: dict[Var, Any]) -> None:
    if isinstance(s, Store):
        index = tuple(int(_eval(i, memory, env)) for i in s.indices)
        memory[s.buffer][index] = _eval(s.value, memory, env)
    elif isinstance(s, For):
        for k in range(s.extent):
            env[s.var] = np.int64(k)
            _exec(s.body, memory, env)
        env.pop(s.var, None)
    elif isinstance(s, Seq):
        for part in s.stmts:
            _exec(part, memory, env)
    elif isinstance(s, Allocate):
        memory[s.buffer] = np.zeros(s.buffer.shape, s.buffer.dtype)
        _exec(s.body, memory, env)
        del memory[s.buffer]
    elif isinstance(s, Block):
        _exec(s.body, memory, env)
    elif isinstance(s, IfThenElse):
        if _eval(s.cond, memory, env):
            _exec(s.then, memory, env)
        elif s.otherwise is not None:
            _exec(s.otherwise, memory, env)


def _eval(e: Expr, memory: dict[Buffer, np.ndarray], env: dict[Var, Any]) -> Any:
    if isinstance(e, Var):
        return env[e]
    if isinstance(e, Const):
        return e.dtype.type(e.value)
    if isinstance(e, Load):
        return memory[e.buffer][tuple(int(_eval(i, memory, env)) for i in e.indices)]
    if isinstance(e, Binary):
        return _binary(e.op, _eval(e.a, memory, env), _eval(e.b, memory, env), e.dtype)
    if isinstance(e, Compare):
        a, b = _eval(e.a, memory, env), _eval(e.b, memory, env)
        return np.bool_({"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                         "eq": a == b, "ne": a != b}[e.op])
    if isinstance(e, Logical):
        a = bool(_eval(e.a, memory, env))
        return np.bool_((a and bool(_eval(e.b, memory, env))) if e.op == "and"
                        else (a or bool(_eval(e.b, memory, env))))
    if isinstance(e, Not):
        return np.bool_(not _eval(e.a, memory, env))
    if isinstance(e, Select):
        return _eval(e.a, memory, env) if _eval(e.cond, memory, env) else _eval(e.b, memory, env)
    if isinstance(e, Cast):
        value = _eval(e.a, memory, env)
        if e.dtype.kind in "iu" and np.asarray(value).dtype.kind == "f":
            value = np.trunc(value)
        return e.dtype.type(value)
    if isinstance(e, Call) and e.func == "bitcast":
        return np.asarray(_eval(e.args[0], memory, env), e.args[0].dtype).view(e.dtype)[()]
    if isinstance(e, Call):
        return e.dtype.type(_INTRINSICS[e.func](*(_eval(a, memory, env) for a in e.args)))
    raise TypeError(f"cannot interpret {type(e).__name__}")


def _extreme(op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
    """``min``/``max`` by the IR's NaN rule: a NaN operand wins (``a`` first), a tie keeps ``a``."""
    if dtype.kind == "f" and np.isnan(a):
        return a
    if dtype.kind == "f" and np.isnan(b):
        return b
    return b if (b < a if op == "min" else b > a) else a


def _binary(op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
    with np.errstate(all="ignore"):
        if op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op == "mul":
            r = a * b
        elif op == "div":
            r = (a / b) if dtype.kind == "f" else (np.trunc(np.float64(a) / np.float64(b)) if b else 0)
        elif op == "floordiv":
            r = a // b
        elif op == "mod":
            r = a % b
        elif op in ("min", "max"):
            r = _extreme(op, a, b, dtype)
        elif op == "shr":
            # Python's shift on the exact integers is floor(a / 2**b) for any b >= 0; a
            # negative amount reads as a huge unsigned one, as the renderers read it.
            r = int(a) >> (int(b) if b >= 0 else 1 << 16)
        elif op == "shl":
            # Python's exact shift, wrapped to the dtype below; 0 past the bit width.
            r = (int(a) << int(b)) % (1 << 8 * dtype.itemsize) if 0 <= b < 8 * dtype.itemsize else 0
            if dtype.kind == "i" and r >= 1 << (8 * dtype.itemsize - 1):
                r -= 1 << 8 * dtype.itemsize
        elif op in ("bit_and", "bit_or", "bit_xor"):
            r = {"bit_and": np.bitwise_and, "bit_or": np.bitwise_or, "bit_xor": np.bitwise_xor}[op](a, b)
        else:
            r = a ** b
    return dtype.type(r)
