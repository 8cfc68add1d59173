"""Reading an ONNX model safely: the file and its structure (external data: :mod:`.external`).

The checks judge tensors by their declared dims and locations before any data is
read, so a hostile or broken file is rejected with a :mod:`hetero.errors` class that
names the file, the tensor or the node at fault, never with a protobuf or numpy
traceback, and without first allocating what it asks for.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
import math
import os
from typing import TYPE_CHECKING

import onnx
from google.protobuf.message import DecodeError
from onnx import helper

from hetero.core.frontend.light import light_model_path
from hetero.core.frontend.onnx.budget import check_elements
from hetero.errors import ModelLoadError

if TYPE_CHECKING:
    from hetero.core.frontend.onnx.functions import Expansion


@dataclass
class Source:
    """A model as read: the proto (hetero's own copy), a name for messages, its folder.

    ``set_aside`` holds the large float initializers while onnx's tools run (see
    :func:`set_weights_aside`); ``expansions`` says which nodes were replaced by their
    onnx function bodies (see :mod:`.functions`).
    """

    model: onnx.ModelProto
    name: str
    folder: str | None
    set_aside: dict[str, onnx.TensorProto] = field(default_factory=dict)
    expansions: list[Expansion] = field(default_factory=list)


def read_model(model: str | os.PathLike[str] | onnx.ModelProto) -> Source:
    """Read ``model`` (a path, ``light:NAME`` for a model onnx ships, or a proto) without
    touching its external data.

    A proto is copied, so the caller's object is never modified.
    """
    if isinstance(model, onnx.ModelProto):
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        name = model.graph.name or "<ModelProto>"
        _require_onnx(copy, f"model {name}")
        return Source(copy, name, None)
    path = os.fspath(model)
    if isinstance(path, str) and path.startswith("light:") and not os.path.exists(path):
        path = os.fspath(light_model_path(path.removeprefix("light:")))
    what = f"model file {path}"
    if not os.path.exists(path):
        raise ModelLoadError(f"{what} does not exist; check the path")
    if not os.path.isfile(path):
        raise ModelLoadError(f"{what} is not a regular file; pass the path of a .onnx file")
    if os.path.getsize(path) == 0:
        raise ModelLoadError(f"{what} is empty; re-export or re-download the model")
    try:
        proto = onnx.load(path, load_external_data=False)
    except DecodeError as exc:
        raise ModelLoadError(
            f"{what} is not a valid ONNX protobuf ({reason(exc)}); it may be truncated or not an "
            "ONNX file at all: re-export or re-download it"
        ) from None
    except OSError as exc:
        raise ModelLoadError(f"{what} cannot be read: {reason(exc)}") from None
    _require_onnx(proto, what)
    return Source(proto, os.path.basename(path), os.path.dirname(os.path.abspath(path)))


def reason(exc: BaseException) -> str:
    """An exception's message, trimmed to fit inside a sentence of ours."""
    return " ".join(str(exc).split()).rstrip(".") or type(exc).__name__


def _require_onnx(model: onnx.ModelProto, what: str) -> None:
    # Protobuf decodes many byte strings (even an empty one) into an empty message;
    # a real model always has an IR version, an opset import and a graph output.
    if model.ir_version <= 0 or not model.opset_import or not model.graph.output:
        raise ModelLoadError(
            f"{what} is not an ONNX model (it has no IR version, opset import or graph "
            "output); check that it was written by onnx.save or an ONNX exporter"
        )


