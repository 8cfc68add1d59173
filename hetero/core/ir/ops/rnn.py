"""Recurrent layers: RNN, LSTM and GRU, ONNX's three recurrent ops.

Canonical form (the frontend resolves the rest): ONNX's ``layout`` as it is (0: ``X`` is
``[seq, batch, input]``, ``Y`` ``[seq, directions, batch, hidden]``, the states
``[directions, batch, hidden]``; 1: batch first, ``[batch, seq, input]``,
``[batch, seq, directions, hidden]`` and ``[batch, directions, hidden]``), and explicit
activations: ``activations`` holds
one name per function and direction, comma-separated (RNN ``f``; LSTM ``f,g,h``; GRU
``f,g``; a bidirectional layer lists the forward direction's first), and
``activation_alpha`` and ``activation_beta`` one value per listed function, the
defaults of ONNX's ops of the same names filled in. ``clip`` bounds every gate's input
to ``[-clip, clip]`` before its activation (infinity: no clip); as in onnxruntime, the
LSTM cell state that ``h`` is applied to is not clipped.

Gate order is ONNX's: LSTM ``i, o, f, c`` (peepholes ``P``: ``i, o, f``), GRU ``z, r, h``.
``sequence_lens`` (int32, one per batch entry, each in ``[0, seq]``) is read at run time
as onnxruntime reads it: batch entry ``b`` runs ``sequence_lens[b]`` steps (the reverse
direction from its last valid step back to 0), ``Y`` is zero past them, and ``Y_h``,
``Y_c`` hold the state after the last step run (zero for an entry of length 0).
The references compute in float64 and round once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.core.ir.opdef import Attr, OpDef, index_problem, register
from hetero.core.ir.ops.common import require_float, require_rank, same_dtype
from hetero.core.ir.types import TensorType
from hetero.errors import InputError, OpAttributeError, ShapeError

_ACC = np.float64
_INT32 = np.dtype("int32")

#: The gates of each family, and how many activation functions one direction takes.
GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}
FUNCTIONS = {"RNN": 1, "LSTM": 3, "GRU": 2}
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "LSTM": ("Sigmoid", "Tanh", "Tanh"),
                       "GRU": ("Sigmoid", "Tanh")}
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


#: Each activation ONNX lists for its recurrent ops, as ``(x, alpha, beta) -> y``.
ACTIVATIONS: dict[str, Any] = {
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0.0),
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0.0, 1.0),
    "Elu": lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0))),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Softplus": lambda x, a, b: _softplus(x),
}


def activation_list(attrs: dict[str, Any]) -> list[tuple[str, float, float]]:
    """The node's activations as ``(name, alpha, beta)``, forward direction first."""
    names = attrs["activations"].split(",")
    return list(zip(names, attrs["activation_alpha"], attrs["activation_beta"]))


def _complete(op: str):
    def complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["hidden_size"] is None and ins[2] is not None:
            attrs["hidden_size"] = ins[2].shape[-1]
        directions = DIRECTIONS.get(attrs["direction"], 1)
        if attrs["activations"] is None:
            attrs["activations"] = ",".join(DEFAULT_ACTIVATIONS[op] * directions)
        count = len(attrs["activations"].split(","))
        for key in ("activation_alpha", "activation_beta"):
            if attrs[key] is None:
                attrs[key] = (0.0,) * count
        return attrs

    return complete


