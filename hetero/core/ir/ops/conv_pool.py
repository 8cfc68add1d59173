"""Sliding-window ops: convolution and pooling.

Convolution and pooling share one description of a sliding window over the spatial
axes of an ``(N, C, D1, ..., Dk)`` tensor: ``kernel_shape``, ``strides``, ``pads``
(ONNX order: every begin, then every end), ``dilations``. The references build a
strided view of the padded input (``sliding_window_view``) and reduce over it, so
they never loop over pixels; they accumulate in float64 and round once to the
output dtype, which makes them at least as accurate as any backend they judge.
"""

from __future__ import annotations

from collections.abc import Callable
import math
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hetero.core.ir.opdef import Attr, InferFn, OpDef, register
from hetero.core.ir.ops.common import (
    require_dtype,
    require_float,
    require_spatial,
    same_dtype,
)
from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import OpAttributeError, ShapeError

_ACC = np.float64
_MAXPOOL_DTYPES = FLOAT_DTYPES + (np.dtype("int8"), np.dtype("uint8"))


def _window_attrs(kernel: Attr) -> dict[str, Attr]:
    return {
        "kernel_shape": kernel,
        "strides": Attr("ints", None, "step per spatial axis (derived: ones)"),
        "pads": Attr("ints", None, "padding, all begins then all ends (derived: zeros)"),
        "dilations": Attr("ints", None, "spacing of kernel taps (derived: ones)"),
    }


def _complete_window(x: TensorType, attrs: dict[str, Any], op: str) -> dict[str, Any]:
    n = require_spatial(x, op)
    for key, fill in (("strides", (1,) * n), ("dilations", (1,) * n), ("pads", (0,) * (2 * n))):
        if attrs[key] is None:
            attrs[key] = fill
    return attrs


def _window_out_dims(x: TensorType, attrs: dict[str, Any], ceil_mode: int = 0) -> tuple[int, ...]:
    """Output spatial dims of the window described by ``attrs``; ShapeError if malformed."""
    n = x.rank - 2
    kernel, strides, dilations, pads = (
        attrs["kernel_shape"], attrs["strides"], attrs["dilations"], attrs["pads"]
    )
    for key, value, length in (("kernel_shape", kernel, n), ("strides", strides, n),
                               ("dilations", dilations, n), ("pads", pads, 2 * n)):
        if len(value) != length:
            raise ShapeError(f"{key} {list(value)} must have {length} entries for input {x}")
        floor = 0 if key == "pads" else 1
        if any(v < floor for v in value):
            raise ShapeError(f"{key} {list(value)} must all be >= {floor}")
    dims = []
    for i, size in enumerate(x.shape[2:]):
        extent = dilations[i] * (kernel[i] - 1) + 1
        padded = size + pads[i] + pads[i + n]
        # (padded - extent) / stride + 1, rounded as onnx's shape inference and onnxruntime
        # round it: toward zero. The specification's text says floor, which differs only
        # where the window is wider than the padded input; there every runtime truncates,
        # so a window hanging past the end still gives an output over what it covers. A
        # window that does not fit at all gives an empty axis; a negative size is an error.
        span = padded - extent
        out = (-(-span // strides[i]) if ceil_mode else int(span / strides[i])) + 1
        if out < 0:
            raise ShapeError(
                f"kernel extent {extent} (kernel {kernel[i]}, dilation {dilations[i]}) is larger "
                f"than the padded input {padded} on spatial axis {i}: the output size would be {out}"
            )
        # ONNX (and onnxruntime) drop a ceil-mode window that would start in the end padding.
        if ceil_mode and (out - 1) * strides[i] >= size + pads[i]:
            out -= 1
        dims.append(out)
    return tuple(dims)


def _windows(
    x: np.ndarray, pads: tuple[int, ...], attrs: dict[str, Any], out: tuple[int, ...], fill: Any
) -> np.ndarray:
    """A view ``(N, C, *out, *kernel)`` of ``x`` padded with ``fill`` (no copy of the windows).

    The end padding is extended where ceil mode lets the last window hang past it.
    """
    n = len(out)
    strides, dilations, kernel = attrs["strides"], attrs["dilations"], attrs["kernel_shape"]
    if 0 in out:  # a window wider than the padded input: no window at all
        return np.full((*x.shape[:2], *out, *kernel), fill, x.dtype)
    extents = [d * (k - 1) + 1 for d, k in zip(dilations, kernel)]
    widths = [(0, 0), (0, 0)]
    for i, size in enumerate(x.shape[2:]):
        needed = (out[i] - 1) * strides[i] + extents[i] - size - pads[i]
        widths.append((pads[i], max(pads[i + n], needed)))
    padded = np.pad(x, widths, constant_values=fill)
    view = sliding_window_view(padded, extents, axis=tuple(range(2, 2 + n)))
    index = (
        (slice(None), slice(None))
        + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out, strides))
        + tuple(slice(None, None, d) for d in dilations)
    )
    return view[index]


