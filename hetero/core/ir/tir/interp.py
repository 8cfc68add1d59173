"""A direct interpreter of tensor IR on numpy arrays.

Slow (a Python loop per iteration) and exact about dtypes: it is how tests check
that a schedule or a lowering keeps a function's meaning, independently of any
renderer. Integer ``div``, ``floordiv`` and ``mod`` are computed on exact integers
(a zero divisor gives 0, ``MIN // -1`` wraps to ``MIN``, as the renderers do);
intrinsics run their registered numpy reference.

Loops run their iterations one after another, except a loop bound to a thread-level
axis (``threadIdx.x``...) whose body holds a ``Barrier``: its iterations are threads
run together, each up to its next barrier, then each on to the one after, so what one
thread stores before a barrier every other reads after it, as on a GPU. A thread's
loop variables and the buffers it allocates are its own. A barrier that some threads
of a loop reach and others do not (they finished, as under a divergent ``if``) is an
error; elsewhere a barrier has nothing to wait for.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np

from hetero.core.ir.tir import registry
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.functor import ExprFunctor, StmtFunctor
from hetero.core.ir.tir.stmt import Barrier, ForKind, PrimFunc, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.errors import InputError


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
    _Interpreter(memory, {}, func.name).visit_stmt(func.body)
    return {b.name: memory[b] for b in func.params}


class _Interpreter(ExprFunctor[Any], StmtFunctor[None]):
    """Runs statements on ``memory`` (a numpy array per live buffer); expressions evaluate
    to numpy scalars of their dtype, loop variables bound in ``env``."""

    def __init__(self, memory: MutableMapping[Buffer, np.ndarray], env: dict[Any, Any], name: str) -> None:
        self.memory = memory
        self.env = env
        self.name = name
        self._together: dict[int, bool] = {}

    def runs_together(self, s: Any) -> bool:
        """Whether the loop ``s`` runs its iterations as threads that meet at barriers."""
        key = id(s)
        if key not in self._together:
            self._together[key] = (s.kind is ForKind.THREAD_BINDING
                                   and registry.thread_axis(s.thread_axis).level == "thread"
                                   and any(isinstance(t, Barrier) for t in walk(s.body)))
        return self._together[key]

    def visit_Store(self, s: Any) -> None:
        index = tuple(int(self.visit_expr(i)) for i in s.indices)
        self.memory[s.buffer][index] = self.visit_expr(s.value)

    def visit_For(self, s: Any) -> None:
        if self.runs_together(s):
            for _ in _Steps(self).visit_For(s):
                pass  # nothing outside this loop's threads waits at its barriers
            return
        for k in range(s.extent):
            self.env[s.var] = np.int64(k)
            self.visit_stmt(s.body)
        self.env.pop(s.var, None)

    def visit_Seq(self, s: Any) -> None:
        for part in s.stmts:
            self.visit_stmt(part)

    def visit_Allocate(self, s: Any) -> None:
        self.memory[s.buffer] = np.zeros(s.buffer.shape, s.buffer.dtype)
        self.visit_stmt(s.body)
        del self.memory[s.buffer]

    def visit_Block(self, s: Any) -> None:
        self.visit_stmt(s.body)

    def visit_IfThenElse(self, s: Any) -> None:
        if self.visit_expr(s.cond):
            self.visit_stmt(s.then)
        elif s.otherwise is not None:
            self.visit_stmt(s.otherwise)

    def visit_Var(self, e: Any) -> Any:
        return self.env[e]

    def visit_Const(self, e: Any) -> Any:
        return e.dtype.type(e.value)

    def visit_Load(self, e: Any) -> Any:
        return self.memory[e.buffer][tuple(int(self.visit_expr(i)) for i in e.indices)]

    def visit_Binary(self, e: Any) -> Any:
        return _binary(e.op, self.visit_expr(e.a), self.visit_expr(e.b), e.dtype)

    def visit_Compare(self, e: Any) -> Any:
        a, b = self.visit_expr(e.a), self.visit_expr(e.b)
        return np.bool_({"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                         "eq": a == b, "ne": a != b}[e.op])

    def visit_Logical(self, e: Any) -> Any:
        a = bool(self.visit_expr(e.a))
        return np.bool_((a and bool(self.visit_expr(e.b))) if e.op == "and"
                        else (a or bool(self.visit_expr(e.b))))

    def visit_Not(self, e: Any) -> Any:
        return np.bool_(not self.visit_expr(e.a))

    def visit_Select(self, e: Any) -> Any:
        return self.visit_expr(e.a) if self.visit_expr(e.cond) else self.visit_expr(e.b)

    def visit_Cast(self, e: Any) -> Any:
        value = self.visit_expr(e.a)
        if e.dtype.kind in "iu" and np.asarray(value).dtype.kind == "f":
            value = np.trunc(value)
        return e.dtype.type(value)

    def visit_Call(self, e: Any) -> Any:
        entry = registry.intrinsic(e.func)
        args = [a.dtype.type(self.visit_expr(a)) for a in e.args]
        with np.errstate(all="ignore"):
            value = entry.reference(*args) if entry.result_dtype else entry.reference(*args, dtype=e.dtype)
        return e.dtype.type(value)

    def visit_Barrier(self, s: Any) -> None:
        """Threads run one after another here, so there is no one to wait for."""

    def visit_Evaluate(self, s: Any) -> None:
        self.visit_expr(s.call)


class _Steps(StmtFunctor[Iterator[None]]):
    """Runs statements as one thread does: each method is a generator that stops at every
    barrier it reaches (``yield``), so a driver can run several threads to it together."""

    def __init__(self, thread: _Interpreter) -> None:
        self.thread = thread

    def visit_Store(self, s: Any) -> Iterator[None]:
        self.thread.visit_Store(s)
        yield from ()

    def visit_Evaluate(self, s: Any) -> Iterator[None]:
        self.thread.visit_Evaluate(s)
        yield from ()

    def visit_Barrier(self, s: Any) -> Iterator[None]:
        yield

    def visit_Seq(self, s: Any) -> Iterator[None]:
        for part in s.stmts:
            yield from self.visit_stmt(part)

    def visit_Block(self, s: Any) -> Iterator[None]:
        yield from self.visit_stmt(s.body)

    def visit_Allocate(self, s: Any) -> Iterator[None]:
        memory = self.thread.memory
        memory[s.buffer] = np.zeros(s.buffer.shape, s.buffer.dtype)
        yield from self.visit_stmt(s.body)
        del memory[s.buffer]

    def visit_IfThenElse(self, s: Any) -> Iterator[None]:
        if self.thread.visit_expr(s.cond):
            yield from self.visit_stmt(s.then)
        elif s.otherwise is not None:
            yield from self.visit_stmt(s.otherwise)

    def visit_For(self, s: Any) -> Iterator[None]:
        env = self.thread.env
        if not self.thread.runs_together(s):
            for k in range(s.extent):
                env[s.var] = np.int64(k)
                yield from self.visit_stmt(s.body)
            env.pop(s.var, None)
            return
        threads = []
        for k in range(s.extent):
            own = _Interpreter(ChainMap({}, self.thread.memory), {**env, s.var: np.int64(k)}, self.thread.name)
            own._together = self.thread._together
            threads.append(_Steps(own).visit_stmt(s.body))
        while threads:
            waiting = []
            for thread in threads:
                try:
                    next(thread)
                    waiting.append(thread)
                except StopIteration:
                    pass
            if waiting and len(waiting) < len(threads):
                raise InputError(
                    f"func {self.thread.name}: {len(waiting)} of the {len(threads)} threads of loop {s.var.name} "
                    f"({s.thread_axis}) wait at a barrier the others never reach (a barrier under a branch "
                    "that not every thread takes)")
            if waiting:
                yield  # the barrier also holds for the threads of enclosing thread loops
            threads = waiting


def _extreme(op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
    """``min``/``max`` by the IR's NaN rule: a NaN operand wins (``a`` first), a tie keeps ``a``."""
    if dtype.kind == "f" and np.isnan(a):
        return a
    if dtype.kind == "f" and np.isnan(b):
        return b
    return b if (b < a if op == "min" else b > a) else a


