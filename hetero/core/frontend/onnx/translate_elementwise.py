"""Translators of ONNX's elementwise ops, Constant, Cast, Clip and Dropout.

Most are one-to-one; ONNX's n-ary Sum, Max and Min become chains of binary ops, and
Mean such a sum divided by the count.
"""

from __future__ import annotations

import numpy as np

from hetero.core.frontend.onnx.context import NodeContext, merge_attrs, translates
from hetero.core.frontend.onnx.shapes import dtype_name, numpy_dtype
from hetero.core.ir.types import as_dtype
from hetero.errors import HeteroError

_SAME_NAME = (
    "Relu", "Sigmoid", "HardSwish", "Tanh", "Erf", "Sqrt", "Exp", "Log", "Reciprocal",
    "Floor", "Ceil", "Neg", "Abs", "Not", "Identity",
    "Add", "Sub", "Mul", "Div", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "And", "Or", "Where",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "Round", "Sign", "IsNaN", "Softplus", "Softsign", "Mish", "PRelu",
    "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot",
)

#: ONNX ops that map to the canonical op of the same name with these of their attributes.
_WITH_ATTRS = {
    "IsInf": ("detect_positive", "detect_negative"), "Mod": ("fmod",), "Elu": ("alpha",),
    "Selu": ("alpha", "gamma"), "Celu": ("alpha",), "ThresholdedRelu": ("alpha",),
    "Shrink": ("lambd", "bias"), "Swish": ("alpha",), "BitShift": ("direction",),
}


@translates(*_SAME_NAME)
def same_name(ctx: NodeContext) -> None:
    """Ops whose canonical form is the ONNX op itself, without attributes."""
    ctx.emit(ctx.op_type, ctx.inputs())


@translates(*_WITH_ATTRS)
def with_attrs(ctx: NodeContext) -> None:
    """Ops whose canonical form is the ONNX op with the attributes it sets."""
    ctx.emit(ctx.op_type, ctx.inputs(), merge_attrs(ctx, _WITH_ATTRS[ctx.op_type]))


@translates("LeakyRelu")
def leaky_relu(ctx: NodeContext) -> None:
    ctx.emit("LeakyRelu", [ctx.input(0)], merge_attrs(ctx, ["alpha"]))


@translates("HardSigmoid")
def hard_sigmoid(ctx: NodeContext) -> None:
    ctx.emit("HardSigmoid", [ctx.input(0)], merge_attrs(ctx, ["alpha", "beta"]))


@translates("Gelu")
def gelu(ctx: NodeContext) -> None:
    ctx.emit("Gelu", [ctx.input(0)], merge_attrs(ctx, ["approximate"]))


@translates("Pow")
def power(ctx: NodeContext) -> None:
    """Pow; ONNX lets the exponent have its own dtype, the canonical op does not.

    An integer base with a float exponent is raised in float64 and truncated back, as
    onnx's reference (numpy's promotion) and onnxruntime do: 3 ** 1.5 is 5, not 3 ** 1.
    """
    base, exponent = ctx.input(0), ctx.input(1)
    if base.dtype.kind in "iu" and exponent.dtype.kind not in "iu":
        wide = np.dtype(np.float64)
        base_wide = ctx.add("Cast", [base], {"to": wide}, "base_wide")
        if exponent.dtype != wide:
            exponent = ctx.add("Cast", [exponent], {"to": wide}, "exponent_wide")
        power = ctx.add("Pow", [base_wide, exponent], purpose="power_wide")
        ctx.emit("Cast", [power], {"to": base.dtype})
        return
    if exponent.dtype != base.dtype:
        exponent = ctx.add("Cast", [exponent], {"to": base.dtype}, "exponent")
    ctx.emit("Pow", [base, exponent])


@translates("Sum", "Max", "Min")
def variadic(ctx: NodeContext) -> None:
    """n-ary Sum/Max/Min as a left-to-right chain of binary ops (Identity for one input)."""
    op = "Add" if ctx.op_type == "Sum" else ctx.op_type
    operands = ctx.inputs()
    if len(operands) == 1:
        ctx.emit("Identity", operands)
        return
    acc = operands[0]
    for i, operand in enumerate(operands[1:-1], start=1):
        acc = ctx.add(op, [acc, operand], purpose=f"{op.lower()}{i}")
    ctx.emit(op, [acc, operands[-1]])


