"""Translators of ONNX's neural-network and quantisation ops.

Convolutions and pools get every attribute explicitly; ``auto_pad`` is resolved to
explicit pads from the static input shape, exactly as ONNX defines SAME_UPPER,
SAME_LOWER and VALID.
"""

from __future__ import annotations

from collections.abc import Sequence
import math

import numpy as np
import onnx

from hetero.core.frontend.onnx.context import NodeContext, merge_attrs, translates
from hetero.core.frontend.onnx.shapes import dtype_name, numpy_dtype
from hetero.core.frontend.onnx.translate_tensor import reduce
from hetero.core.ir.graph import Value


def explicit_pads(ctx: NodeContext, spatial: Sequence[int], kernel: Sequence[int],
                  strides: Sequence[int], dilations: Sequence[int]) -> list[int]:
    """The node's pads in ONNX order (all begins, then all ends), auto_pad resolved."""
    mode = ctx.attr("auto_pad", "NOTSET")
    rank = len(spatial)
    if mode == "NOTSET":
        return ctx.attr("pads", [0] * 2 * rank)
    if mode == "VALID":
        return [0] * 2 * rank
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.unsupported(
            f"auto_pad {mode!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        # SAME keeps ceil(size / stride) outputs; ONNX puts the odd pad at the end
        # for SAME_UPPER and at the beginning for SAME_LOWER.
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else large)
        ends.append(large if mode == "SAME_UPPER" else small)
    return begins + ends


def _window_attrs(ctx: NodeContext, x: Value, kernel: Sequence[int]) -> dict[str, list[int]]:
    rank = len(kernel)
    strides = ctx.attr("strides", [1] * rank)
    dilations = ctx.attr("dilations", [1] * rank)
    pads = explicit_pads(ctx, x.shape[2:], kernel, strides, dilations)
    return {"kernel_shape": list(kernel), "strides": strides, "dilations": dilations, "pads": pads}


@translates("Conv")
def conv(ctx: NodeContext) -> None:
    x, w = ctx.input(0), ctx.input(1)
    kernel = ctx.attr("kernel_shape", list(w.shape[2:]))
    attrs = _window_attrs(ctx, x, kernel)
    attrs["group"] = ctx.attr("group", 1)
    ctx.emit("Conv", [x, w, ctx.optional_input(2)], attrs)


@translates("MaxPool", "AveragePool")
def pool(ctx: NodeContext) -> None:
    """MaxPool and AveragePool; MaxPool's Indices are computed only when a node reads them."""
    x = ctx.input(0)
    attrs = _window_attrs(ctx, x, ctx.attr("kernel_shape"))
    attrs["ceil_mode"] = ctx.attr("ceil_mode", 0)
    if ctx.op_type == "AveragePool":
        attrs["count_include_pad"] = ctx.attr("count_include_pad", 0)
    if ctx.op_type == "MaxPool" and ctx.output_used(1):
        attrs.update(indices=1, storage_order=ctx.attr("storage_order", 0))
        ctx.emit("MaxPool", [x], attrs, n_outputs=2)
        return
    ctx.emit(ctx.op_type, [x], attrs)


@translates("GlobalAveragePool", "GlobalMaxPool", "MatMul")
def plain(ctx: NodeContext) -> None:
    ctx.emit(ctx.op_type, ctx.inputs())


@translates("LRN")
def lrn(ctx: NodeContext) -> None:
    ctx.emit("LRN", [ctx.input(0)], merge_attrs(ctx, ["size", "alpha", "beta", "bias"]))


@translates("Gemm")
def gemm(ctx: NodeContext) -> None:
    attrs = merge_attrs(ctx, ["alpha", "beta", "transA", "transB"])
    ctx.emit("Gemm", [ctx.input(0), ctx.input(1), ctx.optional_input(2)], attrs)


@translates("Softmax")
def softmax(ctx: NodeContext) -> None:
    """Softmax with opset-13 semantics (older models were upgraded to them)."""
    ctx.emit("Softmax", [ctx.input(0)], {"axis": ctx.attr("axis", -1)})


