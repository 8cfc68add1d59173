"""Compute definitions: describe what each output element is, not how to loop.

In the manner of TVM's tensor expressions::

    X = placeholder((n, k), "float32", "X")
    W = placeholder((k, m), "float32", "W")
    r = reduce_axis(k, "r")
    Y = compute((n, m), lambda i, j: maximum(sum_(X[i, r] * W[r, j], r), 0.0), "Y")
    func = lower("dense_relu", [X, W], [Y])

A compute body may wrap its reduction in elementwise work (bias, activation,
residual add): :func:`lower` keeps the reduction in a local accumulator and applies
the epilogue as it stores, so the epilogue never round-trips through memory. Stages
marked ``inline=True`` are substituted into their consumers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
import inspect
from typing import Any

import numpy as np

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.expr import Expr, ExprLike, Load, Var, as_expr, binary, const
from hetero.core.ir.tir.stmt import Allocate, Block, BlockIter, For, IterKind, PrimFunc, Stmt, Store, seq
from hetero.core.ir.tir.visit import map_expr, map_stmt, substitute

COMBINERS = ("sum", "max", "min", "prod")
# The binary op that folds each combiner's next term into its accumulator.
_COMBINER_OPS = {"sum": "add", "prod": "mul"}


@dataclass(frozen=True, eq=True)
class IterVar:
    """A reduction axis: a variable ranging over ``range(extent)``."""

    var: Var
    extent: int


@dataclass(frozen=True, eq=True)
class Reduce(Expr):
    """``combiner`` of ``source`` over ``axes``, starting from ``init``."""

    combiner: str
    source: Expr
    axes: tuple[IterVar, ...]
    init: Expr
    dtype: np.dtype


class Tensor:
    """The result of a stage: a placeholder (an input), a compute definition, or a stage
    written as statements (:func:`extern`, whose ``stmt`` writes the buffer)."""

    def __init__(self, buffer: Buffer, axes: tuple[Var, ...] = (), body: Expr | None = None,
                 inline: bool = False, inputs: tuple[Tensor, ...] = (),
                 stmt: Stmt | None = None) -> None:
        self.buffer = buffer
        self.axes = axes
        self.body = body
        self.inline = inline
        self.inputs = inputs
        self.stmt = stmt

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.buffer.shape

    @property
    def dtype(self) -> np.dtype:
        return self.buffer.dtype

    @property
    def is_placeholder(self) -> bool:
        return self.body is None and self.stmt is None

    def __getitem__(self, indices: Any) -> Load:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(f"{self.name} has rank {len(self.shape)}, indexed with {len(indices)}")
        load = self.buffer[tuple(i.var if isinstance(i, IterVar) else i for i in indices)]
        _CURRENT_READS.append(self)
        return load

    def __repr__(self) -> str:
        return f"Tensor({self.name}: {self.dtype.name}{list(self.shape)})"


# Tensors read while a compute body is being built: a compute records its producers.
_CURRENT_READS: list[Tensor] = []


def placeholder(shape: Sequence[int], dtype: Any, name: str) -> Tensor:
    """An input tensor of the function being defined."""
    return Tensor(Buffer(name, tuple(shape), np.dtype(dtype)))


def reduce_axis(extent: int, name: str) -> IterVar:
    """A reduction axis over ``range(extent)``."""
    return IterVar(Var(name), int(extent))


def compute(shape: Sequence[int], fcompute: Callable[..., ExprLike], name: str,
            dtype: Any = None, inline: bool = False) -> Tensor:
    """A tensor whose element at ``idx`` is ``fcompute(*idx)``.

    The loop variables take the names of ``fcompute``'s parameters.
    """
    params = list(inspect.signature(fcompute).parameters)
    if len(params) != len(shape):
        raise ValueError(f"compute {name}: {len(shape)}-d shape but fcompute takes {len(params)} indices")
    axes = tuple(Var(f"{p}") for p in params)
    start = len(_CURRENT_READS)
    body = as_expr(fcompute(*axes), None if dtype is None else np.dtype(dtype))
    reads = tuple(dict.fromkeys(_CURRENT_READS[start:]))
    del _CURRENT_READS[start:]
    out_dtype = np.dtype(dtype) if dtype is not None else body.dtype
    if body.dtype != out_dtype:
        raise TypeError(f"compute {name}: body is {body.dtype}, declared {out_dtype}")
    return Tensor(Buffer(name, tuple(shape), out_dtype), axes, body, inline, reads)


def extern(shape: Sequence[int], dtype: Any, name: str, inputs: Sequence[Tensor],
           build: Callable[[Buffer], Stmt]) -> Tensor:
    """A stage written as statements: ``build(out)`` returns the loop nest that fills the
    buffer ``out`` from ``inputs``' buffers, for what one element-wise definition cannot
    say in linear time (a scatter: copy, then update in order; a running sum). Such a
    stage is never inlined into its consumers; stages it reads may be inlined into it.
    """
    buffer = Buffer(name, tuple(shape), np.dtype(dtype))
    return Tensor(buffer, inputs=tuple(inputs), stmt=build(buffer))


def _reduce(combiner: str, source: ExprLike, axis: IterVar | Sequence[IterVar],
            init: ExprLike | None) -> Reduce:
    src = as_expr(source)
    axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
    if init is None:
        init = {"sum": 0, "prod": 1, "max": _lowest(src.dtype), "min": _highest(src.dtype)}[combiner]
    return Reduce(combiner, src, axes, as_expr(init, src.dtype), src.dtype)


def _lowest(dtype: np.dtype) -> float | int:
    return -np.inf if dtype.kind == "f" else int(np.iinfo(dtype).min)


def _highest(dtype: np.dtype) -> float | int:
    return np.inf if dtype.kind == "f" else int(np.iinfo(dtype).max)


def sum_(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None) -> Reduce:
    return _reduce("sum", source, axis, init)


def max_(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None) -> Reduce:
    return _reduce("max", source, axis, init)


def prod_(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None) -> Reduce:
    return _reduce("prod", source, axis, init)


def min_(source: ExprLike, axis: IterVar | Sequence[IterVar], init: ExprLike | None = None) -> Reduce:
    return _reduce("min", source, axis, init)


def lower(name: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> PrimFunc:
    """Lower the stages that ``outputs`` need into one :class:`PrimFunc`.

    Parameters are ``inputs`` then ``outputs``. Inline stages are substituted into
    their consumers; other intermediate stages get a buffer allocated around the
    stages after them. Each remaining stage becomes a :class:`Block` of its name, with
    its definition's iterators: the output's axes spatial, its reduction axes reductions.
    """
    order = stages(outputs)
    missing = [t.name for t in order if t.is_placeholder and t not in inputs]
    if missing:
        raise ValueError(f"lower {name}: placeholders {missing} are not among the inputs")
    inlined = {t.buffer: t for t in order if t.inline and t.body is not None and t not in outputs}
    kept = [t for t in order if not t.is_placeholder and t.buffer not in inlined]
    body = seq(*(_lower_stage(t, inlined) for t in kept))
    for t in reversed(kept):
        if t not in outputs:
            body = _allocate_around(t.buffer, body)
    return PrimFunc(name, tuple(t.buffer for t in inputs) + tuple(t.buffer for t in outputs), body)


def _allocate_around(buffer: Buffer, body: Stmt) -> Stmt:
    return Allocate(buffer, body)


def stages(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor ``outputs`` depend on, placeholders included, producers first."""
    order: list[Tensor] = []
    seen: set[int] = set()

    def visit(t: Tensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for i in t.inputs:
            visit(i)
        order.append(t)

    for t in outputs:
        visit(t)
    return order


def _inline(expr: Expr, inlined: dict[Buffer, Tensor]) -> Expr:
    def replace(e: Expr) -> Expr | None:
        if isinstance(e, Load) and e.buffer in inlined:
            producer = inlined[e.buffer]
            assert producer.body is not None
            body = _inline(producer.body, inlined)
            return substitute(body, dict(zip(producer.axes, e.indices)))
        return None

    return map_expr(expr, replace)


def _lower_stage(t: Tensor, inlined: dict[Buffer, Tensor]) -> Block:
    if t.stmt is not None:
        return Block(t.name, map_stmt(t.stmt, expr_fn=lambda e: _inline(e, inlined)
                                      if isinstance(e, Load) else None), t.buffer)
    assert t.body is not None
    body = _inline(t.body, inlined)
    reduces: list[Reduce] = []

    def hoist(e: Expr) -> Expr | None:
        if isinstance(e, Reduce):
            reduces.append(e)
            acc = Buffer(f"{t.name}_acc{len(reduces) - 1 or ''}", (1,), e.dtype, "local")
            return Load(acc, (const(0, "int64"),), e.dtype)
        return None

    value = map_expr(body, hoist)
    inner: Stmt = Store(t.buffer, t.axes, value)
    for k in reversed(range(len(reduces))):
        r = reduces[k]
        acc = Buffer(f"{t.name}_acc{k or ''}", (1,), r.dtype, "local")
        zero = (const(0, "int64"),)
        update: Stmt = Store(acc, zero, binary(_COMBINER_OPS.get(r.combiner, r.combiner), acc[0], r.source))
        for axis in reversed(r.axes):
            update = For(axis.var, axis.extent, update)
        inner = Allocate(acc, seq(Store(acc, zero, r.init), update, inner))
    for var, extent in reversed(list(zip(t.axes, t.shape))):
        inner = For(var, extent, inner)
    iters = tuple(BlockIter(v, n, IterKind.SPATIAL) for v, n in zip(t.axes, t.shape))
    iters += tuple(BlockIter(a.var, a.extent, IterKind.REDUCTION) for r in reduces for a in r.axes)
    return Block(t.name, inner, t.buffer, iters)