def all_tensors(graph: onnx.GraphProto) -> Iterator[tuple[str, onnx.TensorProto]]:
    """Every tensor stored in ``graph`` and its subgraphs, with a name for messages."""
    for tensor in graph.initializer:
        yield f"initializer {tensor.name!r}", tensor
    for node in graph.node:
        label = node_label(node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield f"attribute {attr.name!r} of {label}", attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                for i, t in enumerate(attr.tensors):
                    yield f"attribute {attr.name}[{i}] of {label}", t
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from all_tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from all_tensors(g)


def fresh_name(base: str, taken: set[str]) -> str:
    """``base``, or the first of ``base_1``, ``base_2``, ... that ``taken`` lacks; the name
    chosen joins ``taken``, so each call gives a new one."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def node_label(node: onnx.NodeProto) -> str:
    """How messages name an ONNX node: its name, or its first output when it has none."""
    if node.name:
        return f"node {node.name!r} ({node.op_type})"
    first = next((o for o in node.output if o), "?")
    return f"the {node.op_type} node that computes {first!r}"


def check_tensor_sizes(source: Source, max_elements: int) -> None:
    """TensorTooLargeError for any stored tensor over the budget, judged from its dims."""
    for label, tensor in all_tensors(source.model.graph):
        if any(d < 0 for d in tensor.dims):
            raise ModelLoadError(
                f"model {source.name}: {label} has a negative dimension {list(tensor.dims)}; "
                "the file is corrupt"
            )
        check_elements(tensor.dims, f"model {source.name}: {label}", max_elements)


def check_element_types(source: Source) -> None:
    """ModelLoadError for a graph input, output or stored tensor without a valid element type.

    The ONNX format requires each to be one of ``TensorProto.DataType``'s values, never
    UNDEFINED; anything else marks a corrupt or crafted file, on which each later step
    (reading external data, onnx's tools, numpy) would fail less clearly.
    """
    graph = source.model.graph
    declared = [(f"input {v.name!r}", v) for v in graph.input]
    declared += [(f"output {v.name!r}", v) for v in graph.output]
    for label, info in declared:
        if info.type.WhichOneof("value") == "tensor_type":
            _check_element_type(info.type.tensor_type.elem_type, f"model {source.name}: {label}")
    for label, tensor in all_tensors(graph):
        _check_element_type(tensor.data_type, f"model {source.name}: {label}")


_ELEMENT_TYPES = frozenset(onnx.TensorProto.DataType.values()) - {onnx.TensorProto.UNDEFINED}


def _check_element_type(elem_type: int, where: str) -> None:
    if elem_type == onnx.TensorProto.UNDEFINED:
        raise ModelLoadError(
            f"{where} has no element type (UNDEFINED), which the ONNX format requires; the "
            "file is corrupt or its exporter is broken: re-export the model"
        )
    if elem_type not in _ELEMENT_TYPES:
        raise ModelLoadError(
            f"{where} has element type {elem_type}, which is not an ONNX element type "
            f"(the highest onnx {onnx.__version__} knows is {max(_ELEMENT_TYPES)}); the file is "
            "corrupt or was written for a newer ONNX: re-export the model"
        )


def check_defined_before_use(source: Source) -> None:
    """Every node input and graph output must be defined before it is read."""
    graph = source.model.graph
    defined = {""} | {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    for node in graph.node:
        for name in node.input:
            if name not in defined:
                raise ModelLoadError(
                    f"model {source.name}: {node_label(node)} reads {name!r}, which no graph "
                    "input, initializer or earlier node defines; the file may be truncated or "
                    "its nodes out of order: re-export the model"
                )
        defined.update(node.output)
    for out in graph.output:
        if out.name not in defined:
            raise ModelLoadError(
                f"model {source.name}: graph output {out.name!r} is not computed by any node; "
                "the file may be truncated: re-export the model"
            )


#: Float initializers from this many elements on are set aside while onnx's tools run.
SET_ASIDE_FROM = 1024


def set_weights_aside(source: Source) -> None:
    """Move the large float initializers into ``source.set_aside``, declared as graph inputs.

    onnx's checker, version converter and shape inference each serialise the whole
    model, weights included: seconds for VGG's half a gigabyte. Declared as inputs of
    the same type, the weights mean the same to them, and their values are never
    needed (shape computations use small integer tensors, which stay).
    """
    graph = source.model.graph
    declared = {v.name for v in graph.input}
    for i in reversed(range(len(graph.initializer))):
        tensor = graph.initializer[i]
        if tensor.data_type in _FLOAT_TYPES and math.prod(tensor.dims) >= SET_ASIDE_FROM:
            source.set_aside[tensor.name] = tensor
            del graph.initializer[i]  # the reference held above stays valid
            if tensor.name not in declared:
                graph.input.append(
                    helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))


_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                onnx.TensorProto.BFLOAT16)


def check_model(source: Source) -> None:
    """Run onnx's checker; its complaint becomes a ModelLoadError naming the model."""
    try:
        onnx.checker.check_model(source.model)
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise ModelLoadError(
            f"model {source.name} fails onnx's checker: {reason(exc)}; fix the exporter or "
            "the model"
        ) from None