@translates("Col2Im")
def col2im(ctx: NodeContext) -> None:
    """Col2Im with its image_shape and block_shape inputs constant."""
    attrs = merge_attrs(ctx, ["strides", "dilations", "pads"])
    attrs["image_shape"] = ctx.static_ints(1, "image_shape")
    attrs["block_shape"] = ctx.static_ints(2, "block_shape")
    ctx.emit("Col2Im", [ctx.input(0)], attrs)


@translates("MaxUnpool")
def max_unpool(ctx: NodeContext) -> None:
    """MaxUnpool with its output_shape input, when given, constant."""
    attrs = merge_attrs(ctx, ["kernel_shape", "strides", "pads"])
    if ctx.has_input(2):
        attrs["output_shape"] = ctx.static_ints(2, "output_shape")
    ctx.emit("MaxUnpool", [ctx.input(0), ctx.input(1)], attrs)


def _refuse_used_outputs(ctx: NodeContext, first: int, what: str) -> None:
    for i in range(first, ctx.num_outputs):
        if ctx.output_used(i):
            raise ctx.unsupported(
                f"its output {ctx.node.output[i]!r} ({what}) is used; hetero's "
                f"{ctx.op_type} computes the normalised tensor only"
            )


@translates("BatchNormalization")
def batch_norm(ctx: NodeContext) -> None:
    """BatchNormalization: the canonical op in inference mode; in training mode the batch's
    statistics and the updated running ones, from canonical reductions."""
    training = ctx.attr("training_mode", 0)
    if not training:
        _refuse_used_outputs(ctx, 1, "a running statistic of training mode")
    x = ctx.input(0)
    params = [ctx.input(i) for i in range(1, 5)]
    if training:
        _batch_norm_training(ctx, x, *params)
        return
    # Since opset 15 scale/bias and mean/var may have their own float types.
    params = [p if p.dtype == x.dtype else ctx.add("Cast", [p], {"to": x.dtype}, f"param{i}")
              for i, p in enumerate(params, start=1)]
    ctx.emit("BatchNormalization", [x, *params], merge_attrs(ctx, ["epsilon"]))


def _batch_norm_training(ctx: NodeContext, x: Value, scale: Value, bias: Value, mean: Value,
                         var: Value) -> None:
    """Y normalised by the batch's mean and (population) variance over every axis but 1;
    the running statistics ``r * momentum + batch * (1 - momentum)``, as onnx's reference."""
    rank, channels = x.type.rank, x.shape[1]
    axes = [0, *range(2, rank)]
    column = [1, channels] + [1] * (rank - 2)

    def like(v: Value, dtype: np.dtype, tag: str) -> Value:
        return v if v.dtype == dtype else ctx.add("Cast", [v], {"to": dtype}, tag)

    def scalar(value: float, dtype: np.dtype, tag: str) -> Value:
        return ctx.constant(np.array(value, dtype), tag)

    batch_mean = ctx.add("ReduceMean", [x], {"axes": axes, "keepdims": 1}, "batch_mean")
    centred = ctx.add("Sub", [x, batch_mean], None, "centred")
    batch_var = ctx.add("ReduceMean", [ctx.add("Mul", [centred, centred], None, "square")],
                        {"axes": axes, "keepdims": 1}, "batch_var")
    eps = scalar(ctx.attr("epsilon", 1e-5), x.dtype, "epsilon")
    std = ctx.add("Sqrt", [ctx.add("Add", [batch_var, eps], None, "var_eps")], None, "std")
    normal = ctx.add("Div", [centred, std], None, "normal")
    s = ctx.add("Reshape", [like(scale, x.dtype, "scale")], {"shape": column}, "scale_column")
    b = ctx.add("Reshape", [like(bias, x.dtype, "bias")], {"shape": column}, "bias_column")
    ctx.emit("Add", [ctx.add("Mul", [normal, s], None, "scaled"), b])
    momentum = ctx.attr("momentum", 0.9)
    for i, running, batch in ((1, mean, batch_mean), (2, var, batch_var)):
        if not ctx.output_used(i):
            continue
        dtype = running.dtype
        flat = like(ctx.add("Reshape", [batch], {"shape": [channels]}, f"batch_{i}"), dtype, f"cast_{i}")
        kept = ctx.add("Mul", [running, scalar(momentum, dtype, f"momentum_{i}")], None, f"kept_{i}")
        new = ctx.add("Mul", [flat, scalar(1.0 - momentum, dtype, f"rest_{i}")], None, f"new_{i}")
        ctx.emit_output(i, "Add", [kept, new])


