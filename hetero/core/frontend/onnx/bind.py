"""Binding graph inputs to values: what ``load_onnx(..., input_values=...)`` does.

A bound input stops being an input: it becomes an initializer holding the value, so
every operand computed from it (a Reshape's shape, a reduction's axes, TopK's ``k``)
folds to a constant at import, and the graph compiles for that value alone. Run-time
specialisation (:mod:`hetero.core.runtime.specialize`) binds the operand inputs of
each run this way; a user who knows the value binds it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from onnx import numpy_helper

from hetero.core.frontend.onnx.loader import Source
from hetero.core.frontend.onnx.shapes import dtype_name, graph_inputs, numpy_dtype
from hetero.errors import InputError, Keyword, did_you_mean


def bind_input_values(source: Source, values: Mapping[str, Any] | None) -> None:
    """Turn each input named in ``values`` into an initializer holding its value.

    A value is anything ``numpy.asarray`` takes; it must fit the input's declared
    element type (a list of ints for an int64 input, say) and any dimension the model
    declares. An unknown name or a value that does not fit raises :class:`InputError`.
    """
    if not values:
        return
    inputs = {info.name: info for info in graph_inputs(source)}
    graph = source.model.graph
    for name, value in values.items():
        info = inputs.get(name)
        if info is None:
            raise InputError(
                f"{{values}} names {name!r}, which is not an input of model {source.name}"
                f"{did_you_mean(name, list(inputs))}; its inputs are {list(inputs)}",
                values=Keyword("input_values"))
        array = value_array(info, value, source.name)
        for i in reversed(range(len(graph.input))):
            if graph.input[i].name == name:
                del graph.input[i]
        graph.initializer.append(numpy_helper.from_array(array, name))


def value_array(info: Any, value: Any, model_name: str) -> np.ndarray:
    """``value`` as an array of the element type and shape that the graph input ``info``
    (a ``ValueInfoProto``) declares, or InputError."""
    where = f"the value given for input {info.name!r} of model {model_name}"
    tensor = info.type.tensor_type
    dtype = numpy_dtype(tensor.elem_type)
    if info.type.WhichOneof("value") != "tensor_type" or dtype is None:
        raise InputError(f"{where}: the input is not a tensor of a type hetero binds "
                         f"({dtype_name(tensor.elem_type)})")
    try:
        given = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where} is not an array ({exc})") from None
    if given.dtype != dtype and not _fits(given, dtype):
        raise InputError(f"{where} has dtype {given.dtype}, but the input is "
                         f"{dtype_name(tensor.elem_type)}; pass a {dtype} array")
    array = given.astype(dtype, copy=False)
    declared = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim] \
        if tensor.HasField("shape") else None
    if declared is not None and None not in declared and array.size == np.prod(declared, dtype=int):
        array = array.reshape(declared)  # a flat list for a declared shape (the CLI's form)
    if declared is not None and (len(declared) != array.ndim or any(
            d is not None and d != s for d, s in zip(declared, array.shape))):
        shown = ["?" if d is None else d for d in declared]
        raise InputError(f"{where} has shape {list(array.shape)}, but the input is declared "
                         f"{shown}; pass a value of that shape")
    return array


def _fits(given: np.ndarray, dtype: np.dtype) -> bool:
    """Whether ``given`` converts to ``dtype`` of its own kind (integer, float) exactly."""
    kinds = ("biu", "f")
    if not any(given.dtype.kind in k and dtype.kind in k for k in kinds):
        return False
    with np.errstate(all="ignore"):
        back = given.astype(dtype).astype(given.dtype)
    return bool(np.array_equal(back, given, equal_nan=given.dtype.kind == "f"))