def _infer(op: str):
    gates, functions = GATES[op], FUNCTIONS[op]

    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        x, w, r = ins[0], ins[1], ins[2]
        dtype = same_dtype([t for k, t in enumerate(ins) if k != 4], f"{op} inputs")
        require_float(x, f"{op} input X")
        if attrs["direction"] not in DIRECTIONS:
            raise OpAttributeError(f"{op} direction must be one of {list(DIRECTIONS)}, "
                                   f"got {attrs['direction']!r}")
        d, h = DIRECTIONS[attrs["direction"]], attrs["hidden_size"]
        require_rank(x, 3, f"{op} input X")
        if attrs["layout"] not in (0, 1):
            raise OpAttributeError(f"{op} layout must be 0 or 1, got {attrs['layout']}")
        batch_first = attrs["layout"] == 1
        seq, batch, size = (x.shape[1], x.shape[0], x.shape[2]) if batch_first else x.shape
        state = (batch, d, h) if batch_first else (d, batch, h)
        expected = {1: (d, gates * h, size), 2: (d, gates * h, h), 3: (d, 2 * gates * h),
                    4: (batch,), 5: state, 6: state, 7: (d, 3 * h)}
        names = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")
        for k, t in enumerate(ins):
            if k in expected and t is not None and t.shape != expected[k]:
                raise ShapeError(f"{op} input {names[k]} must have shape {list(expected[k])} "
                                 f"(hidden_size {h}, {d} direction(s)), got {t}")
        if ins[4:5] and ins[4] is not None and ins[4].dtype != _INT32:
            raise ShapeError(f"{op} input sequence_lens must be int32, got {ins[4]}")
        names_list = attrs["activations"].split(",")
        if len(names_list) != functions * d:
            raise OpAttributeError(f"{op} takes {functions * d} activation(s) for {d} "
                                   f"direction(s), got {names_list}")
        unknown = [a for a in names_list if a not in ACTIVATIONS]
        if unknown:
            raise OpAttributeError(f"{op} activation {unknown[0]!r} is not one of "
                                   f"{sorted(ACTIVATIONS)}")
        for key in ("activation_alpha", "activation_beta"):
            if len(attrs[key]) != len(names_list):
                raise OpAttributeError(f"{op} {key} needs one value per activation "
                                       f"({len(names_list)}), got {list(attrs[key])}")
        if not attrs["clip"] > 0:
            raise OpAttributeError(f"{op} clip must be positive, got {attrs['clip']}")
        y = (batch, seq, d, h) if batch_first else (seq, d, batch, h)
        outs = [TensorType(y, dtype), TensorType(state, dtype)]
        return outs + [TensorType(state, dtype)] if op == "LSTM" else outs

    return infer


