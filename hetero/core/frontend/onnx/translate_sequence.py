"""ONNX sequences and optionals whose contents are known at import, as Python lists and flags.

hetero's executables take and return tensors only, and its graph IR has no sequence
type. But a sequence whose length the import knows (built by SequenceConstruct or
SplitToSequence, grown one element per unrolled Loop iteration) is just a list of
tensors: :attr:`ModelContext.sequences` maps its ONNX name to the canonical values of
its elements, and each sequence op becomes list work at import (SequenceAt picks an
element, SequenceLength is a constant) plus the canonical ops that make or join
tensors (Split, Concat, Unsqueeze, Squeeze, Identity). Positions must fold.

An optional whose presence the import knows is bound as what it holds (a tensor in
``values``, a sequence in ``sequences``); an empty one is recorded by :func:`bind`
as absent, so OptionalHasElement folds to a constant.

A value of an ONNX name is therefore a :data:`Bound`: a tensor's canonical value, a
sequence's list of them, or :data:`ABSENT`. :func:`operand`, :func:`bind` and
:func:`check_operands` are what the driver and the control-flow translations use to
move such values by name; a sequence read by an op with no sequence translation, or
leaving the graph, is refused with an error naming the node or output.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
import onnx

from hetero.core.frontend.onnx.context import ModelContext, NodeContext, translates
from hetero.core.frontend.onnx.loader import node_label
from hetero.core.ir.graph import Value
from hetero.errors import ModelLoadError, ShapeError, UnsupportedOpError


class _Absent:
    """The value of an optional known at import to be empty."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()

#: What an ONNX name holds at import: a tensor, a sequence of tensors, or an empty optional.
Bound = Value | list[Value] | _Absent

#: ONNX ops whose translation takes sequence or optional operands (Loop as carried state).
SEQUENCE_OPERAND_OPS: Final = frozenset({
    "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength", "ConcatFromSequence",
    "Optional", "OptionalHasElement", "OptionalGetElement", "Loop",
})

#: The most elements a SplitToSequence may make (each is a canonical value of its own).
MAX_SEQUENCE_LENGTH: Final = 20_000

def is_bound(model: ModelContext, name: str) -> bool:
    """Whether the import has given ONNX value ``name`` a tensor, sequence or absence."""
    return name in model.values or name in model.sequences or name in model.absent


def lookup(model: ModelContext, name: str) -> Bound:
    """What ONNX value ``name`` holds (it must be bound: see :func:`is_bound`)."""
    if name in model.values:
        return model.values[name]
    if name in model.sequences:
        return model.sequences[name]
    if name in model.absent:
        return ABSENT
    raise KeyError(name)


def bind(model: ModelContext, name: str, value: Bound) -> None:
    """Give ONNX value ``name`` the tensor, sequence or absence ``value``, replacing any
    earlier binding of another kind (a Loop body's names are rebound each iteration)."""
    model.values.pop(name, None)
    model.sequences.pop(name, None)
    model.absent.discard(name)
    if isinstance(value, Value):
        model.values[name] = value
    elif isinstance(value, list):
        model.sequences[name] = list(value)
    else:
        model.absent.add(name)


def check_operands(model: ModelContext, node: onnx.NodeProto) -> None:
    """UnsupportedOpError when ``node`` reads a sequence or an optional but its op's
    translation takes tensors only (an Identity of a sequence, say)."""
    if node.op_type in SEQUENCE_OPERAND_OPS:
        return
    for i, name in enumerate(node.input):
        if name and (name in model.sequences or name in model.absent):
            what = "a sequence" if name in model.sequences else "an empty optional"
            raise UnsupportedOpError(
                f"model {model.model_name}: {node_label(node)}: its input {i} ({name!r}) is "
                f"{what}, which hetero's {node.op_type} translation does not take (the "
                "sequence and optional ops and Loop do); rewrite the model so that "
                f"{node.op_type} reads a tensor (a SequenceAt of the sequence, say)"
            )


