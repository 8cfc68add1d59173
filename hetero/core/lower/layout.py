"""Lowerings of the blocked-channel layout ops (meanings: :mod:`hetero.core.ir.ops.layout`).

The layout conversions are plain index maps. ``ConvBlocked`` pads its input into a
workspace stage first where it has padding, so the convolution's own reads carry no
``select`` and no clamp: in the inner loop every tap is one load (TVM's and oneDNN's
recipe; the workspace is one pass over the input, next to the kernel's many).
Its reads keep the channel block as one plain index: the input at
``[n, ci_outer, ..., ci_inner]`` and the weight at ``[..., ci_inner, co_inner]``, so a
schedule finds the output's channel block a lane loop the weight is contiguous along.
"""

from __future__ import annotations

from typing import Any

from hetero.core.ir.tir.compute import Tensor, reduce_axis, sum_
from hetero.core.ir.tir.expr import INDEX, Expr, cast, const, ge, logical_and, lt, maximum, minimum, select
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers


@lowers("LayoutToBlocked")
def lower_to_blocked(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                     names: list[str]) -> list[Tensor]:
    """Y[n, c, d..., b] = X[n, c * block + b, d...], 0 past X's channels."""
    x = inputs[0]
    assert x is not None
    block, channels = attrs["block"], x.shape[1]

    def element(idx: Indices) -> Expr:
        c = idx[1] * block + idx[-1]
        if channels % block == 0:
            return x[(idx[0], c) + tuple(idx[2:-1])]
        return select(lt(c, channels), x[(idx[0], minimum(c, channels - 1)) + tuple(idx[2:-1])],
                      const(0, x.dtype))

    return [compute_nd(out_types[0].shape, element, names[0])]


@lowers("LayoutFromBlocked")
def lower_from_blocked(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                       names: list[str]) -> list[Tensor]:
    """Y[n, c, d...] = X[n, c // b, d..., c % b] for the ``channels`` first c."""
    x = inputs[0]
    assert x is not None
    block = x.shape[-1]

    def element(idx: Indices) -> Expr:
        return x[(idx[0], idx[1] // block) + tuple(idx[2:]) + (idx[1] % block,)]

    return [compute_nd(out_types[0].shape, element, names[0])]


@lowers("ChannelGatherBlocked")
def lower_channel_gather(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                         names: list[str]) -> list[Tensor]:
    """Y[n, p, d..., l] = X at channel s = S[p, l] (block s // b, lane s % b), 0 where s < 0.
    The reference refuses a source past X's channels; the kernel clamps it as well, so
    that even a table nobody checked never reads outside X."""
    x, sources = inputs
    assert x is not None and sources is not None
    block, held = x.shape[-1], x.shape[1] * x.shape[-1]

    def element(idx: Indices) -> Expr:
        s = cast(sources[idx[1], idx[-1]], INDEX)
        c = minimum(maximum(s, 0), held - 1)
        load = x[(idx[0], c // block) + tuple(idx[2:-1]) + (c % block,)]
        return select(lt(s, 0), const(0, x.dtype), load)

    return [compute_nd(out_types[0].shape, element, names[0])]


def _padded(x: Tensor, attrs: dict[str, Any], name: str) -> tuple[Tensor, list[int]]:
    """``x`` with the convolution's zero padding written out, and the offset of ``x``'s
    origin in it per spatial axis; ``x`` itself (offsets 0) where nothing is padded."""
    k = len(attrs["kernel_shape"])
    pads = attrs["pads"]
    if not any(pads):
        return x, [0] * k
    spatial = x.shape[2:-1]
    shape = (x.shape[0], x.shape[1]) + tuple(s + pads[i] + pads[i + k] for i, s in enumerate(spatial)) \
        + (x.shape[-1],)

    def element(idx: Indices) -> Expr:
        index: list[Expr] = [idx[0], idx[1]]
        inside: Expr | None = None
        for i, size in enumerate(spatial):
            p = idx[2 + i] - pads[i]
            checks = ([ge(p, 0)] if pads[i] else []) + ([lt(p, size)] if pads[i + k] else [])
            for check in checks:
                inside = check if inside is None else logical_and(inside, check)
            index.append(minimum(maximum(p, 0), size - 1) if checks else p)
        load = x[tuple(index) + (idx[-1],)]
        return load if inside is None else select(inside, load, const(0, x.dtype))

    return compute_nd(shape, element, f"{name}_pad"), list(pads[:k])


@lowers("ConvBlocked")
def lower_conv_blocked(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                       names: list[str]) -> list[Tensor]:
    """Y[n, co, o..., cb] = sum over the group's input channels and the taps of the padded
    X times W, plus B[co, cb]; a depthwise one reads X at its own channel, one with S its
    input channel c at X's channel S[c]."""
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    sources = inputs[3] if len(inputs) > 3 else None
    assert x is not None and w is not None
    acc, group = accumulator_dtype(x.dtype), attrs["group"]
    block_in, block_out = x.shape[-1], w.shape[-1]
    per_in, per_out = w.shape[1] * w.shape[-2], w.shape[0] * block_out // group
    depthwise = per_in == 1 and per_out == 1
    xp, _ = _padded(x, attrs, names[0])
    kernel = tuple(attrs["kernel_shape"])
    taps = [reduce_axis(n, f"{names[0]}_k{i}") for i, n in enumerate(kernel)]
    rc_outer = reduce_axis(w.shape[1], f"{names[0]}_rco")
    rc_inner = reduce_axis(w.shape[-2], f"{names[0]}_rci")
    axes = taps if depthwise else [rc_outer, *taps, rc_inner]

    def element(idx: Indices) -> Expr:
        batch, co, cb, o = idx[0], idx[1], idx[-1], idx[2:-1]
        where = [o[i] * attrs["strides"][i] + t.var * attrs["dilations"][i] for i, t in enumerate(taps)]
        if depthwise:
            xv = xp[(batch, co) + tuple(where) + (cb,)]
            wv = w[(co, 0) + tuple(t.var for t in taps) + (0, cb)]
        elif sources is not None:
            # Each input channel where S says it is: one table load a reduction step, the
            # same for every output pixel and lane of the tile. S is in range: the op's
            # index bounds check it before any kernel runs (a clamp here cost ~7% of
            # ShuffleNet, whose grouped Convs read their shuffled input this way).
            ci = rc_outer.var if group == 1 else co // (per_out // block_out) * per_in + rc_outer.var
            at = cast(sources[(ci,)], INDEX)
            xv = xp[(batch, at // block_in) + tuple(where) + (at % block_in,)]
            wv = w[(co, rc_outer.var) + tuple(t.var for t in taps) + (rc_inner.var, cb)]
        else:
            # A group spans whole output blocks: its first input block is a function of co alone.
            ci = rc_outer.var if group == 1 else co // (per_out // block_out) * (per_in // block_in) + rc_outer.var
            xv = xp[(batch, ci) + tuple(where) + (rc_inner.var,)]
            wv = w[(co, rc_outer.var) + tuple(t.var for t in taps) + (rc_inner.var, cb)]
        y = sum_(cast(xv, acc) * cast(wv, acc), axes)
        if b is not None:
            y = y + cast(b[co, cb], acc)
        return cast(y, x.dtype)

    return [compute_nd(out_types[0].shape, element, names[0])]