def _truncated_quotient(a: int, b: int) -> int:
    """C's ``a / b`` on exact integers, toward zero; 0 for a zero divisor (outside the
    primitive's domain: the interpreter stays total)."""
    if b == 0:
        return 0
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_division(op: str, a: int, b: int) -> int:
    """``div`` (truncating), ``floordiv`` or ``mod`` (floored: the remainder takes the
    divisor's sign) on exact integers; 0 for a zero divisor, as the renderers give."""
    if b == 0:
        return 0
    if op == "div":
        return _truncated_quotient(a, b)
    return a // b if op == "floordiv" else a % b


def _wrap(value: int, dtype: np.dtype) -> int:
    """``value`` wrapped to ``dtype``'s two's-complement range (``MIN // -1`` is ``MIN``)."""
    bits = 8 * dtype.itemsize
    value %= 1 << bits
    return value - (1 << bits) if dtype.kind == "i" and value >= 1 << (bits - 1) else value


def _binary(op: str, a: Any, b: Any, dtype: np.dtype) -> Any:
    if dtype.kind in "iu" and op in ("div", "floordiv", "mod"):
        # On Python's exact integers: through float64 an int64 quotient loses its low bits.
        return dtype.type(_wrap(_int_division(op, int(a), int(b)), dtype))
    with np.errstate(all="ignore"):
        if op == "add":
            r = a + b
        elif op == "sub":
            r = a - b
        elif op == "mul":
            r = a * b
        elif op == "div":
            r = a / b
        elif op == "floordiv":
            r = a // b
        elif op == "mod":
            r = a % b
        elif op == "tdiv":
            r = _truncated_quotient(int(a), int(b))
        elif op == "trem":
            r = np.fmod(a, b) if dtype.kind == "f" else int(a) - int(b) * _truncated_quotient(int(a), int(b))
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
    return dtype.type(_wrap(r, dtype) if isinstance(r, int) else r)
