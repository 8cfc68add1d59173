"""Translators of ONNX's recurrent ops: RNN, LSTM and GRU (opsets 7, 14 and 22).

Each becomes the canonical op of its name (:mod:`hetero.core.ir.ops.rnn`) with its
activations explicit: ONNX's defaults per direction where the node lists none, and
``activation_alpha`` / ``activation_beta`` dealt out in order to the functions that
take them (as onnxruntime consumes them), the defaults of ONNX's ops of the same names
filling the rest, as the spec says (LeakyRelu 0.01, ThresholdedRelu 1, HardSigmoid 0.2
and 0.5, Elu 1; Affine 1 and 0, the defaults of the experimental op it was).
onnxruntime differs there: it takes 0 for ThresholdedRelu's and Affine's missing
values. ScaledTanh had no defaults, so a node that leaves them out is refused. Opset 14 added ``layout`` (batch-major tensors), which the canonical
op keeps; opset 22 only widened the dtypes. ``sequence_lens`` stays an input, read at
run time.
"""

from __future__ import annotations

import math

from hetero.core.frontend.onnx.context import NodeContext, translates
from hetero.core.ir.ops.rnn import ACTIVATIONS, DEFAULT_ACTIVATIONS, DIRECTIONS

#: How many of alpha and beta each activation takes, and their defaults.
_PARAMETERS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "Affine": ((1.0,), (0.0,)),
    "LeakyRelu": ((0.01,), ()),
    "ThresholdedRelu": ((1.0,), ()),
    "ScaledTanh": ((math.nan,), (math.nan,)),
    "HardSigmoid": ((0.2,), (0.5,)),
    "Elu": ((1.0,), ()),
}
_BY_LOWER = {name.lower(): name for name in ACTIVATIONS}


@translates("RNN", "LSTM", "GRU")
def recurrent(ctx: NodeContext) -> None:
    op = ctx.op_type
    direction = ctx.attr("direction", "forward")
    if direction not in DIRECTIONS:
        raise ctx.unsupported(f"direction {direction!r} is not one of {list(DIRECTIONS)}")
    given = ctx.attr("activations")
    names = list(DEFAULT_ACTIVATIONS[op] * DIRECTIONS[direction]) if not given else []
    for name in given or ():
        name = name.decode() if isinstance(name, bytes) else name
        if name.lower() not in _BY_LOWER:
            raise ctx.unsupported(f"activation {name!r} is not one of {sorted(ACTIVATIONS)}")
        names.append(_BY_LOWER[name.lower()])
    alphas, betas = list(ctx.attr("activation_alpha", [])), list(ctx.attr("activation_beta", []))
    alpha, beta = [], []
    for name in names:
        a_default, b_default = _PARAMETERS.get(name, ((), ()))
        alpha.append(alphas.pop(0) if a_default and alphas else (a_default or (0.0,))[0])
        beta.append(betas.pop(0) if b_default and betas else (b_default or (0.0,))[0])
        if math.isnan(alpha[-1]) or math.isnan(beta[-1]):
            raise ctx.unsupported(f"activation {name} needs its alpha and beta in "
                                  "activation_alpha and activation_beta (ONNX gives no defaults)")
    clip = ctx.attr("clip")
    attrs = {
        "direction": direction,
        "activations": ",".join(names),
        "activation_alpha": alpha,
        "activation_beta": beta,
        "clip": math.inf if clip is None else clip,
        "layout": ctx.attr("layout", 0),
    }
    if ctx.has_attr("hidden_size"):
        attrs["hidden_size"] = ctx.attr("hidden_size")
    if op == "LSTM":
        attrs["input_forget"] = ctx.attr("input_forget", 0)
    if op == "GRU":
        attrs["linear_before_reset"] = ctx.attr("linear_before_reset", 0)
    count = 8 if op == "LSTM" else 6
    inputs = [ctx.input(0), ctx.input(1), ctx.input(2)] + [
        ctx.optional_input(i) for i in range(3, count)]
    while inputs[-1] is None:
        inputs.pop()
    ctx.emit(op, inputs, attrs, n_outputs=3 if op == "LSTM" else 2)