def graph_output(model: ModelContext, info: onnx.ValueInfoProto) -> Value:
    """The canonical value of graph output ``info``; ModelLoadError for a sequence or an
    optional (declared so, or bound so), since executables return tensors only."""
    declared = info.type.WhichOneof("value")
    if info.name in model.values and declared in (None, "tensor_type"):
        return model.values[info.name]
    if declared not in (None, "tensor_type"):
        what = f"a {declared}"
    else:
        what = "a sequence" if info.name in model.sequences else "an empty optional"
    raise ModelLoadError(
        f"model {model.model_name}: output {info.name!r} is {what}, not a tensor; hetero's "
        "executables return tensor outputs only: output the tensors it holds instead "
        "(SequenceAt, ConcatFromSequence, OptionalGetElement)"
    )


# -- reading operands ------------------------------------------------------------------
def operand(ctx: NodeContext, i: int) -> Bound:
    """What the node's ``i``-th input holds; an omitted input is an empty optional."""
    if not ctx.has_input(i):
        return ABSENT
    name = ctx.node.input[i]
    if not is_bound(ctx.model, name):
        raise ctx.unsupported(f"its input {i} ({name!r}) is computed by no node hetero imports")
    return lookup(ctx.model, name)


def _sequence(ctx: NodeContext, i: int) -> list[Value]:
    """The elements of the node's ``i``-th input, which must be a sequence."""
    value = operand(ctx, i)
    if not isinstance(value, list):
        kind = "a tensor" if isinstance(value, Value) else "an empty optional"
        raise ctx.unsupported(f"its input {i} ({ctx.node.input[i]!r}) is {kind}, where the op "
                              "takes a sequence; the model is malformed")
    return value


def _tensor(ctx: NodeContext, i: int) -> Value:
    value = operand(ctx, i)
    if not isinstance(value, Value):
        raise ctx.unsupported(f"its input {i} ({ctx.node.input[i]!r}) is not a tensor, where the "
                              "op takes one; the model is malformed")
    return value


def _check_dtype(ctx: NodeContext, elements: list[Value], tensor: Value, what: str) -> None:
    """ShapeError when ``tensor`` would join a sequence of another element type."""
    if elements and tensor.dtype != elements[0].dtype:
        raise ShapeError(
            f"model {ctx.model.model_name}: {ctx.label}: {what} has element type "
            f"{tensor.dtype}, but the sequence holds {elements[0].dtype}; a sequence's "
            "elements share one type: Cast it first"
        )


def _position(ctx: NodeContext, i: int, length: int, default: int, insert: bool) -> int:
    """Input ``i`` (a folded scalar, ``default`` if absent) as an index into ``length``
    elements, negative ones counted from the end; an insertion may also be at ``length``."""
    given = ctx.static_ints(i, "position")
    if given is None:
        return default
    if len(given) != 1:
        raise ctx.unsupported(f"its position has {len(given)} values, where ONNX takes a scalar")
    (position,) = given
    high = length if insert else length - 1
    if not -length <= position <= high:
        raise ctx.unsupported(
            f"its position {position} is out of range for a sequence of {length} element(s) "
            f"(ONNX allows {-length} to {high}); the model fails here at run time")
    return position + length if position < 0 else position


def _bind_output(ctx: NodeContext, value: Bound) -> None:
    """Make ``value`` the node's output: a tensor through an Identity that carries the
    ONNX name (the rewrite passes drop it), a sequence or absence by name."""
    if isinstance(value, Value):
        ctx.emit("Identity", [value])
    else:
        bind(ctx.model, ctx.node.output[0], value)


# -- sequences ------------------------------------------------------------------------
@translates("SequenceEmpty")
def sequence_empty(ctx: NodeContext) -> None:
    """An empty list (onnx's type inference holds its ``dtype`` to its later elements)."""
    bind(ctx.model, ctx.node.output[0], [])


