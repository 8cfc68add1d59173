"""Case generators of the recurrent ops: RNN, LSTM and GRU.

Each case draws the direction, the layout, a few steps, batch entries, input and hidden
units, which optional inputs are present (biases, initial states, LSTM's peepholes),
``clip``, LSTM's ``input_forget``, GRU's ``linear_before_reset``, sometimes other
activations than the defaults (the continuous ones: a threshold's jump would turn a
rounding difference into a large one), and ``sequence_lens`` as a run-time input
(lengths from 0 to the sequence's, so steps skipped and empty entries are covered).
The edge case feeds a length past the sequence, which the reference refuses and a
backend must refuse too.

Tolerance: each step is a sum of ``input + hidden + 2`` terms per gate, then a few
transcendental roundings; an error in the state carries into later steps, and with
the small weights drawn here (|W|, |R| <= 0.5 / units) a step shrinks it, so the bound
is the per-step one, ``summed`` over the gate's terms plus 8 eps, times the number of
steps.
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.ops.rnn import FUNCTIONS, GATES
from hetero.errors import InputError
from hetero.testing.cases_base import (
    FLOATS, Draw, Operand, Spec, Tolerance, eps, generates, peak, uniform,
)

#: Activations drawn besides the defaults, with the alpha and beta they are given.
_OTHER = (("Relu", 0.0, 0.0), ("LeakyRelu", 0.1, 0.0), ("HardSigmoid", 0.3, 0.4),
          ("Elu", 0.7, 0.0), ("Softsign", 0.0, 0.0), ("Softplus", 0.0, 0.0),
          ("Affine", 0.8, 0.1), ("ScaledTanh", 0.9, 1.1), ("Sigmoid", 0.0, 0.0),
          ("Tanh", 0.0, 0.0))


@generates(("RNN", "LSTM", "GRU"), FLOATS + ("float64", "bfloat16"))
def _recurrent(op: str, d: Draw, dtype: np.dtype) -> Spec:
    direction = d.pick(("forward", "reverse", "bidirectional"))
    dirs = 2 if direction == "bidirectional" else 1
    steps, batch, size, units = d.integer(1, 4), d.integer(1, 3), d.integer(1, 4), d.integer(1, 4)
    gates = GATES[op]
    layout = d.pick((0, 1))
    scale = 0.5 / units
    x = uniform(d, (batch, steps, size) if layout else (steps, batch, size), dtype)
    w = uniform(d, (dirs, gates * units, size), dtype, -scale, scale)
    r = uniform(d, (dirs, gates * units, units), dtype, -scale, scale)
    b = uniform(d, (dirs, 2 * gates * units), dtype, -0.5, 0.5) if d.pick((True, False)) else None
    state = (batch, dirs, units) if layout else (dirs, batch, units)
    h0 = uniform(d, state, dtype) if d.pick((True, False)) else None
    c0 = uniform(d, state, dtype) if op == "LSTM" and d.pick((True, False)) else None
    p = uniform(d, (dirs, 3 * units), dtype, -0.5, 0.5) if op == "LSTM" and d.pick((True, False)) else None
    lens = None
    error = None
    if d.pick((False, True)) or d.edge():
        lens = d.rng.integers(0, steps + 1, batch).astype(np.int32)
        if d.edge():
            lens[int(d.rng.integers(batch))] = steps + 1
            error = InputError
    attrs: dict = {"direction": direction, "layout": layout, "hidden_size": units}
    if d.pick((False, True)):
        chosen = [d.pick(_OTHER) for _ in range(FUNCTIONS[op] * dirs)]
        attrs["activations"] = ",".join(name for name, _, _ in chosen)
        attrs["activation_alpha"] = tuple(a for _, a, _ in chosen)
        attrs["activation_beta"] = tuple(bb for _, _, bb in chosen)
    if d.pick((False, True)):
        attrs["clip"] = d.pick((0.25, 0.5, 2.0))
    if op == "LSTM":
        attrs["input_forget"] = d.pick((0, 1))
    if op == "GRU":
        attrs["linear_before_reset"] = d.pick((0, 1))
    operands = (Operand("X", x), Operand("W", w, constant=True), Operand("R", r, constant=True),
                None if b is None else Operand("B", b, constant=True),
                None if lens is None else Operand("sequence_lens", lens),
                None if h0 is None else Operand("initial_h", h0))
    if op == "LSTM":
        operands += (None if c0 is None else Operand("initial_c", c0),
                     None if p is None else Operand("P", p, constant=True))
    while operands[-1] is None:
        operands = operands[:-1]
    terms = size + units + 2
    magnitude = size * peak(x) * peak(w) + units * peak(r) * max(1.0, peak(h0, c0)) + 2 * peak(b) + 1
    e = eps(dtype)
    per_step = terms * e * magnitude + 8 * e
    return Spec(operands, attrs, Tolerance(8 * e, steps * 4 * per_step), error=error)
