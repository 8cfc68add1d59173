"""Neural-network ops beyond sliding windows: normalisation, matrix products, softmax.

The references accumulate in float64 and round once to the output dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from hetero.core.ir.opdef import Attr, OpDef, register
from hetero.core.ir.ops.common import (
    broadcast_shapes,
    normalize_axis,
    require_dtype,
    require_float,
    require_rank,
    require_spatial,
    same_dtype,
)
from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import OpAttributeError, ShapeError

_ACC = np.float64
_MATMUL_DTYPES = FLOAT_DTYPES + tuple(np.dtype(d) for d in ("int32", "int64", "uint32", "uint64"))

def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether ``shape`` broadcasts one way to ``target`` (ONNX unidirectional broadcasting)."""
    return len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(reversed(shape), reversed(target))
    )


def _complete_axis(ins: list[TensorType | None], attrs: dict[str, Any]) -> dict[str, Any]:
    attrs["axis"] = normalize_axis(attrs["axis"], ins[0].rank)
    return attrs


# -- normalisation -----------------------------------------------------------------------


def _lrn_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_spatial(x, "LRN")
    require_float(x, "LRN input X")
    if attrs["size"] < 1:
        raise ShapeError(f"LRN size must be >= 1, got {attrs['size']}")
    return [x]


