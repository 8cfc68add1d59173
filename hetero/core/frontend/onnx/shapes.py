"""Static input shapes and the cross-check against onnx's own shape inference.

hetero's IR has static shapes only, so every graph input must end up with a fixed
shape: the model's declared one, or the one the caller passes in ``input_shapes``.
Those shapes are written into the model so that onnx's shape inference can validate
it, and the types onnx infers are later compared with the ones hetero infers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import math

import numpy as np
import onnx
from onnx import helper

from hetero.core.frontend.onnx.budget import DEFAULT_MAX_ELEMENTS, check_elements
from hetero.core.frontend.onnx.loader import Source, reason
from hetero.core.ir.types import TensorType, as_dtype
from hetero.errors import (
    DynamicInputError, DynamicShapeError, HeteroError, InputError, Keyword, ModelLoadError,
    did_you_mean,
)


def numpy_dtype(elem_type: int) -> np.dtype | None:
    """The numpy dtype hetero uses for an ONNX element type, or None if it has none."""
    try:
        return as_dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError, HeteroError):
        return None


def dtype_name(elem_type: int) -> str:
    """The ONNX name of an element type ("FLOAT", "STRING", ...); the number if it has none."""
    try:
        return onnx.TensorProto.DataType.Name(elem_type)
    except ValueError:
        return f"{elem_type} (not an ONNX element type)"


def graph_inputs(source: Source) -> list[onnx.ValueInfoProto]:
    """The model's real inputs: graph inputs that are not initializers (old IR lists both)."""
    graph = source.model.graph
    initialized = {t.name for t in graph.initializer} | set(source.set_aside)
    return [v for v in graph.input if v.name not in initialized]


