"""Case generators of the blocked-channel layout ops (LayoutToBlocked, LayoutFromBlocked,
ChannelGatherBlocked, ConvBlocked): the conversions and the gather are exact copies (the
gather's table a permutation of some channels with padding, -1, among them); ConvBlocked
draws an ordinary, a depthwise or a grouped convolution, an NCHW input read as blocks of
one channel or input channels read through a table among them, and is judged as Conv is.
"""

from __future__ import annotations

import math

import numpy as np

from hetero.core.ir.ops.layout import blocked_weight, to_blocked
from hetero.errors import InputError
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


@generates(("ChannelGatherBlocked",), ALL)
def _channel_gather(op: str, d: Draw, dtype: np.dtype) -> Spec:
    block = d.pick((1, 2, 4))
    shape = (d.integer(1, 2), d.integer(1, 3)) + (d.integer(1, 3),) * d.integer(1, 2) + (block,)
    held, out_blocks = shape[1] * block, d.integer(1, 3)
    table = np.full(out_blocks * block, -1, np.int64)
    kept = min(table.size, held) - d.integer(0, 1)
    places = d.rng.permutation(table.size)[:kept]
    table[places] = d.rng.permutation(held)[:kept]
    operands = (Operand("x", values(d, shape, dtype)), Operand("s", table.reshape(out_blocks, block), constant=True))
    return Spec(operands, {}, EXACT)


@generates(("ConvBlocked",), FLOATS)
def _conv_blocked(op: str, d: Draw, dtype: np.dtype) -> Spec:
    attrs, spatial = window(d, pool=False)
    kind = d.pick(("one", "nchw", "grouped", "depthwise", "sources"))
    if kind == "sources":
        return _conv_blocked_sources(d, dtype, attrs, spatial)
    block = d.pick((2, 4))
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


def _conv_blocked_sources(d: Draw, dtype: np.dtype, attrs: dict, spatial: tuple[int, ...]) -> Spec:
    """A (grouped) ConvBlocked reading each group's input channels through S, from anywhere
    in X's blocks (ShuffleNet's groups of 34 after a shuffle): X's other lanes hold values
    the result must not depend on; an edge case has one source past X's channels."""
    block, group = d.pick((2, 4)), d.pick((1, 2, 3))
    per_in = d.integer(1, 5)
    c_out = block * group * d.integer(1, 2)
    held = block * d.integer(-(-per_in * group // block), -(-per_in * group // block) + 1)
    sources = d.rng.permutation(held)[:per_in * group].astype(np.int64)
    x = uniform(d, (d.integer(1, 2), held) + spatial, dtype)
    w = uniform(d, (c_out, per_in) + attrs["kernel_shape"], dtype)
    b = uniform(d, (c_out,), dtype) if d.pick((True, False)) else None
    terms = per_in * math.prod(attrs["kernel_shape"])
    tolerance = summed(dtype, terms + 1, terms * peak(x) * peak(w) + peak(b))
    error = None
    if d.edge():
        # One source just past X's channels, at run time: the reference raises, so must
        # the backend (a constant one is refused when the graph is built).
        sources[int(d.rng.integers(sources.size))] = held
        error = InputError
    operands = (Operand("x", to_blocked(x, block)), Operand("w", blocked_weight(w, 1, block), constant=True),
                None if b is None else Operand("b", b.reshape(-1, block), constant=True),
                Operand("s", sources, constant=error is None and d.pick((True, False))))
    return Spec(operands, {**attrs, "group": group}, tolerance, error=error)