#: LayerNormalization's stash_type (ONNX's U: float or bfloat16) as a dtype.
_STASH_TYPES = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.BFLOAT16: "bfloat16"}


@translates("LayerNormalization")
def layer_norm(ctx: NodeContext) -> None:
    """LayerNormalization; its Mean and InvStdDev are computed only when a node reads them."""
    attrs = merge_attrs(ctx, ["axis", "epsilon"])
    inputs = [ctx.input(0), ctx.input(1), ctx.optional_input(2)]
    if not (ctx.output_used(1) or ctx.output_used(2)):
        ctx.emit("LayerNormalization", inputs, attrs)
        return
    stash = ctx.attr("stash_type", onnx.TensorProto.FLOAT)
    if stash not in _STASH_TYPES:
        raise ctx.unsupported(
            f"stash_type {stash} is not float (1) or bfloat16 (16), the types ONNX allows "
            "for Mean and InvStdDev")
    attrs.update(statistics=1, stash_type=_STASH_TYPES[stash])
    ctx.emit("LayerNormalization", inputs, attrs, n_outputs=3)


def _check_precision(ctx: NodeContext) -> None:
    """QuantizeLinear-23's precision: hetero divides in float32 (float64 for float64 x)."""
    precision = ctx.attr("precision", 0)
    if not precision:
        return
    wanted, x = numpy_dtype(precision), ctx.input(0)
    computes = np.dtype(np.float64 if x.dtype == np.float64 else np.float32)
    if wanted != computes:
        raise ctx.unsupported(f"precision {dtype_name(precision)} is not supported: hetero "
                              f"divides {x.dtype.name} by the scale in {computes.name}")


@translates("QuantizeLinear")
def quantize(ctx: NodeContext) -> None:
    """QuantizeLinear; a missing zero point becomes an explicit zero of the output dtype."""
    _check_precision(ctx)
    x, scale = ctx.input(0), ctx.input(1)
    zero_point = ctx.optional_input(2)
    if zero_point is None:
        # Without a zero point the output is uint8, unless opset 21's output_dtype says otherwise.
        elem = ctx.attr("output_dtype", 0) or onnx.TensorProto.UINT8
        dtype = numpy_dtype(elem)
        if dtype is None:
            raise ctx.unsupported(f"quantisation to {dtype_name(elem)} is not supported")
        zero_point = ctx.constant(np.zeros(scale.shape, dtype), "zero_point")
    ctx.emit("QuantizeLinear", [x, scale, zero_point],
             merge_attrs(ctx, ["axis", "saturate", "block_size"]))


@translates("DequantizeLinear")
def dequantize(ctx: NodeContext) -> None:
    scale = ctx.input(1)
    wanted = ctx.attr("output_dtype", 0)
    if wanted and numpy_dtype(wanted) != scale.dtype:
        raise ctx.unsupported("an output_dtype other than the scale's dtype is not supported")
    inputs = [ctx.input(0), scale, ctx.optional_input(2)]
    ctx.emit("DequantizeLinear", inputs, merge_attrs(ctx, ["axis", "block_size"]))


#: What each further reduction computes over an empty set of axes when noop_with_empty_axes
#: is 1: its per-element part (each element reduced alone), as onnx's reference and
#: onnxruntime do.
_PER_ELEMENT = {"ReduceProd": "Identity", "ReduceL1": "Abs", "ReduceL2": "Abs",
                "ReduceSumSquare": "Mul", "ReduceLogSum": "Log", "ReduceLogSumExp": "Identity"}