@translates("Mean")
def mean(ctx: NodeContext) -> None:
    """n-ary Mean as the left-to-right sum of its inputs (broadcast), divided by n."""
    operands = ctx.inputs()
    if len(operands) == 1:
        ctx.emit("Identity", operands)
        return
    acc = operands[0]
    for i, operand in enumerate(operands[1:], start=1):
        acc = ctx.add("Add", [acc, operand], purpose=f"add{i}")
    count = ctx.constant(np.array(len(operands), operands[0].dtype), "count")
    ctx.emit("Div", [acc, count])


@translates("Clip")
def clip(ctx: NodeContext) -> None:
    """Clip; its optional bound inputs become attributes (older attribute bounds were
    turned into inputs by the opset upgrade). A bound computed at run time changes no
    shape, so it stays an operand: Max with the lower bound, then Min with the upper,
    which is Clip's definition (a lower bound above the upper gives the upper)."""
    attrs, late = {}, []
    for i, bound in ((1, "min"), (2, "max")):
        if not ctx.has_input(i):
            continue
        value = ctx.model.evaluate(ctx.input(i), f"{ctx.label}: its {bound} input")
        if value is None:
            late.append(("Max" if bound == "min" else "Min", ctx.input(i)))
        else:
            attrs[bound] = float(value)
    steps = ([("Clip", None)] if attrs or not late else []) + late
    x = ctx.input(0)
    for k, (op, bound) in enumerate(steps):
        operands = [x] if bound is None else [x, bound]
        if k == len(steps) - 1:
            ctx.emit(op, operands, attrs if op == "Clip" else None)
        else:
            x = ctx.add(op, operands, attrs if op == "Clip" else None)


@translates("Cast")
def cast(ctx: NodeContext) -> None:
    to = ctx.attr("to")
    dtype = numpy_dtype(to)
    if dtype is None:
        raise ctx.unsupported(f"cast to {dtype_name(to)} is not supported")
    attrs = {"to": dtype, "saturate": int(ctx.attr("saturate", 1))}
    if ctx.has_attr("round_mode"):
        attrs["round_mode"] = ctx.attr("round_mode")
    ctx.emit("Cast", [ctx.input(0)], attrs)


@translates("CastLike")
def cast_like(ctx: NodeContext) -> None:
    """CastLike: a Cast to its second input's dtype (onnx's function body, as one node, so
    that it also imports where bodies are not expanded: inside an If's branch)."""
    attrs = {"to": ctx.input(1).dtype, "saturate": int(ctx.attr("saturate", 1))}
    if ctx.has_attr("round_mode"):
        attrs["round_mode"] = ctx.attr("round_mode")
    ctx.emit("Cast", [ctx.input(0)], attrs)


@translates("Dropout")
def dropout(ctx: NodeContext) -> None:
    """Dropout in inference mode, or in training mode with ratio 0: the identity, whose
    mask output is all true. Training mode with another ratio is refused."""
    training = ctx.static(2, "training_mode")
    if training is not None and bool(np.asarray(training).item()):
        ratio = ctx.static(1, "ratio")
        ratio = 0.5 if ratio is None else float(np.asarray(ratio).item())
        if ratio != 0.0:
            raise ctx.unsupported(
                f"training_mode is true with ratio {ratio}; hetero compiles for inference, "
                "where Dropout is the identity: export the model in eval mode"
            )
    ctx.emit("Dropout", [ctx.input(0)])
    if ctx.output_used(1):
        mask = np.ones(ctx.input(0).shape, dtype=bool)
        name = ctx.node.output[1]
        ctx.model.values[name] = ctx.model.graph.add_constant(mask, name)


@translates("Constant")
def constant(ctx: NodeContext) -> None:
    """A Constant node becomes a graph constant named after its output."""
    if ctx.has_attr("value"):
        array = ctx.attr("value")
    elif ctx.has_attr("value_float"):
        array = np.array(ctx.attr("value_float"), np.float32)
    elif ctx.has_attr("value_floats"):
        array = np.array(ctx.attr("value_floats"), np.float32)
    elif ctx.has_attr("value_int"):
        array = np.array(ctx.attr("value_int"), np.int64)
    elif ctx.has_attr("value_ints"):
        array = np.array(ctx.attr("value_ints"), np.int64)
    else:
        kinds = [a.name for a in ctx.node.attribute]
        raise ctx.unsupported(
            f"a constant given as {kinds} is not supported (numeric tensors only)")
    try:
        as_dtype(array.dtype)
    except HeteroError:
        raise ctx.unsupported(f"constants of dtype {array.dtype} are not supported") from None
    ctx.bind_constant(array)