def resolve_input_shapes(
    source: Source, input_shapes: Mapping[str, Sequence[int]] | None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> dict[str, TensorType]:
    """Every real input's static type; the fixed shapes are written into the model.

    ``input_shapes`` overrides or completes the declared shapes. A dimension left
    dynamic raises :class:`DynamicShapeError` saying how to fix it; an input over the
    element budget raises :class:`TensorTooLargeError` before onnx's tools see it.
    """
    inputs = graph_inputs(source)
    names = [v.name for v in inputs]
    given = dict(input_shapes or {})
    for name in given:
        if name not in names:
            raise InputError(
                f"{{shapes}} names {name!r}, which is not an input of model "
                f"{source.name}{did_you_mean(name, names)}; its inputs are {names}",
                shapes=Keyword("input_shapes"))
    dynamic = [info for info in inputs if info.name not in given and _dynamic_dims(info)]
    if dynamic and all(_declared_rank(info) is not None for info in inputs):
        names = [info.name for info in dynamic]
        listed = "; ".join(_dynamic_labels(info) for info in dynamic)
        raise DynamicInputError(
            f"model {source.name}: {listed}; fix them with "
            "{shapes}, or run the model through hetero.compile, which compiles once per input "
            "shape", inputs=tuple(names),
            model_inputs=[(info.name, tuple(_dims(info)), _dtype_of(source, info)) for info in inputs],
            shapes=Keyword("input_shapes", key=names[0], function="load_onnx"))
    types: dict[str, TensorType] = {}
    for info in inputs:
        types[info.name] = _input_type(source, info, given.get(info.name))
        check_elements(types[info.name].shape, f"model {source.name}: input {info.name!r}",
                       max_elements)
        _set_shape(info, types[info.name].shape)
    if given:
        # Shapes declared for the other values were derived from the old input shapes.
        graph = source.model.graph
        del graph.value_info[:]
        for info in graph.output:
            for dim in info.type.tensor_type.shape.dim:
                dim.Clear()
    return types


def _declared_rank(info: onnx.ValueInfoProto) -> int | None:
    if info.type.WhichOneof("value") != "tensor_type" or not info.type.tensor_type.HasField("shape"):
        return None
    return len(info.type.tensor_type.shape.dim)


def _dims(info: onnx.ValueInfoProto) -> list[int | None]:
    """The declared dims, a dynamic one as None (a rank must be declared)."""
    return [d.dim_value if d.HasField("dim_value") else None for d in info.type.tensor_type.shape.dim]


def _dynamic_dims(info: onnx.ValueInfoProto) -> bool:
    return _declared_rank(info) is not None and None in _dims(info)


def _dynamic_labels(info: onnx.ValueInfoProto) -> str:
    """``input 'x': dimension 0 is dynamic ('batch')``, every dynamic dim of ``info``."""
    dims = [(i, d) for i, d in enumerate(info.type.tensor_type.shape.dim) if not d.HasField("dim_value")]
    said = ", ".join(f"dimension {i} is dynamic ({repr(d.dim_param) if d.dim_param else 'of unknown size'})"
                     for i, d in dims)
    return f"input {info.name!r}: {said}"


def _dtype_of(source: Source, info: onnx.ValueInfoProto) -> str:
    dtype = numpy_dtype(info.type.tensor_type.elem_type)
    if dtype is None:
        raise ModelLoadError(f"model {source.name}: input {info.name!r} has element type "
                             f"{dtype_name(info.type.tensor_type.elem_type)}, which hetero does not support")
    return dtype.name


def _set_shape(info: onnx.ValueInfoProto, shape: Sequence[int]) -> None:
    tensor = info.type.tensor_type
    tensor.ClearField("shape")
    tensor.shape.SetInParent()
    for d in shape:
        tensor.shape.dim.add().dim_value = d


def _input_type(
    source: Source, info: onnx.ValueInfoProto, override: Sequence[int] | None
) -> TensorType:
    where = f"model {source.name}: input {info.name!r}"
    if info.type.WhichOneof("value") != "tensor_type":
        raise ModelLoadError(
            f"{where} is a {info.type.WhichOneof('value')}, not a tensor; hetero imports "
            "tensor inputs only"
        )
    tensor = info.type.tensor_type
    dtype = numpy_dtype(tensor.elem_type)
    if dtype is None:
        raise ModelLoadError(
            f"{where} has element type {dtype_name(tensor.elem_type)}, "
            "which hetero does not support"
        )
    declared = list(tensor.shape.dim) if tensor.HasField("shape") else None
    if override is not None:
        shape = [int(d) for d in override]
        if any(d < 0 for d in shape):
            raise InputError(f"{{shapes}} gives {info.name!r} a negative dimension: {shape}",
                             shapes=Keyword("input_shapes"))
        if declared is not None and len(declared) != len(shape):
            raise InputError(
                f"{{shapes}} gives {info.name!r} the shape {shape} of rank {len(shape)}, but "
                f"model {source.name} declares rank {len(declared)}", shapes=Keyword("input_shapes"))
        return TensorType(shape, dtype)
    hint = {"shapes": Keyword("input_shapes", key=info.name, function="load_onnx")}
    if declared is None:
        raise DynamicShapeError(f"{where} has no declared shape (not even a rank); fix it with {{shapes}}",
                                **hint)
    shape = []
    for i, dim in enumerate(declared):
        if not dim.HasField("dim_value"):
            label = f"'{dim.dim_param}'" if dim.dim_param else "of unknown size"
            raise DynamicShapeError(f"{where}: dimension {i} is dynamic ({label}); fix it with {{shapes}}",
                                    **hint)
        if dim.dim_value < 0:
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in declared]
            raise ModelLoadError(f"{where} declares dimension {i} as {dim.dim_value}, a negative size (its "
                                 f"shape is {dims}); re-export the model, or give the input's real shape with "
                                 "{shapes}", **hint)
        shape.append(dim.dim_value)
    return TensorType(shape, dtype)


#: The most elements of propagated data onnx may hold for one model (~100 MB in onnx).
SHAPE_DATA_LIMIT = 2**20


def infer_onnx_types(source: Source, opset: int) -> dict[str, TensorType]:
    """onnx's inferred type of every value it types statically (and correctly).

    Runs ``onnx.shape_inference.infer_shapes`` in strict mode; an inconsistency it finds
    is a ModelLoadError. A second run with data propagation follows shape computations
    (``Shape -> Gather -> Concat -> Reshape``), but onnx's propagation spells out, as
    one dimension record each, every value of each 1-D tensor that reaches an op it
    propagates (``Add``, ``Gather``, ``Concat``, ...): 2**30 of them for a 71-byte model
    with an int64 input of that length: tens of seconds, then ``std::bad_alloc``.
    So the second run happens only when the first left a value untyped and shows
    those tensors' total length within :data:`SHAPE_DATA_LIMIT`; otherwise onnx's
    types come without it (hetero's own shapes never depend on onnx's; only the
    cross-check sees fewer values).
    """
    inferred = _infer(source, data_prop=False)
    values = [*inferred.graph.value_info, *inferred.graph.output]
    typed = {info.name: _static_type(info) for info in values}
    if None in typed.values() and _propagated_elements(inferred) <= SHAPE_DATA_LIMIT:
        inferred = _infer(source, data_prop=True)
        typed = {info.name: _static_type(info)
                 for info in (*inferred.graph.value_info, *inferred.graph.output)}
    untrusted = _misinferred(inferred.graph, opset)
    return {name: t for name, t in typed.items() if t is not None and name not in untrusted}


