"""Lowering RNN, LSTM and GRU (meaning: :mod:`hetero.core.ir.ops.rnn`) as a time loop.

Three kinds of stage:

1. The input projection of every step at once, ``X_t W^T + Wb (+ Rb)``, one compute
   stage with a reduction (the CPU schedules tile it like any MatMul); the recurrent
   bias is folded in wherever it is only added (all but GRU's ``h`` gate with
   ``linear_before_reset``).
2. The recurrence, an :func:`~hetero.core.ir.tir.compute.extern` stage walking the
   steps serially. Its buffer ``S`` is ``[directions, seq + 2 + gates, batch, hidden]``:
   rows ``0 .. seq-1`` receive each step's hidden state at its time index, row ``seq``
   is the running hidden state, row ``seq + 1`` the running cell state (LSTM; GRU's
   ``r * H`` before its ``h`` gate's product), and the last ``gates`` rows hold the
   step's gates. Each step per batch entry: the recurrent product into the gate rows
   (one row of ``R^T`` scaled by each hidden unit and added along the gate row, a
   vectorized loop; ``R^T`` is its own stage, computed once when ``R`` is constant),
   then the gate activations and the state update element by element. The directions
   are written out one after the other (each has its own activations), the batch
   entries are independent, and ``sequence_lens`` is read at run time: an entry past
   its length skips the step, and the reverse direction starts at its last valid step.
3. ``Y``, ``Y_h`` (and ``Y_c``) read from ``S`` in the node's layout, zero where a step
   did not run, rounded to the output dtype (the state is kept in float32 for narrower
   floats).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.ir.ops.rnn import DIRECTIONS, FUNCTIONS, GATES, activation_list
from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import Tensor, extern, reduce_axis, sum_
from hetero.core.ir.tir.expr import (
    Expr, Var, call, cast, const, gt, lt, maximum, minimum, select,
)
from hetero.core.ir.tir.stmt import Allocate, For, ForKind, IfThenElse, Stmt, Store, seq
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import UNARY, Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers

_INT64 = np.dtype("int64")
_ZERO = const(0, _INT64)


def _activation(name: str, alpha: float, beta: float) -> Callable[[Expr], Expr]:
    """The activation ``name`` as a function of one expression."""
    if name == "Affine":
        return lambda x: const(alpha, x.dtype) * x + const(beta, x.dtype)
    if name == "ScaledTanh":
        return lambda x: const(alpha, x.dtype) * call("tanh", const(beta, x.dtype) * x)
    fn = UNARY[name]
    params = {"alpha": alpha, "beta": beta}
    return lambda x: fn(x, params)


def lower_recurrent(op: str, inputs: list[Tensor | None], attrs: dict[str, Any],
                    out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The input projection, the serial time loop, then the outputs (see the module doc)."""
    args = list(inputs) + [None] * (8 - len(inputs))
    x, w, r, b, lens, h0, c0, p = args
    assert x is not None and w is not None and r is not None
    dtype, acc = x.dtype, accumulator_dtype(x.dtype)
    batch_first = attrs["layout"] == 1
    steps_n, batch, size = (x.shape[1], x.shape[0], x.shape[2]) if batch_first else x.shape
    d_count, n, gates = DIRECTIONS[attrs["direction"]], attrs["hidden_size"], GATES[op]
    lbr = op == "GRU" and attrs["linear_before_reset"]
    name = names[0]
    h_row, c_row, g_row = steps_n, steps_n + 1, steps_n + 2
    clip = attrs["clip"]

    def state_at(t: Tensor, d: Expr, bb: Expr, j: Expr) -> Expr:
        return t.buffer[(bb, d, j) if batch_first else (d, bb, j)]

    k = reduce_axis(size, f"{name}_k")

    def projection(idx: Indices) -> Expr:
        d, t, bb, g = idx
        xv = x[(bb, t, k.var) if batch_first else (t, bb, k.var)]
        y = sum_(cast(xv, acc) * cast(w[d, g, k.var], acc), k)
        if b is not None:
            rb = cast(b[d, g + gates * n], acc)
            if lbr:  # the h gate's recurrent bias is added inside the reset product
                rb = select(lt(g, const(2 * n, _INT64)), rb, const(0.0, acc))
            y = y + cast(b[d, g], acc) + rb
        return y

    xw = compute_nd((d_count, steps_n, batch, gates * n), projection, f"{name}_xw")
    # R transposed (a constant R's is computed once, when compiling).
    r_t = compute_nd((d_count, n, gates * n), lambda i: cast(r[i[0], i[2], i[1]], acc), f"{name}_rt")
    acts = activation_list(attrs)
    per = FUNCTIONS[op]

    def clipped(v: Expr) -> Expr:
        if math.isinf(clip):
            return v
        return minimum(maximum(v, const(-clip, acc)), const(clip, acc))

    def build(s_buf: Buffer) -> Stmt:
        def direction(dn: int) -> Stmt:
            d = const(dn, _INT64)
            fns = [_activation(*a) for a in acts[dn * per:(dn + 1) * per]]
            reverse = attrs["direction"] == "reverse" or dn == 1
            f_act, g_act = fns[0], fns[1] if per > 1 else None

            def act(fn: Callable[[Expr], Expr], v: Expr) -> Expr:
                return fn(clipped(v))

            def S(row: Any, bb: Expr, j: Expr) -> Any:
                return s_buf[d, row, bb, j]

            bb, j, st = Var(f"{name}_b{dn}"), Var(f"{name}_j{dn}"), Var(f"{name}_s{dn}")
            init = [Store(s_buf, (d, const(h_row, _INT64), bb, j),
                          const(0.0, acc) if h0 is None else cast(state_at(h0, d, bb, j), acc))]
            if op == "LSTM":
                init.append(Store(s_buf, (d, const(c_row, _INT64), bb, j),
                                  const(0.0, acc) if c0 is None else cast(state_at(c0, d, bb, j), acc)))
            start = For(bb, batch, For(j, n, seq(*init)))

            if lens is None:
                length: Expr = const(steps_n, _INT64)
            else:
                length = maximum(minimum(cast(lens.buffer[bb], _INT64), const(steps_n, _INT64)), _ZERO)
            t = (length - 1 - st) if reverse else st
            t = maximum(minimum(t, const(steps_n - 1, _INT64)), _ZERO)

            def product(gate_lo: int, gate_hi: int, source_row: int, base: Callable[[Expr], Expr],
                        tag: str) -> Stmt:
                """Gate rows ``gate_lo .. gate_hi - 1`` = base + S[source_row] @ R^T, as one
                scaled row of R^T added per hidden unit, so the innermost loop walks the
                gate row and R^T's row contiguously (and vectorizes)."""
                q, jj, q2, jj2, kk = (Var(f"{name}_{tag}{v}{dn}") for v in ("q", "j", "q_", "j_", "k"))
                unit = Buffer(f"{name}_{tag}h{dn}", (1,), acc, "local")

                def row(qv: Expr) -> Expr:
                    return const(g_row + gate_lo, _INT64) + qv

                init = For(q, gate_hi - gate_lo, For(jj, n, Store(
                    s_buf, (d, row(q), bb, jj), base((q + gate_lo) * n + jj))))
                axpy = For(q2, gate_hi - gate_lo, For(jj2, n, Store(
                    s_buf, (d, row(q2), bb, jj2),
                    s_buf[d, row(q2), bb, jj2] + unit[_ZERO] * r_t.buffer[d, kk, (q2 + gate_lo) * n + jj2]),
                    ForKind.VECTORIZED))
                return seq(init, For(kk, n, Allocate(unit, seq(
                    Store(unit, (_ZERO,), s_buf[d, const(source_row, _INT64), bb, kk]), axpy))))

            def from_xw(g: Expr) -> Expr:
                return xw.buffer[d, t, bb, g]

            def rb_only(g: Expr) -> Expr:
                return const(0.0, acc) if b is None else cast(b.buffer[d, g + gates * n], acc)

            def gate(q: int) -> Any:
                return S(g_row + q, bb, j)

            def put(row: int, value: Expr) -> Stmt:
                return Store(s_buf, (d, const(row, _INT64), bb, j), value)

            def out_h(value_row: int) -> list[Stmt]:
                return [Store(s_buf, (d, t, bb, j), S(value_row, bb, j))]

            if op == "RNN":
                steps = [product(0, 1, h_row, from_xw, "p"),
                         For(j, n, seq(put(h_row, act(f_act, gate(0))), *out_h(h_row)))]
            elif op == "LSTM":
                h_act = fns[2]
                peep = [(const(0.0, acc) if p is None else cast(p.buffer[d, j + q * n], acc))
                        for q in range(3)]
                c_prev = S(c_row, bb, j)
                forget = (const(1.0, acc) - gate(0) if attrs["input_forget"]
                          else act(f_act, gate(2) + peep[2] * c_prev))
                update = [
                    put(g_row + 0, act(f_act, gate(0) + peep[0] * c_prev)),
                    put(g_row + 2, forget),
                    put(g_row + 3, act(g_act, gate(3))),
                    put(c_row, gate(2) * c_prev + gate(0) * gate(3)),
                    put(g_row + 1, act(f_act, gate(1) + peep[1] * S(c_row, bb, j))),
                    put(h_row, gate(1) * h_act(S(c_row, bb, j))),
                ]
                steps = [product(0, 4, h_row, from_xw, "p"), For(j, n, seq(*update, *out_h(h_row)))]
            else:
                h_prev = S(h_row, bb, j)
                zr = [put(g_row + 0, act(f_act, gate(0))), put(g_row + 1, act(f_act, gate(1)))]
                if lbr:
                    steps = [product(0, 3, h_row, lambda g: select(lt(g, const(2 * n, _INT64)),
                                                                  from_xw(g), rb_only(g)), "p")]
                    candidate = act(g_act, from_xw(j + 2 * n) + gate(1) * gate(2))
                    steps.append(For(j, n, seq(*zr, put(g_row + 2, candidate))))
                else:
                    steps = [product(0, 2, h_row, from_xw, "p"),
                             For(j, n, seq(*zr, put(c_row, gate(1) * h_prev))),
                             product(2, 3, c_row, from_xw, "c")]
                    steps.append(For(j, n, put(g_row + 2, act(g_act, gate(2)))))
                new_h = (const(1.0, acc) - gate(0)) * gate(2) + gate(0) * h_prev
                steps.append(For(j, n, seq(put(h_row, new_h), *out_h(h_row))))
            body = IfThenElse(lt(st, length), seq(*steps)) if lens is not None else seq(*steps)
            return seq(start, For(st, steps_n, For(bb, batch, body)))

        return seq(*(direction(dn) for dn in range(d_count)))

    state = extern((d_count, steps_n + 2 + gates, batch, n), acc, f"{name}_state",
                   tuple(t for t in (xw, r_t, w, r, b, lens, h0, c0, p) if t is not None), build)

    def y_value(idx: Indices) -> Expr:
        bb, t, d, j = idx if batch_first else (idx[2], idx[0], idx[1], idx[3])
        value = state[d, t, bb, j]
        if lens is not None:
            value = select(lt(t, cast(lens[bb], _INT64)), value, const(0.0, acc))
        return cast(value, dtype)

    def final(row: int) -> Callable[[Indices], Expr]:
        def value(idx: Indices) -> Expr:
            bb, d, j = idx if batch_first else (idx[1], idx[0], idx[2])
            v = state[d, const(row, _INT64), bb, j]
            if lens is not None:
                v = select(gt(cast(lens[bb], _INT64), _ZERO), v, const(0.0, acc))
            return cast(v, dtype)

        return value

    outs = [compute_nd(out_types[0].shape, y_value, names[0]),
            compute_nd(out_types[1].shape, final(h_row), names[1])]
    if op == "LSTM":
        outs.append(compute_nd(out_types[2].shape, final(c_row), names[2]))
    return outs


def _lowering(op: str) -> Callable[..., list[Tensor]]:
    def lower(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
        return lower_recurrent(op, inputs, attrs, out_types, names)

    return lower


for _op in ("RNN", "LSTM", "GRU"):
    lowers(_op)(_lowering(_op))