def _lrn_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    size = attrs["size"]
    square = np.square(x.astype(_ACC))
    # The window over channels c - floor((size-1)/2) .. c + ceil((size-1)/2), zero outside.
    widths = [(0, 0)] * x.ndim
    widths[1] = ((size - 1) // 2, size // 2)
    total = sliding_window_view(np.pad(square, widths), size, axis=1).sum(axis=-1)
    y = x / (attrs["bias"] + attrs["alpha"] / size * total) ** attrs["beta"]
    return [y.astype(x.dtype)]


register(OpDef(
    "LRN", ("X",), ("Y",), _lrn_infer, _lrn_reference,
    attrs={
        "size": Attr("int", doc="number of channels summed over"),
        "alpha": Attr("float", 1e-4, "scale of the sum of squares"),
        "beta": Attr("float", 0.75, "exponent"),
        "bias": Attr("float", 1.0, "offset"),
    },
    # Per element: a square, size additions, then scale, offset, power and division.
    flops=lambda ins, outs, attrs: outs[0].size * (attrs["size"] + 5),
    doc="local response normalisation across channels: "
        "x / (bias + alpha/size * sum of x**2 over size neighbouring channels) ** beta",
))


def _batch_norm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    if x.rank < 2:
        raise ShapeError(f"BatchNormalization input X must be (N, C, ...), got {x}")
    require_float(x, "BatchNormalization input X")
    same_dtype(ins, "BatchNormalization's X, scale, B, mean and var")
    for name, t in zip(("scale", "B", "input_mean", "input_var"), ins[1:]):
        if t.shape != (x.shape[1],):
            raise ShapeError(
                f"BatchNormalization {name} must have shape [{x.shape[1]}] (C), got {t}"
            )
    return [x]


def _batch_norm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    shape = (-1,) + (1,) * (x.ndim - 2)
    scale, bias, mean, var = (p.astype(_ACC).reshape(shape) for p in ins[1:])
    y = (x.astype(_ACC) - mean) / np.sqrt(var + attrs["epsilon"]) * scale + bias
    return [y.astype(x.dtype)]


register(OpDef(
    "BatchNormalization", ("X", "scale", "B", "input_mean", "input_var"), ("Y",),
    _batch_norm_infer, _batch_norm_reference,
    attrs={"epsilon": Attr("float", 1e-5, "added to the variance")},
    # (x - mean) / sqrt(var + eps) * scale + B: four per element, two per channel.
    flops=lambda ins, outs, attrs: 4 * outs[0].size + 2 * ins[0].shape[1],
    doc="inference-mode batch normalisation over the channel axis 1 (one output)",
))


def _layer_norm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_float(x, "LayerNormalization input X")
    same_dtype(ins, "LayerNormalization's X, Scale and B")
    normalized = x.shape[attrs["axis"]:]
    for name, t in zip(("Scale", "B"), ins[1:]):
        if t is not None and not _broadcasts_to(t.shape, normalized):
            raise ShapeError(
                f"LayerNormalization {name} {t} does not broadcast to the normalised "
                f"shape {list(normalized)} (X {x}, axis {attrs['axis']})"
            )
    if attrs["statistics"] not in (0, 1):
        raise OpAttributeError(
            f"LayerNormalization statistics must be 0 or 1, got {attrs['statistics']}")
    if not attrs["statistics"]:
        return [x]
    require_float(TensorType((), attrs["stash_type"]), "LayerNormalization stash_type")
    row = TensorType(x.shape[:attrs["axis"]] + (1,) * len(normalized), attrs["stash_type"])
    return [x, row, row]


def _layer_norm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    axes = tuple(range(attrs["axis"], x.ndim))
    x64 = x.astype(_ACC)
    mean = x64.mean(axis=axes, keepdims=True)
    centred = x64 - mean
    variance = np.square(centred).mean(axis=axes, keepdims=True)
    std = np.sqrt(variance + attrs["epsilon"])
    y = centred / std * scale.astype(_ACC)
    if b is not None:
        y = y + b.astype(_ACC)
    if not attrs["statistics"]:
        return [y.astype(x.dtype)]
    stash = attrs["stash_type"]
    return [y.astype(x.dtype), mean.astype(stash), (1.0 / std).astype(stash)]


def _layer_norm_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    # Per element: mean, subtract, square, sum, divide, scale (and bias).
    has_bias = len(ins) > 2 and ins[2] is not None
    return outs[0].size * (7 if has_bias else 6)


register(OpDef(
    "LayerNormalization", ("X", "Scale", "B?"), ("Y", "Mean?", "InvStdDev?"),
    _layer_norm_infer, _layer_norm_reference,
    attrs={
        "axis": Attr("int", -1, "first normalised axis; normalises over [axis, rank)"),
        "epsilon": Attr("float", 1e-5, "added to the variance"),
        "statistics": Attr("int", 0, "1: also output each row's Mean and InvStdDev"),
        "stash_type": Attr("dtype", np.dtype("float32"), "the float dtype of Mean and InvStdDev"),
    },
    flops=_layer_norm_flops, complete=_complete_axis,
    doc="(x - mean) / sqrt(var + epsilon) * Scale + B over axes [axis, rank); with "
        "statistics=1 also the mean and 1 / sqrt(var + epsilon) of each row, shaped as X "
        "with the normalised axes kept as 1, in stash_type",
))


# -- matrix products and softmax -------------------------------------------------------


def _gemm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    require_rank(a, 2, "Gemm input A")
    require_rank(b, 2, "Gemm input B")
    require_float(a, "Gemm input A")
    same_dtype([a, b, c], "Gemm's A, B and C")
    m, k = a.shape[::-1] if attrs["transA"] else a.shape
    k_b, n = b.shape[::-1] if attrs["transB"] else b.shape
    if k != k_b:
        raise ShapeError(
            f"Gemm inner dimensions differ: A {a} (transA={attrs['transA']}) gives K={k}, "
            f"B {b} (transB={attrs['transB']}) gives K={k_b}"
        )
    if c is not None and not _broadcasts_to(c.shape, (m, n)):
        raise ShapeError(f"Gemm C {c} does not broadcast to the result shape [{m}, {n}]")
    return [TensorType((m, n), a.dtype)]


def _gemm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    a, b = ins[0].astype(_ACC), ins[1].astype(_ACC)
    c = ins[2] if len(ins) > 2 else None
    y = attrs["alpha"] * ((a.T if attrs["transA"] else a) @ (b.T if attrs["transB"] else b))
    if c is not None:
        y = y + attrs["beta"] * c.astype(_ACC)
    return [y.astype(ins[0].dtype)]


def _gemm_flops(ins: list[TensorType], outs: list[TensorType], attrs: dict[str, Any]) -> int:
    a, y = ins[0], outs[0]
    k = a.shape[0] if attrs["transA"] else a.shape[1]
    extra = int(attrs["alpha"] != 1.0)
    if len(ins) > 2 and ins[2] is not None:
        extra += 1 + int(attrs["beta"] != 1.0)
    return y.size * (2 * k + extra)


register(OpDef(
    "Gemm", ("A", "B", "C?"), ("Y",), _gemm_infer, _gemm_reference,
    attrs={
        "alpha": Attr("float", 1.0, "scale of A @ B"),
        "beta": Attr("float", 1.0, "scale of C"),
        "transA": Attr("int", 0, "1: use A transposed"),
        "transB": Attr("int", 0, "1: use B transposed"),
    },
    flops=_gemm_flops,
    doc="alpha * A' @ B' + beta * C, A' = A.T if transA, B' = B.T if transB; "
        "C broadcasts to (M, N)",
))


def _matmul_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    a, b = ins
    require_dtype(a, _MATMUL_DTYPES, "MatMul input A")
    same_dtype(ins, "MatMul inputs")
    if a.rank == 0 or b.rank == 0:
        raise ShapeError(f"MatMul needs inputs of rank >= 1, got {a} and {b}")
    # numpy's rule: a 1-D A is a row (its new axis dropped after), a 1-D B a column.
    a_shape = (1,) + a.shape if a.rank == 1 else a.shape
    b_shape = b.shape + (1,) if b.rank == 1 else b.shape
    if a_shape[-1] != b_shape[-2]:
        raise ShapeError(f"MatMul inner dimensions differ: A {a} has K={a_shape[-1]}, "
                         f"B {b} has K={b_shape[-2]}")
    try:
        batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    except ShapeError:
        raise ShapeError(f"MatMul batch dimensions of A {a} and B {b} do not broadcast") from None
    shape = batch + (a_shape[-2],) * (a.rank > 1) + (b_shape[-1],) * (b.rank > 1)
    return [TensorType(shape, a.dtype)]


def _matmul_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    a, b = ins
    if a.dtype in FLOAT_DTYPES:
        return [np.matmul(a.astype(_ACC), b.astype(_ACC)).astype(a.dtype)]
    return [np.matmul(a, b)]  # integers wrap around, as in C


register(OpDef(
    "MatMul", ("A", "B"), ("Y",), _matmul_infer, _matmul_reference,
    flops=lambda ins, outs, attrs: 2 * outs[0].size * ins[0].shape[-1],
    doc="matrix product with numpy's semantics: 1-D operands promoted, batch axes broadcast",
))


def _softmax_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    require_float(ins[0], "Softmax input")
    return [ins[0]]


def _softmax_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, axis = ins[0].astype(_ACC), attrs["axis"]
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [(e / e.sum(axis=axis, keepdims=True)).astype(ins[0].dtype)]


register(OpDef(
    "Softmax", ("input",), ("output",), _softmax_infer, _softmax_reference,
    attrs={"axis": Attr("int", -1, "the axis normalised over")},
    # Per element: max, subtract, exp, sum, divide.
    flops=lambda ins, outs, attrs: 5 * outs[0].size,
    complete=_complete_axis,
    doc="exp(x) / sum(exp(x)) along one axis (opset-13 semantics)",
))


# -- LogSoftmax and Hardmax --------------------------------------------------------------


def _log_softmax_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, axis = ins[0].astype(_ACC), attrs["axis"]
    shifted = x - x.max(axis=axis, keepdims=True)
    return [(shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(ins[0].dtype)]


def _float_like_input(op: str) -> Any:
    def infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
        require_float(ins[0], f"{op} input")
        return [ins[0]]

    return infer


register(OpDef(
    "LogSoftmax", ("input",), ("output",), _float_like_input("LogSoftmax"),
    _log_softmax_reference,
    attrs={"axis": Attr("int", -1, "the axis normalised over")},
    # Per element: max, subtract, exp, sum, subtract; a log per row.
    flops=lambda ins, outs, attrs: 5 * outs[0].size,
    complete=_complete_axis,
    doc="x - max - log(sum(exp(x - max))) along one axis (opset-13 semantics; older "
        "models are flattened to them on import)",
))


def _hardmax_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, axis = ins[0], attrs["axis"]
    if x.size == 0:
        return [np.zeros_like(x)]
    # np.argmax takes the first maximum, and a NaN as the maximum (onnx's reference).
    first = np.expand_dims(np.argmax(x, axis=axis), axis)
    positions = np.arange(x.shape[axis]).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    return [(positions == first).astype(x.dtype)]


register(OpDef(
    "Hardmax", ("input",), ("output",), _float_like_input("Hardmax"), _hardmax_reference,
    attrs={"axis": Attr("int", -1, "the axis searched")},
    flops=lambda ins, outs, attrs: outs[0].size,
    complete=_complete_axis,
    doc="1 at the first maximum along one axis (a NaN counting as the maximum), 0 elsewhere "
        "(opset-13 semantics; older models are flattened to them on import)",
))


# -- instance, group, RMS and Lp normalisation -------------------------------------------


def _normalise(x: np.ndarray, axes: tuple[int, ...], epsilon: float) -> np.ndarray:
    """(x - mean) / sqrt(var + epsilon) over ``axes``, in float64."""
    centred = x - x.mean(axis=axes, keepdims=True)
    return centred / np.sqrt(np.square(centred).mean(axis=axes, keepdims=True) + epsilon)


def _instance_norm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    require_spatial(x, "InstanceNormalization")
    require_float(x, "InstanceNormalization input")
    same_dtype(ins, "InstanceNormalization's input, scale and B")
    for name, t in zip(("scale", "B"), ins[1:]):
        if t.shape != (x.shape[1],):
            raise ShapeError(f"InstanceNormalization {name} must have shape [{x.shape[1]}] (C), "
                             f"got {t}")
    return [x]


def _instance_norm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    shape = (-1,) + (1,) * (x.ndim - 2)
    scale, bias = (p.astype(_ACC).reshape(shape) for p in ins[1:])
    y = _normalise(x.astype(_ACC), tuple(range(2, x.ndim)), attrs["epsilon"]) * scale + bias
    return [y.astype(x.dtype)]


register(OpDef(
    "InstanceNormalization", ("input", "scale", "B"), ("output",), _instance_norm_infer,
    _instance_norm_reference,
    attrs={"epsilon": Attr("float", 1e-5, "added to the variance")},
    flops=lambda ins, outs, attrs: 7 * outs[0].size,
    doc="(x - mean) / sqrt(var + epsilon) * scale[c] + B[c], mean and var over the "
        "spatial axes of each (n, c)",
))


def _group_norm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x = ins[0]
    if x.rank < 2:
        raise ShapeError(f"GroupNormalization input X must be (N, C, ...), got {x}")
    require_float(x, "GroupNormalization input X")
    same_dtype(ins, "GroupNormalization's X, scale and bias")
    groups, channels = attrs["num_groups"], x.shape[1]
    if groups < 1 or channels % groups:
        raise ShapeError(f"GroupNormalization num_groups {groups} must divide the {channels} "
                         f"channels of X {x}")
    for name, t in zip(("scale", "bias"), ins[1:]):
        if t.shape not in ((channels,), (groups,)):
            raise ShapeError(f"GroupNormalization {name} must have shape [{channels}] (C, "
                             f"opset 21) or [{groups}] (num_groups, opset 18), got {t}")
    return [x]


def _group_norm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, groups = ins[0], attrs["num_groups"]
    n, c = x.shape[:2]
    grouped = x.astype(_ACC).reshape(n, groups, -1)
    y = _normalise(grouped, (2,), attrs["epsilon"]).reshape(x.shape)
    shape = (-1,) + (1,) * (x.ndim - 2)
    # A per-group parameter (opset 18) applies to each channel of its group.
    scale, bias = (np.repeat(p.astype(_ACC), c // p.shape[0]).reshape(shape) for p in ins[1:])
    return [(y * scale + bias).astype(x.dtype)]


register(OpDef(
    "GroupNormalization", ("X", "scale", "bias"), ("Y",), _group_norm_infer,
    _group_norm_reference,
    attrs={"epsilon": Attr("float", 1e-5, "added to the variance"),
           "num_groups": Attr("int", doc="groups the channels are split into; divides C")},
    flops=lambda ins, outs, attrs: 7 * outs[0].size,
    doc="(x - mean) / sqrt(var + epsilon) over each group of C / num_groups channels (and "
        "the spatial axes), then scale and bias per channel ([C], opset 21) or per group "
        "([num_groups], opset 18)",
))


def _rms_norm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    x, scale = ins
    require_float(x, "RMSNormalization input X")
    same_dtype(ins, "RMSNormalization's X and scale")
    normalized = x.shape[attrs["axis"]:]
    if not _broadcasts_to(scale.shape, normalized):
        raise ShapeError(f"RMSNormalization scale {scale} does not broadcast to the normalised "
                         f"shape {list(normalized)} (X {x}, axis {attrs['axis']})")
    return [x]


def _rms_norm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x, scale = ins
    x64 = x.astype(_ACC)
    axes = tuple(range(attrs["axis"], x.ndim))
    rms = np.sqrt(np.square(x64).mean(axis=axes, keepdims=True) + attrs["epsilon"])
    return [(x64 / rms * scale.astype(_ACC)).astype(x.dtype)]


register(OpDef(
    "RMSNormalization", ("X", "scale"), ("Y",), _rms_norm_infer, _rms_norm_reference,
    attrs={"axis": Attr("int", -1, "first normalised axis; normalises over [axis, rank)"),
           "epsilon": Attr("float", 1e-5, "added to the mean square")},
    flops=lambda ins, outs, attrs: 4 * outs[0].size,
    complete=_complete_axis,
    doc="x / sqrt(mean(x**2) + epsilon) * scale over axes [axis, rank)",
))


def _lp_norm_infer(ins: list[TensorType], attrs: dict[str, Any]) -> list[TensorType]:
    require_float(ins[0], "LpNormalization input")
    if attrs["p"] not in (1, 2):
        raise OpAttributeError(f"LpNormalization p must be 1 or 2, got {attrs['p']}")
    return [ins[0]]


def _lp_norm_reference(ins: list[Any], attrs: dict[str, Any]) -> list[np.ndarray]:
    x = ins[0]
    x64 = np.abs(x.astype(_ACC))
    axis = attrs["axis"]
    if attrs["p"] == 1:
        norm = x64.sum(axis=axis, keepdims=True)
    else:
        norm = np.sqrt(np.square(x64).sum(axis=axis, keepdims=True))
    with np.errstate(invalid="ignore", divide="ignore"):
        # A zero norm gives zeros, as onnxruntime and onnx's reference do.
        y = np.where(norm == 0, 0.0, x / norm)
    return [y.astype(x.dtype)]


register(OpDef(
    "LpNormalization", ("input",), ("output",), _lp_norm_infer, _lp_norm_reference,
    attrs={"axis": Attr("int", -1, "the axis normalised over"),
           "p": Attr("int", 2, "the norm's order: 1 (sum of |x|) or 2 (Euclidean)")},
    flops=lambda ins, outs, attrs: 3 * outs[0].size,
    complete=_complete_axis,
    doc="x / ||x||_p along one axis, p 1 or 2; 0 where the norm is 0",
))