def _infer(source: Source, data_prop: bool) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(
            source.model, check_type=True, strict_mode=True, data_prop=data_prop
        )
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError, RuntimeError) as exc:
        raise ModelLoadError(
            f"model {source.name} fails onnx's shape inference with the given input shapes: "
            f"{reason(exc)}"
        ) from None
    except MemoryError:
        raise ModelLoadError(
            f"model {source.name}: onnx's shape inference ran out of memory; the model may "
            "describe tensors far larger than it needs: check its shapes"
        ) from None


def _propagated_elements(inferred: onnx.ModelProto) -> float:
    """An upper bound on the values onnx's data propagation would spell out for the model.

    ``inferred`` is the model typed without propagation. Each input and output of a
    node whose op propagates data counts with its length when it is a scalar or 1-D
    (what onnx spells out; it never does for higher ranks); a value of unknown rank or
    length, or a node with subgraphs, makes the bound infinite.
    """
    graph = inferred.graph
    dims: dict[str, list[int | None] | None] = {t.name: list(t.dims) for t in graph.initializer}
    for info in (*graph.input, *graph.value_info, *graph.output):
        dims[info.name] = _declared_dims(info)
    version = next((o.version for o in inferred.opset_import if o.domain in ("", "ai.onnx")), 0)
    total = 0
    for node in graph.node:
        if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for a in node.attribute):
            return math.inf
        if not _propagates(node, version):
            continue
        for name in (*node.input, *node.output):
            if not name:
                continue
            shape = dims.get(name)
            if shape is None or (len(shape) == 1 and shape[0] is None):
                return math.inf
            if len(shape) <= 1:
                total += shape[0] if shape else 1
    return total


def _propagates(node: onnx.NodeProto, version: int) -> bool:
    """Whether onnx's schema for ``node`` has a data propagation function."""
    if node.domain not in ("", "ai.onnx"):
        return True  # unknown to us: assume the worst
    try:
        schema = onnx.defs.get_schema(node.op_type, version, "")
    except onnx.defs.SchemaError:
        return True
    return schema.has_data_propagation_function


def _declared_dims(info: onnx.ValueInfoProto) -> list[int | None] | None:
    """A tensor value's dims (None for an unknown one), or None for an unknown rank."""
    if info.type.WhichOneof("value") != "tensor_type":
        return None
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]


def _misinferred(graph: onnx.GraphProto, opset: int) -> set[str]:
    """Values whose shape onnx's inference is known to get wrong, and all that follow them.

    Before opset 22, onnx infers one output too many for a ceil-mode pool whose last
    window would start in the end padding (onnx issue 5711, fixed for opset 22 only);
    onnxruntime and hetero drop that window at every opset.
    """
    wrong: set[str] = set()
    for node in graph.node:
        ceil_mode = any(a.name == "ceil_mode" and a.i for a in node.attribute)
        pool = node.op_type in ("MaxPool", "AveragePool") and ceil_mode and opset < 22
        if pool or wrong.intersection(node.input):
            wrong.update(node.output)
    return wrong


def _static_type(info: onnx.ValueInfoProto) -> TensorType | None:
    if info.type.WhichOneof("value") != "tensor_type":
        return None
    tensor = info.type.tensor_type
    dtype = numpy_dtype(tensor.elem_type)
    if dtype is None or not tensor.HasField("shape"):
        return None
    # A negative size from onnx's inference (a pool window wider than its input) is no
    # type: hetero's own inference then names the node and what is wrong.
    if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in tensor.shape.dim):
        return None
    return TensorType([d.dim_value for d in tensor.shape.dim], dtype)