def _step(op: str, x_proj: np.ndarray, h: np.ndarray, c: np.ndarray, r: np.ndarray,
          rb: np.ndarray, p: np.ndarray | None, fns: list[Any], clip: float,
          attrs: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """One time step of one direction: the new hidden (and cell) state."""
    def act(k: int, v: np.ndarray) -> np.ndarray:
        return fns[k](np.clip(v, -clip, clip))

    n = h.shape[-1]
    if op == "RNN":
        return act(0, x_proj + h @ r.T + rb), c
    if op == "LSTM":
        gates = x_proj + h @ r.T + rb
        gi, go, gf, gc = (gates[:, k * n:(k + 1) * n] for k in range(4))
        pi, po, pf = (np.zeros(n) if p is None else p[k * n:(k + 1) * n] for k in range(3))
        i = act(0, gi + pi * c)
        f = 1.0 - i if attrs["input_forget"] else act(0, gf + pf * c)
        c_new = f * c + i * act(1, gc)
        o = act(0, go + po * c_new)
        return o * fns[2](c_new), c_new  # the cell's own activation is not clipped
    rz, rr, rh = (r[k * n:(k + 1) * n] for k in range(3))
    bz, br, bh = (rb[k * n:(k + 1) * n] for k in range(3))
    z = act(0, x_proj[:, :n] + h @ rz.T + bz)
    reset = act(0, x_proj[:, n:2 * n] + h @ rr.T + br)
    if attrs["linear_before_reset"]:
        candidate = act(1, x_proj[:, 2 * n:] + reset * (h @ rh.T + bh))
    else:
        candidate = act(1, x_proj[:, 2 * n:] + (reset * h) @ rh.T + bh)
    return (1.0 - z) * candidate + z * h, c


def _reference(op: str):
    gates, functions = GATES[op], FUNCTIONS[op]

    def reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
        ins = list(ins) + [None] * (8 - len(ins))
        x, w, r, b, lens, h0, c0, p = ins
        dtype = x.dtype
        if attrs["layout"]:
            x = np.swapaxes(x, 0, 1)
            h0, c0 = (None if v is None else np.swapaxes(v, 0, 1) for v in (h0, c0))
        seq, batch, _ = x.shape
        d, n = DIRECTIONS[attrs["direction"]], attrs["hidden_size"]
        lens = np.full(batch, seq) if lens is None else np.asarray(lens).astype(np.int64)
        problem = index_problem(lens, 0, seq + 1, wraps=False)
        if problem is not None:
            raise InputError(f"{op} sequence_lens: {problem}")
        acts = [(ACTIVATIONS[name], a, bb) for name, a, bb in activation_list(attrs)]
        y = np.zeros((seq, d, batch, n), _ACC)
        y_h, y_c = np.zeros((d, batch, n), _ACC), np.zeros((d, batch, n), _ACC)
        rows = np.arange(batch)
        for k in range(d):
            fns = [(lambda v, f=f, a=a, bb=bb: f(v, a, bb))
                   for f, a, bb in acts[k * functions:(k + 1) * functions]]
            wk, rk = w[k].astype(_ACC), r[k].astype(_ACC)
            bias = np.zeros(2 * gates * n) if b is None else b[k].astype(_ACC)
            wb, rb = bias[:gates * n], bias[gates * n:]
            if op == "GRU" and not attrs["linear_before_reset"]:
                wb, rb = wb + rb * (np.arange(gates * n) >= 2 * n), rb * (np.arange(gates * n) < 2 * n)
            h = np.zeros((batch, n)) if h0 is None else h0[k].astype(_ACC)
            c = np.zeros((batch, n)) if c0 is None else c0[k].astype(_ACC)
            pk = None if p is None else p[k].astype(_ACC)
            reverse = attrs["direction"] == "reverse" or k == 1
            for s in range(seq):
                active = s < lens
                t = np.clip(lens - 1 - s if reverse else np.full(batch, s), 0, seq - 1)
                x_proj = x[t, rows].astype(_ACC) @ wk.T + wb
                h_new, c_new = _step(op, x_proj, h, c, rk, rb, pk, fns, attrs["clip"], attrs)
                h = np.where(active[:, None], h_new, h)
                c = np.where(active[:, None], c_new, c)
                y[t[active], k, rows[active]] = h[active]
            ran = (lens > 0)[:, None]
            y_h[k], y_c[k] = np.where(ran, h, 0.0), np.where(ran, c, 0.0)
        if attrs["layout"]:
            y, y_h, y_c = np.transpose(y, (2, 0, 1, 3)), np.swapaxes(y_h, 0, 1), np.swapaxes(y_c, 0, 1)
        outs = [y.astype(dtype), y_h.astype(dtype)]
        return outs + [y_c.astype(dtype)] if op == "LSTM" else outs

    return reference


def _flops(op: str):
    gates = GATES[op]

    def flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
        seq, batch, size = ins[0].shape
        if attrs["layout"]:
            seq, batch = batch, seq
        d, n = DIRECTIONS[attrs["direction"]], attrs["hidden_size"]
        # The input and recurrent products dominate: 2 flops a multiply-add.
        return 2 * seq * d * batch * gates * n * (size + n) + 10 * seq * d * batch * n

    return flops


def _index_bounds(ins: list[TensorType], attrs: dict[str, Any]) -> list[tuple[Any, ...]]:
    # Lengths are counts, not positions: each must lie in [0, seq].
    if len(ins) <= 4 or ins[4] is None:
        return []
    return [(4, 0, ins[0].shape[attrs["layout"]] + 1, False)]


def _attrs(op: str) -> dict[str, Attr]:
    attrs = {
        "hidden_size": Attr("int", None, "units of the hidden state; R's last dim when absent"),
        "direction": Attr("str", "forward", "forward, reverse or bidirectional"),
        "activations": Attr("str", None, "the activation functions, comma-separated, one per "
                                         "function and direction (ONNX's defaults when absent)"),
        "activation_alpha": Attr("floats", None, "each activation's alpha (0 where unused)"),
        "activation_beta": Attr("floats", None, "each activation's beta (0 where unused)"),
        "clip": Attr("float", math.inf, "bound of every gate input's magnitude; inf: none"),
        "layout": Attr("int", 0, "0: time-major tensors, 1: batch-major (ONNX's layout)"),
    }
    if op == "LSTM":
        attrs["input_forget"] = Attr("int", 0, "1 couples the forget gate to the input gate: "
                                               "f = 1 - i")
    if op == "GRU":
        attrs["linear_before_reset"] = Attr("int", 0, "1 applies the reset gate after the "
                                                      "hidden gate's recurrent product")
    return attrs


_INPUTS = {
    "RNN": ("X", "W", "R", "B?", "sequence_lens?", "initial_h?"),
    "GRU": ("X", "W", "R", "B?", "sequence_lens?", "initial_h?"),
    "LSTM": ("X", "W", "R", "B?", "sequence_lens?", "initial_h?", "initial_c?", "P?"),
}
_DOCS = {
    "RNN": "a simple recurrent layer: H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)",
    "LSTM": "a long short-term memory layer (gates i, o, f, c; optional peepholes P)",
    "GRU": "a gated recurrent unit layer (gates z, r, h)",
}

for _op in ("RNN", "LSTM", "GRU"):
    register(OpDef(
        _op, _INPUTS[_op], ("Y", "Y_h", "Y_c") if _op == "LSTM" else ("Y", "Y_h"),
        _infer(_op), _reference(_op), attrs=_attrs(_op), flops=_flops(_op),
        complete=_complete(_op), index_bounds=_index_bounds, doc=_DOCS[_op],
    ))