def _kernel_axes(n: int) -> tuple[int, ...]:
    return tuple(range(2 + n, 2 + 2 * n))


# -- Conv ----------------------------------------------------------------------------


def _conv_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    x, w = ins[0], ins[1]
    if attrs["kernel_shape"] is None:
        if w.rank < 3:
            raise ShapeError(f"Conv weight W must be (C_out, C_in/group, k1, ...), got {w}")
        attrs["kernel_shape"] = w.shape[2:]
    return _complete_window(x, attrs, "Conv")


def _conv_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    require_spatial(x, "Conv")
    require_float(x, "Conv input X")
    same_dtype([x, w, b], "Conv's X, W and B")
    if w.rank != x.rank:
        raise ShapeError(
            f"Conv weight W {w} must have the rank of X {x}: (C_out, C_in/group, k1, ...)"
        )
    group, c_in, c_out = attrs["group"], x.shape[1], w.shape[0]
    if group < 1 or c_in % group:
        raise ShapeError(f"group {group} does not divide the {c_in} input channels of X {x}")
    if c_out % group:
        raise ShapeError(f"group {group} does not divide the {c_out} output channels of W {w}")
    if w.shape[1] * group != c_in:
        raise ShapeError(
            f"X has {c_in} channels but W {w} takes {w.shape[1]} per group x group {group} "
            f"= {w.shape[1] * group}"
        )
    if tuple(attrs["kernel_shape"]) != w.shape[2:]:
        raise ShapeError(
            f"kernel_shape {list(attrs['kernel_shape'])} differs from W's {list(w.shape[2:])}"
        )
    if b is not None and b.shape != (c_out,):
        raise ShapeError(f"Conv bias B must have shape [{c_out}] (C_out), got {b}")
    return [TensorType((x.shape[0], c_out) + _window_out_dims(x, attrs), x.dtype)]