@translates("SequenceConstruct")
def sequence_construct(ctx: NodeContext) -> None:
    elements: list[Value] = []
    for i in range(len(ctx.node.input)):
        tensor = _tensor(ctx, i)
        _check_dtype(ctx, elements, tensor, f"input {i} ({ctx.node.input[i]!r})")
        elements.append(tensor)
    bind(ctx.model, ctx.node.output[0], elements)


@translates("SequenceInsert")
def sequence_insert(ctx: NodeContext) -> None:
    """The tensor inserted before ``position`` (at the end without one)."""
    elements = list(_sequence(ctx, 0))
    tensor = _tensor(ctx, 1)
    _check_dtype(ctx, elements, tensor, f"the inserted tensor {ctx.node.input[1]!r}")
    elements.insert(_position(ctx, 2, len(elements), len(elements), insert=True), tensor)
    bind(ctx.model, ctx.node.output[0], elements)


@translates("SequenceAt")
def sequence_at(ctx: NodeContext) -> None:
    elements = _sequence(ctx, 0)
    if not ctx.has_input(1):
        raise ctx.unsupported("it lacks its required position input; the model is malformed")
    _bind_output(ctx, elements[_position(ctx, 1, len(elements), 0, insert=False)])


@translates("SequenceErase")
def sequence_erase(ctx: NodeContext) -> None:
    """The sequence without the element at ``position`` (the last without one)."""
    elements = list(_sequence(ctx, 0))
    if not elements:
        raise ctx.unsupported("it erases from an empty sequence; the model fails here at run time")
    del elements[_position(ctx, 1, len(elements), len(elements) - 1, insert=False)]
    bind(ctx.model, ctx.node.output[0], elements)


@translates("SequenceLength")
def sequence_length(ctx: NodeContext) -> None:
    ctx.bind_constant(np.array(len(_sequence(ctx, 0)), np.int64))


@translates("SplitToSequence")
def split_to_sequence(ctx: NodeContext) -> None:
    """One Split into the parts ``split`` gives (a scalar: chunks of that size, the last
    smaller; none: size 1, squeezed unless ``keepdims``)."""
    data = _tensor(ctx, 0)
    rank = data.type.rank
    axis = ctx.attr("axis", 0)
    if not -rank <= axis < rank:
        raise ShapeError(f"model {ctx.model.model_name}: {ctx.label}: axis {axis} is out of "
                         f"range for {data.type}")
    axis %= rank
    dim = data.shape[axis]
    split = ctx.static(1, "split")
    squeeze = split is None and not ctx.attr("keepdims", 1)
    if split is None:
        sizes = [1] * dim
    elif np.ndim(split) == 0:
        chunk = int(split)
        if chunk <= 0:
            raise ctx.unsupported(f"its split {chunk} is not positive; the model is malformed")
        sizes = [min(chunk, dim - k * chunk) for k in range(math.ceil(dim / chunk))]
    else:
        sizes = [int(s) for s in np.asarray(split).ravel()]
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise ShapeError(f"model {ctx.model.model_name}: {ctx.label}: split {sizes} does not "
                             f"cut dimension {axis} of {data.type} (of size {dim}) into parts")
    if not sizes:
        bind(ctx.model, ctx.node.output[0], [])
        return
    if len(sizes) > MAX_SEQUENCE_LENGTH:
        raise ctx.unsupported(f"it splits {data.type} into {len(sizes)} parts, more than the "
                              f"{MAX_SEQUENCE_LENGTH} hetero keeps as a sequence at import; "
                              "split it into fewer, larger parts")
    model = ctx.model
    base = ctx.node.output[0]
    # One Split with many outputs, none bound to an ONNX name (the sequence is a list);
    # its parts are no larger than its input, which the element budget already took.
    node = model.graph.add_node(
        "Split", [data], {"axis": axis, "split": sizes}, name=model.fresh(f"{base}/split"),
        output_names=[model.fresh(f"{base}/{k}") for k in range(len(sizes))])
    parts = list(node.outputs)
    if squeeze:
        parts = [ctx.add("Squeeze", [p], {"axes": [axis]}, f"squeeze_{k}")
                 for k, p in enumerate(parts)]
    bind(model, base, parts)


