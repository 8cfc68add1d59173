"""Staging: where a model's shapes or decisions depend on data, import it in stages.

hetero compiles static graphs. Three kinds of ONNX node do not fit one: an op whose
output shape follows the values (NonZero, Unique, NonMaxSuppression, Compress),
control flow decided by data (a Loop that stops on a computed flag), and a node whose
operand hetero compiles in (TopK's ``k``, an If's condition) computed from data. The
importer translates the nodes it can, in order, and sets the others aside
(:class:`StagePlan`):

- a node whose translator raises :class:`~hetero.errors.DataDependentError` with
  ``host`` set runs on the host, after the compiled prefix; one without ``host`` (only
  its operand waits for data) goes to the tail;
- every node that reads a value set aside, directly or from inside a subgraph, goes
  to the tail.

The result (:class:`StageSplit`) is the prefix (a verified graph of what could be
imported, exporting what the later nodes read), the host nodes, and the tail: ONNX
nodes imported at run time, once the host nodes' outputs are known, as a model of
their own (:func:`tail_model`) that may stage again. The runtime side is
:mod:`hetero.core.staging`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from hetero.core.frontend.onnx.loader import node_label
from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.types import as_dtype
from hetero.errors import DataDependentError, ModelLoadError, TensorTooLargeError

#: A value's static type as the stages pass it: shape and dtype name.
StaticType = tuple[tuple[int, ...], str]


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The graphs a node holds as attributes (an If's branches, a Loop's body)."""
    found: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            found.extend(attr.graphs)
    return found


def node_reads(node: onnx.NodeProto) -> set[str]:
    """Every outer value ``node`` reads: its inputs and its subgraphs' free names."""
    names = {n for n in node.input if n}
    for graph in subgraphs(node):
        names |= free_names(graph)
    return names


def free_names(graph: onnx.GraphProto) -> set[str]:
    """The names ``graph`` reads from its enclosing scope (ONNX's lexical scoping)."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    free: set[str] = set()
    for node in graph.node:
        free |= node_reads(node) - defined
        defined.update(o for o in node.output if o)
    return free | {o.name for o in graph.output if o.name not in defined}


@dataclass
class StageSplit:
    """A model imported in stages: the prefix compiled now, the host nodes and the tail.

    ``inputs`` are the model's real inputs with the types they were imported at;
    ``types`` the static type of every value the prefix exports (its outputs) and of
    every model input; ``constants`` the values the later nodes read that folded at
    import. The prefix is None when it exports nothing (a host node reads the inputs).
    """

    name: str
    inputs: list[tuple[str, tuple[int, ...], str]]
    outputs: list[str]
    prefix: Graph | None
    types: dict[str, StaticType]
    constants: dict[str, np.ndarray]
    host: list[onnx.NodeProto]
    tail: list[onnx.NodeProto]
    #: The source model with its graph emptied: opsets, IR version and functions.
    shell: onnx.ModelProto
    #: The model outputs' declared types.
    output_types: dict[str, onnx.TypeProto] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)

    def describe(self, most: int = 6) -> str:
        """What was set aside and why: the host nodes counted by op, then up to ``most``
        of the reasons."""
        counts = Counter(n.op_type for n in self.host)
        waiting = len(self.reasons) - len(self.host)
        lines = [f"on the host: {', '.join(f'{op} x{k}' for op, k in sorted(counts.items()))}"
                 if counts else "on the host: nothing",
                 f"waiting for run-time values: {waiting} node(s), and {len(self.tail) - waiting} "
                 "reading what they compute"]
        reasons = list(self.reasons.values())
        lines += reasons[:most]
        if len(reasons) > most:
            lines.append(f"... and {len(reasons) - most} more")
        return "\n".join(lines)


class StagePlan:
    """Collects, during translation, the nodes that cannot be imported now."""

    def __init__(self) -> None:
        self.host: list[onnx.NodeProto] = []
        self.tail: list[onnx.NodeProto] = []
        self.later: set[str] = set()  # ONNX names only a run computes
        self.reasons: dict[str, str] = {}  # node label -> why it was set aside

    def __bool__(self) -> bool:
        return bool(self.host or self.tail)

    def waits(self, node: onnx.NodeProto) -> bool:
        """Whether ``node`` reads a value set aside; if so it joins the tail."""
        if not (node_reads(node) & self.later):
            return False
        self.tail.append(node)
        self.later.update(o for o in node.output if o)
        return True

    def defer(self, node: onnx.NodeProto, error: DataDependentError, values: dict[str, Value]) -> None:
        """Set ``node`` aside for the host or the tail, as ``error`` says, forgetting
        whatever its failed translation bound."""
        (self.host if error.host else self.tail).append(node)
        self.reasons[node_label(node)] = str(error)
        outputs = {o for o in node.output if o}
        self.later |= outputs
        for name in outputs:
            values.pop(name, None)

    def split(self, name: str, graph: Graph, values: Mapping[str, Value],
              inputs: list[tuple[str, tuple[int, ...], str]], outputs: list[str],
              evaluate: Callable[[Value, str], np.ndarray | None], model: onnx.ModelProto
              ) -> StageSplit:
        """The split, with ``graph`` (the prefix) given its outputs: what the host
        nodes, the tail and the model's outputs read from it, less what folded."""
        wanted = set().union(*(node_reads(n) for n in [*self.host, *self.tail])) | set(outputs)
        constants: dict[str, np.ndarray] = {}
        exports: list[Value] = []
        types: dict[str, StaticType] = {n: (s, d) for n, s, d in inputs}
        for key in sorted(wanted - self.later):
            value = values.get(key)
            if value is None:
                continue  # a subgraph's own name, or a model input (bound by the runtime)
            try:
                array = value.data if value.data is not None else evaluate(value, f"stage export {key!r}")
            except TensorTooLargeError:
                array = None  # too large to fold: the prefix computes it
            if array is not None:
                constants[key] = np.asarray(array)
            elif value not in graph.inputs:
                exports.append(value)
                types[key] = (tuple(value.shape), value.dtype.name)
        graph.set_outputs(exports)
        shell = onnx.ModelProto()
        shell.ir_version = model.ir_version
        shell.opset_import.extend(model.opset_import)
        shell.functions.extend(model.functions)
        split = StageSplit(name, inputs, outputs, graph if exports else None, types, constants,
                           self.host, self.tail, shell,
                           {o.name: o.type for o in model.graph.output}, dict(self.reasons))
        return split


