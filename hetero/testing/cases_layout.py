"""Case generators of the blocked-channel layout ops (LayoutToBlocked, LayoutFromBlocked,
ConvBlocked): the conversions are exact copies; ConvBlocked draws an ordinary, a
depthwise or a grouped convolution, an NCHW input read as blocks of one channel among
them, and is judged as Conv is.
"""

from __future__ import annotations

import math

import numpy as np

from hetero.core.ir.ops.layout import blocked_weight, to_blocked
from hetero.testing.cases_base import (
    ALL,
    EXACT,
    FLOATS,
    Draw,
    Operand,
    Spec,
    generates,
    peak,
    summed,
    uniform,
    values,
)
from hetero.testing.cases_nn import window


@generates(("LayoutToBlocked",), ALL)
def _to_blocked(op: str, d: Draw, dtype: np.dtype) -> Spec:
    block = d.pick((1, 2, 4))
    x = values(d, (d.integer(1, 2), d.integer(1, 9)) + (d.integer(1, 3),) * d.integer(1, 2), dtype)
    return Spec((Operand("x", x),), {"block": block}, EXACT)


@generates(("LayoutFromBlocked",), ALL)
def _from_blocked(op: str, d: Draw, dtype: np.dtype) -> Spec:
    block = d.pick((1, 2, 4))
    shape = (d.integer(1, 2), d.integer(1, 3)) + (d.integer(1, 3),) * d.integer(1, 2) + (block,)
    channels = shape[1] * block - d.integer(0, block - 1)
    return Spec((Operand("x", values(d, shape, dtype)),), {"channels": channels}, EXACT)


@generates(("ConvBlocked",), FLOATS)
def _conv_blocked(op: str, d: Draw, dtype: np.dtype) -> Spec:
    attrs, spatial = window(d, pool=False)
    block = d.pick((2, 4))
    kind = d.pick(("one", "nchw", "grouped", "depthwise"))
    group = {"one": 1, "nchw": 1, "grouped": 2, "depthwise": block * d.integer(1, 2)}[kind]
    c_in = {"one": block * d.integer(1, 2), "nchw": d.integer(1, 3), "grouped": 2 * block,
            "depthwise": group}[kind]
    c_out = group if kind == "depthwise" else block * group * d.integer(1, 2)
    block_in = {"one": block, "nchw": 1, "grouped": block, "depthwise": block}[kind]
    x = uniform(d, (d.integer(1, 2), c_in) + spatial, dtype)
    w = uniform(d, (c_out, c_in // group) + attrs["kernel_shape"], dtype)
    b = uniform(d, (c_out,), dtype) if d.pick((True, False)) else None
    terms = (c_in // group) * math.prod(attrs["kernel_shape"])
    w_blocked = blocked_weight(w, 1 if kind == "depthwise" else block_in, block)
    operands = (Operand("x", to_blocked(x, block_in)), Operand("w", w_blocked, constant=True),
                None if b is None else Operand("b", b.reshape(-1, block), constant=True))
    tolerance = summed(dtype, terms + 1, terms * peak(x) * peak(w) + peak(b))
    return Spec(operands, {**attrs, "group": group}, tolerance)