def _conv_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    n, group = x.ndim - 2, attrs["group"]
    batch, c_in, c_out = x.shape[0], x.shape[1], w.shape[0]
    out = _window_out_dims(TensorType.of(x), attrs)
    cols = _windows(x.astype(_ACC), attrs["pads"], attrs, out, 0)
    cols = cols.reshape((batch, group, c_in // group) + out + w.shape[2:])
    # im2col: one (pixels x patch) matrix per group, multiplied by that group's filters.
    order = (1, 0) + tuple(range(3, 3 + n)) + (2,) + tuple(range(3 + n, 3 + 2 * n))
    patch = (c_in // group) * math.prod(w.shape[2:])
    cols = cols.transpose(order).reshape(group, batch * math.prod(out), patch)
    filters = w.astype(_ACC).reshape(group, c_out // group, patch).transpose(0, 2, 1)
    y = np.matmul(cols, filters).reshape((group, batch) + out + (c_out // group,))
    y = y.transpose((1, 0, 2 + n) + tuple(range(2, 2 + n))).reshape((batch, c_out) + out)
    if b is not None:
        y = y + b.astype(_ACC).reshape((c_out,) + (1,) * n)
    return [y.astype(x.dtype)]


def _conv_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    x, w, y = ins[0], ins[1], outs[0]
    macs = y.size * (x.shape[1] // attrs["group"]) * math.prod(w.shape[2:])
    has_bias = len(ins) > 2 and ins[2] is not None
    return 2 * macs + (y.size if has_bias else 0)


register(OpDef(
    "Conv", ("X", "W", "B?"), ("Y",), _conv_infer, _conv_reference,
    attrs={
        **_window_attrs(Attr("ints", None, "kernel spatial shape (derived: W.shape[2:])")),
        "group": Attr("int", 1, "number of channel groups; C_in for a depthwise convolution"),
    },
    flops=_conv_flops, complete=_conv_complete,
    doc="N-d convolution (cross-correlation) of X (N, C_in, D...) with W (C_out, C_in/group, "
        "k...), plus bias B (C_out); 1-D, 2-D and 3-D alike",
))


# -- pooling ---------------------------------------------------------------------------


def _pool_complete(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    return _complete_window(ins[0], attrs, "the pool")


def _pool_infer(allowed: tuple[np.dtype, ...], op: str) -> InferFn:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        x = ins[0]
        require_spatial(x, op)
        require_dtype(x, allowed, f"{op} input X")
        y = TensorType(x.shape[:2] + _window_out_dims(x, attrs, attrs["ceil_mode"]), x.dtype)
        if op != "MaxPool" or not attrs["indices"]:
            return [y]
        for key in ("indices", "storage_order"):
            if attrs[key] not in (0, 1):
                raise OpAttributeError(f"MaxPool {key} must be 0 or 1, got {attrs[key]}")
        return [y, TensorType(y.shape, np.dtype(np.int64))]

    return infer


def _max_pool_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    out = _window_out_dims(TensorType.of(x), attrs, attrs["ceil_mode"])
    lowest = -np.inf if x.dtype in FLOAT_DTYPES else np.iinfo(x.dtype).min
    view = _windows(x, attrs["pads"], attrs, out, lowest)
    y = view.max(axis=_kernel_axes(len(out)))
    if not attrs["indices"]:
        return [y]
    return [y, _max_pool_indices(x, view, y, out, attrs)]


def _max_pool_indices(x: np.ndarray, view: np.ndarray, y: np.ndarray, out: tuple[int, ...],
                      attrs: dict[str, Any]) -> np.ndarray:
    """The flat index into ``x`` of each window's first tap (in row-major tap order) that
    holds its maximum (a NaN when the maximum is NaN); -1 for a window with no tap on ``x``."""
    n = len(out)
    real = _windows(np.ones((1, 1) + x.shape[2:], bool), attrs["pads"], attrs, out, False)
    hit = view == y[(...,) + (None,) * n]
    if x.dtype.kind == "f":
        hit |= np.isnan(view)  # the maximum is NaN exactly where a tap is
    hit &= real
    kernel = attrs["kernel_shape"]
    flat_hit = hit.reshape(hit.shape[:2 + n] + (-1,))
    tap = np.argmax(flat_hit, axis=-1)
    found = flat_hit.any(axis=-1)
    spatial = x.shape[2:]
    # Row-major (storage_order 0) or column-major (1) strides over the spatial axes.
    order = range(n) if attrs["storage_order"] else reversed(range(n))
    step, strides = 1, [0] * n
    for i in order:
        strides[i], step = step, step * spatial[i]
    planes = np.arange(x.shape[0])[:, None] * x.shape[1] + np.arange(x.shape[1])
    index = (planes * math.prod(spatial)).reshape(planes.shape + (1,) * n)
    for i, k in enumerate(np.unravel_index(tap, kernel)):
        o = np.arange(out[i]).reshape((1,) * (2 + i) + (-1,) + (1,) * (n - 1 - i))
        position = o * attrs["strides"][i] + k * attrs["dilations"][i] - attrs["pads"][i]
        index = index + position * strides[i]
    return np.where(found, index, -1).astype(np.int64)


def _average_pool_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    n = x.ndim - 2
    out = _window_out_dims(TensorType.of(x), attrs, attrs["ceil_mode"])
    axes = _kernel_axes(n)
    total = _windows(x.astype(_ACC), attrs["pads"], attrs, out, 0).sum(axis=axes)
    # The divisor counts the taps on real data, plus the explicit padding when
    # count_include_pad is set; the overhang ceil mode adds is never counted.
    pads = attrs["pads"]
    ones = np.ones((1, 1) + x.shape[2:], _ACC)
    counted = np.pad(ones, [(0, 0), (0, 0)] + [(pads[i], pads[i + n]) for i in range(n)],
                     constant_values=float(attrs["count_include_pad"]))
    count = _windows(counted, (0,) * (2 * n), attrs, out, 0).sum(axis=axes)
    # A dilated window can fall wholly on padding; like onnxruntime, its mean is 0.
    mean = np.divide(total, count, out=np.zeros_like(total), where=count > 0)
    return [mean.astype(x.dtype)]


def _pool_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    # One comparison or addition per tap; AveragePool's division is one more per output.
    return outs[0].size * math.prod(attrs["kernel_shape"])


_POOL_ATTRS = {
    **_window_attrs(Attr("ints", doc="window spatial shape")),
    "ceil_mode": Attr("int", 0, "1: round the output size up (windows may hang past the end)"),
}

register(OpDef(
    "MaxPool", ("X",), ("Y", "Indices?"), _pool_infer(_MAXPOOL_DTYPES, "MaxPool"),
    _max_pool_reference,
    attrs={**_POOL_ATTRS,
           "indices": Attr("int", 0, "1: also output Indices, each maximum's flat index into X"),
           "storage_order": Attr("int", 0, "Indices' order of the spatial axes: 0 row-major, "
                                           "1 column-major (N and C stay outermost)")},
    flops=_pool_flops, complete=_pool_complete,
    doc="maximum over each window; padding never wins (it is -inf, or the integer minimum, "
        "which is also the result of a dilated window that falls wholly on padding). With "
        "indices=1 also the flat int64 index into X of the window's first tap (row-major "
        "over the kernel) holding the maximum, NaN counting as the maximum as in ArgMax; "
        "-1 for a window wholly on padding",
))

register(OpDef(
    "AveragePool", ("X",), ("Y",), _pool_infer(FLOAT_DTYPES, "AveragePool"),
    _average_pool_reference,
    attrs={**_POOL_ATTRS, "count_include_pad": Attr("int", 0, "1: padding counts in the divisor")},
    flops=lambda ins, outs, attrs: _pool_flops(ins, outs, attrs) + outs[0].size,
    complete=_pool_complete,
    doc="mean over each window; the divisor is the number of taps on real data "
        "(plus explicit padding with count_include_pad); a window with no tap on real "
        "data averages to 0",
))


def _global_pool(name: str, reduce: Callable[..., np.ndarray], doc: str) -> None:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        x = ins[0]
        n = require_spatial(x, name)
        require_float(x, f"{name} input X")
        return [TensorType(x.shape[:2] + (1,) * n, x.dtype)]

    def reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
        x = ins[0]
        axes = tuple(range(2, x.ndim))
        return [reduce(x.astype(_ACC), axis=axes, keepdims=True).astype(x.dtype)]

    register(OpDef(name, ("X",), ("Y",), infer, reference,
                   flops=lambda ins, outs, attrs: ins[0].size, doc=doc))


_global_pool("GlobalAveragePool", np.mean, "mean over all spatial axes: (N, C, 1, ..., 1)")
_global_pool("GlobalMaxPool", np.max, "maximum over all spatial axes: (N, C, 1, ..., 1)")


# -- Lp pooling ------------------------------------------------------------------------


def _lp(total: np.ndarray, p: int) -> np.ndarray:
    """``total ** (1 / p)`` of a sum of ``|x| ** p``."""
    return total if p == 1 else np.sqrt(total) if p == 2 else np.power(total, 1.0 / p)


def _check_p(op: str, attrs: dict[str, Any]) -> None:
    if attrs["p"] < 1:
        raise OpAttributeError(f"{op} p must be >= 1, got {attrs['p']}")


def _lp_pool_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    _check_p("LpPool", attrs)
    return _pool_infer(FLOAT_DTYPES, "LpPool")(ins, attrs)


def _lp_pool_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, p = ins[0], attrs["p"]
    out = _window_out_dims(TensorType.of(x), attrs, attrs["ceil_mode"])
    powered = np.power(np.abs(x.astype(_ACC)), p)
    total = _windows(powered, attrs["pads"], attrs, out, 0).sum(axis=_kernel_axes(len(out)))
    return [_lp(total, p).astype(x.dtype)]


register(OpDef(
    "LpPool", ("X",), ("Y",), _lp_pool_infer, _lp_pool_reference,
    attrs={**_POOL_ATTRS, "p": Attr("int", 2, "the norm's order, >= 1")},
    flops=lambda ins, outs, attrs: 2 * _pool_flops(ins, outs, attrs) + outs[0].size,
    complete=_pool_complete,
    doc="the p-norm of each window, (sum of |x| ** p) ** (1 / p); padding adds 0",
))


def _global_lp_pool_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    n = require_spatial(x, "GlobalLpPool")
    require_float(x, "GlobalLpPool input X")
    _check_p("GlobalLpPool", attrs)
    return [TensorType(x.shape[:2] + (1,) * n, x.dtype)]


def _global_lp_pool_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, p = ins[0], attrs["p"]
    powered = np.power(np.abs(x.astype(_ACC)), p)
    total = powered.sum(axis=tuple(range(2, x.ndim)), keepdims=True)
    return [_lp(total, p).astype(x.dtype)]


register(OpDef(
    "GlobalLpPool", ("X",), ("Y",), _global_lp_pool_infer, _global_lp_pool_reference,
    attrs={"p": Attr("int", 2, "the norm's order, >= 1")},
    flops=lambda ins, outs, attrs: 2 * ins[0].size,
    doc="the p-norm over all spatial axes: (N, C, 1, ..., 1)",
))