def staged_error(split: StageSplit) -> DataDependentError:
    """The error load_onnx raises for a staged model, carrying ``split``."""
    why = next(iter(split.reasons.values()))
    return DataDependentError(
        f"{why} ({len(split.host)} node(s) on the host, {len(split.tail)} after them); load_onnx "
        "imports static graphs only: hetero.compile compiles such a model in stages, running "
        "those nodes on the host", host=bool(split.host), split=split)


def tail_model(split: StageSplit, arrays: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """The tail as a model of its own: its inputs are what it reads from the prefix,
    the model's inputs and the host nodes (``arrays`` holds the host outputs, whose
    dims it declares dynamic), its initializers what folded; its outputs the model
    outputs it computes."""
    made = {o for n in split.tail for o in n.output if o}
    reads = set().union(*(node_reads(n) for n in split.tail)) - made
    outputs = [o for o in split.outputs if o in made]
    return _model(f"{split.name}/tail", split, list(split.tail), sorted(reads), outputs, arrays,
                  split.output_types)


def body_model(split: StageSplit, graph: onnx.GraphProto, what: str, arrays: Mapping[str, np.ndarray]
               ) -> tuple[onnx.ModelProto, list[str]]:
    """A control-flow body as a model: its declared inputs (typed from ``arrays``), then
    the outer values it reads (the folded ones as initializers); and the names of its
    outputs in order (a pass-through output gets an Identity)."""
    nodes = list(graph.node)
    made = {o for n in nodes for o in n.output if o}
    outputs = []
    for out in graph.output:
        if out.name in made:
            outputs.append(out.name)
        else:
            copied = f"{out.name}@out"
            nodes.append(helper.make_node("Identity", [out.name], [copied]))
            outputs.append(copied)
    reads = [i.name for i in graph.input] + sorted(free_names(graph) - {i.name for i in graph.input})
    declared = {o.name: o.type for o in graph.output}
    model = _model(f"{split.name}/{what}", split, nodes, reads, outputs, arrays, declared,
                   list(graph.initializer))
    return model, outputs


def _model(name: str, split: StageSplit, nodes: list[onnx.NodeProto], reads: Iterable[str],
           outputs: list[str], arrays: Mapping[str, np.ndarray], declared: Mapping[str, onnx.TypeProto],
           initializers: Iterable[onnx.TensorProto] = ()) -> onnx.ModelProto:
    inputs, stored = [], list(initializers)
    for key in reads:
        array = split.constants.get(key)
        if array is not None:
            stored.append(numpy_helper.from_array(np.asarray(array), key))
        elif key in split.types and key not in arrays:
            shape, dtype = split.types[key]
            inputs.append(helper.make_tensor_value_info(key, _elem_type(dtype), list(shape)))
        elif key in arrays:
            array = np.asarray(arrays[key])
            dims = [f"{_dim_base(key)}_{i}" for i in range(array.ndim)]
            inputs.append(helper.make_tensor_value_info(key, _elem_type(array.dtype.name), dims))
        else:
            raise ModelLoadError(f"model {split.name}: stage {name} reads {key!r}, which no earlier "
                                 "stage computes; please report this with the model")
    graph = helper.make_graph(nodes, name, inputs, [helper.make_value_info(o, onnx.TypeProto())
                                                    for o in outputs], stored)
    model = onnx.ModelProto()
    model.CopyFrom(split.shell)
    model.graph.CopyFrom(graph)
    # Outputs need a type (onnx's checker): what shape inference finds, else the declared
    # one; element type and rank only, as the shapes follow the stage's inputs.
    try:
        inferred = {o.name: o.type for o in onnx.shape_inference.infer_shapes(model).graph.output}
    except (onnx.shape_inference.InferenceError, ValueError):
        inferred = {}
    for out in model.graph.output:
        typed = inferred.get(out.name)
        if not _ranked(typed):
            typed = declared.get(out.name.removesuffix("@out"))
        if not _ranked(typed):
            raise ModelLoadError(f"model {split.name}: stage {name}: the type of its output "
                                 f"{out.name!r} is unknown; declare it in the model")
        out.type.CopyFrom(typed)
        for dim in out.type.tensor_type.shape.dim:
            dim.Clear()
    return model


def _ranked(typed: onnx.TypeProto | None) -> bool:
    """Whether ``typed`` is a tensor type with an element type and a rank."""
    return typed is not None and bool(typed.tensor_type.elem_type) and typed.tensor_type.HasField("shape")


def _elem_type(dtype: str) -> int:
    return helper.np_dtype_to_tensor_dtype(as_dtype(dtype))


def _dim_base(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)