@translates("ConcatFromSequence")
def concat_from_sequence(ctx: NodeContext) -> None:
    """A Concat of the elements along ``axis``; with ``new_axis``, each Unsqueezed first."""
    elements = _sequence(ctx, 0)
    if not elements:
        raise ctx.unsupported("its sequence is empty, so its output has no shape; the model "
                              "fails here at run time")
    rank = elements[0].type.rank + (1 if ctx.attr("new_axis", 0) else 0)
    axis = ctx.attr("axis")
    if axis is None:
        raise ctx.unsupported("it lacks its required axis attribute; the model is malformed")
    if not -rank <= axis < rank:
        raise ShapeError(f"model {ctx.model.model_name}: {ctx.label}: axis {axis} is out of "
                         f"range for elements of type {elements[0].type}")
    axis %= rank
    parts = elements
    if ctx.attr("new_axis", 0):
        parts = [ctx.add("Unsqueeze", [e], {"axes": [axis]}, f"unsqueeze_{k}")
                 for k, e in enumerate(elements)]
    ctx.emit("Concat", parts, {"axis": axis})


# -- optionals ------------------------------------------------------------------------
@translates("Optional")
def optional(ctx: NodeContext) -> None:
    """The optional of its input (what the input holds), or an empty one of ``type``."""
    declared = ctx.attr("type")
    if not ctx.has_input(0):
        if declared is None:
            raise ModelLoadError(f"model {ctx.model.model_name}: {ctx.label}: an Optional without "
                                 "an input must give its type attribute; the model is malformed")
        bind(ctx.model, ctx.node.output[0], ABSENT)
        return
    value = operand(ctx, 0)
    if value is ABSENT:
        raise ctx.unsupported("its input is itself an optional, which ONNX's Optional does not "
                              "take; the model is malformed")
    if declared is not None:
        _check_declared(ctx, declared, value)
    _bind_output(ctx, value)


def _check_declared(ctx: NodeContext, declared: onnx.TypeProto, value: Bound) -> None:
    """ShapeError when the Optional's ``type`` attribute disagrees with its input."""
    kind = declared.WhichOneof("value")
    if kind != ("sequence_type" if isinstance(value, list) else "tensor_type"):
        raise ShapeError(f"model {ctx.model.model_name}: {ctx.label}: its type attribute says "
                         f"{kind}, which its input {ctx.node.input[0]!r} is not")
    elements = value if isinstance(value, list) else [value]
    if isinstance(value, list):
        declared = declared.sequence_type.elem_type
    if elements and declared.WhichOneof("value") == "tensor_type":
        elem = onnx.helper.tensor_dtype_to_np_dtype(declared.tensor_type.elem_type)
        if elements[0].dtype != elem:
            raise ShapeError(f"model {ctx.model.model_name}: {ctx.label}: its type attribute "
                             f"says element type {elem}, but its input {ctx.node.input[0]!r} "
                             f"holds {elements[0].dtype}")


@translates("OptionalHasElement")
def optional_has_element(ctx: NodeContext) -> None:
    """A constant: whether the optional (a tensor or sequence counts as present) holds one."""
    ctx.bind_constant(np.array(operand(ctx, 0) is not ABSENT))


@translates("OptionalGetElement")
def optional_get_element(ctx: NodeContext) -> None:
    """What the optional holds (a tensor or sequence passes through, as ONNX allows)."""
    value = operand(ctx, 0)
    if value is ABSENT:
        raise ctx.unsupported(f"its input {ctx.node.input[0] if ctx.has_input(0) else '(omitted)'}"
                              " is an empty optional, whose element ONNX cannot get: the model "
                              "fails here at run time")
    _bind_output(ctx, value)