@translates(*_PER_ELEMENT)
def reduce_more(ctx: NodeContext) -> None:
    """The further reductions; their axes come as translate_tensor's reductions' do (an
    attribute before opset 18, a constant input since)."""
    axes = ctx.static_ints(1, "axes")
    if axes is None:
        axes = ctx.attr("axes")
    if not axes and ctx.attr("noop_with_empty_axes", 0):
        x = ctx.input(0)
        op = _PER_ELEMENT[ctx.op_type]
        ctx.emit(op, [x, x] if op == "Mul" else [x])
        return
    reduce(ctx)


@translates("ArgMax", "ArgMin")
def arg_extreme(ctx: NodeContext) -> None:
    """ArgMax and ArgMin; select_last_index (opset 12) defaults to the first extreme."""
    attrs = {"axis": ctx.attr("axis", 0), "keepdims": ctx.attr("keepdims", 1),
             "select_last_index": ctx.attr("select_last_index", 0)}
    ctx.emit(ctx.op_type, [ctx.input(0)], attrs)


@translates("LogSoftmax", "Hardmax")
def log_softmax_hardmax(ctx: NodeContext) -> None:
    """LogSoftmax and Hardmax with opset-13 semantics: models below 13 were flattened to them
    on import (onnx's converter for LogSoftmax, :mod:`.opsets` for Hardmax)."""
    ctx.emit(ctx.op_type, [ctx.input(0)], {"axis": ctx.attr("axis", -1)})


@translates("InstanceNormalization")
def instance_norm(ctx: NodeContext) -> None:
    ctx.emit("InstanceNormalization", [ctx.input(0), ctx.input(1), ctx.input(2)],
             merge_attrs(ctx, ["epsilon"]))


@translates("GroupNormalization")
def group_norm(ctx: NodeContext) -> None:
    """GroupNormalization: its scale and bias are per group at opset 18, per channel at 21;
    the canonical op takes either. stash_type is moot: hetero normalises in float32 or wider."""
    attrs = {"num_groups": ctx.attr("num_groups"), "epsilon": ctx.attr("epsilon", 1e-5)}
    ctx.emit("GroupNormalization", [ctx.input(0), ctx.input(1), ctx.input(2)], attrs)


@translates("RMSNormalization")
def rms_norm(ctx: NodeContext) -> None:
    """RMSNormalization (opset 23); stash_type is moot: hetero normalises in float32 or wider."""
    attrs = {"axis": ctx.attr("axis", -1), "epsilon": ctx.attr("epsilon", 1e-5)}
    ctx.emit("RMSNormalization", [ctx.input(0), ctx.input(1)], attrs)


@translates("LpNormalization")
def lp_norm(ctx: NodeContext) -> None:
    p = ctx.attr("p", 2)
    if p not in (1, 2):
        raise ctx.unsupported(f"p={p}; ONNX defines LpNormalization for p 1 and 2 only")
    ctx.emit("LpNormalization", [ctx.input(0)], {"axis": ctx.attr("axis", -1), "p": p})


@translates("LpPool")
def lp_pool(ctx: NodeContext) -> None:
    """LpPool; dilations and ceil_mode arrive with opset 18 (their defaults before)."""
    x = ctx.input(0)
    attrs = _window_attrs(ctx, x, ctx.attr("kernel_shape"))
    attrs["ceil_mode"] = ctx.attr("ceil_mode", 0)
    attrs["p"] = ctx.attr("p", 2)
    ctx.emit("LpPool", [x], attrs)


@translates("GlobalLpPool")
def global_lp_pool(ctx: NodeContext) -> None:
    ctx.emit("GlobalLpPool", [ctx.input(0)], {"p": ctx.attr("p", 2)})


@translates("DeformConv")
def deform_conv(ctx: NodeContext) -> None:
    """DeformConv (opset 19), 2-D."""
    attrs = merge_attrs(ctx, ["kernel_shape", "strides", "pads", "dilations", "group", "offset_group"])
    inputs = [ctx.input(0), ctx.input(1), ctx.input(2), ctx.optional_input(3), ctx.optional_input(4)]
    ctx.emit("DeformConv", inputs, attrs)
