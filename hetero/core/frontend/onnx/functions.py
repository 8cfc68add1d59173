"""Function operators: ONNX ops that onnx defines by a function body, expanded before translation.

onnx defines many operators (CastLike, MeanVarianceNormalization, Swish, the window
functions, several activations and norms) as a *function*: a body of simpler ONNX
ops, either fixed per opset (``OpSchema.get_function_with_opset_version``) or built
per node from its attributes and input types (a *context-dependent* function,
``get_context_dependent_function_with_opset_version``). A node of such an op that no
translator takes is replaced by its body, with onnx's own inliner
(``onnx.inliner.inline_selected_functions`` with ``inline_schema_functions``), which
picks the body written for the model's opset, substitutes the node's attributes for
the body's attribute references and gives the body's values fresh names. A
translator (a dedicated canonical op) always wins where one exists.

The pass runs on the ModelProto after onnx's shape inference, so that a
context-dependent body sees its node's input types, and before translation:

- the node's unset attributes get the schema's defaults first (onnx's inliner drops
  an attribute reference the node does not set, and some bodies read the defaults
  through such references);
- a body node that is itself a function op without a translator is expanded in turn,
  at most :data:`MAX_DEPTH` levels deep;
- the body's nodes are named after the node they replace (``norm/ReduceMean``, and
  ``hann/Range/Cast`` one level further), and so are its values, so that partition
  reports and error messages still lead back to the model's node;
- a node whose body cannot be expanded entirely into ops hetero translates stays as it
  is, and :func:`expand_functions` raises one :class:`UnsupportedOpError` naming every
  such node and the ops its body needs.

:func:`unsupported_ops` is the check made before shapes are known: an op is supported
when it has a translator or a function body whose ops (recursively) are supported; a
context-dependent body is known only once the types are, and is judged by the pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
import re

import onnx
from onnx import helper, inliner

from hetero.core import progress
from hetero.core.frontend.onnx.loader import Source, fresh_name, node_label, reason
from hetero.core.frontend.onnx.opsets import DEFAULT_DOMAINS, UPGRADE_TO
from hetero.core.ir.types import TensorType
from hetero.errors import UnsupportedOpError

#: How deep function bodies may nest (a body's function op expanded into its own body...).
MAX_DEPTH = 8


@dataclass(frozen=True)
class Expansion:
    """One node replaced by its onnx function body: ``str()`` is the sentence to show."""

    op_type: str
    node: str  # node_label() of the replaced node
    nodes: int  # how many nodes the body became, nested bodies expanded

    def __str__(self) -> str:
        return f"expanded {self.node} into its onnx function body ({self.nodes} nodes)"


def schema_of(node_or_op: onnx.NodeProto | str, opset: int) -> onnx.defs.OpSchema | None:
    """The default-domain schema of an op at ``opset``, or None (other domain, unknown op)."""
    if isinstance(node_or_op, onnx.NodeProto):
        if node_or_op.domain not in DEFAULT_DOMAINS:
            return None
        node_or_op = node_or_op.op_type
    try:
        return onnx.defs.get_schema(node_or_op, opset, "")
    except onnx.defs.SchemaError:
        return None


def static_body(schema: onnx.defs.OpSchema, opset: int) -> onnx.FunctionProto | None:
    """The schema's fixed function body for ``opset``, or None if it has none there."""
    if not schema.has_function:
        return None
    data = schema.get_function_with_opset_version(opset)
    if not data:
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(data)
    return body if len(body.node) else None


def has_body(schema: onnx.defs.OpSchema, opset: int) -> bool:
    """Whether onnx defines ``schema``'s op by a function body (fixed or context-dependent)
    at ``opset``."""
    if static_body(schema, opset) is not None:
        return True
    return schema.has_context_dependent_function and any(
        v <= opset for v in schema.context_dependent_function_opset_versions)


def expandable(node: onnx.NodeProto, opset: int, translated: Iterable[str]) -> bool:
    """Whether ``node`` is a default-domain op without a translator but with a function body."""
    if node.domain not in DEFAULT_DOMAINS or node.op_type in translated:
        return False
    schema = schema_of(node, opset)
    return schema is not None and has_body(schema, opset)


def unsupported_ops(node: onnx.NodeProto, opset: int, translated: Iterable[str],
                    depth: int = 0) -> set[str]:
    """The op types ``node`` needs that hetero can neither translate nor expand (empty: none).

    A fixed body is looked into, recursively; a context-dependent one is taken on trust
    here (its body depends on types not known yet) and checked by :func:`expand_functions`.
    """
    translated = frozenset(translated)
    if node.domain in DEFAULT_DOMAINS and node.op_type in translated:
        return set()
    key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
    schema = schema_of(node, opset)
    if schema is None or not has_body(schema, opset) or depth >= MAX_DEPTH:
        return {key}
    body = static_body(schema, opset)
    if body is None:
        return set()
    missing: set[str] = set()
    for inner in body.node:
        missing |= unsupported_ops(inner, opset, translated, depth + 1)
    if _control_flow([n for n in body.node if n.op_type not in translated]):
        missing.add(key)
    return missing


def apply_defaults(source: Source, opset: int, translated: Iterable[str]) -> None:
    """Set the schema's default of every attribute a node of a function op leaves unset.

    That changes no meaning, and it completes the body: onnx drops a body's reference
    to an attribute the node does not set (its shape inference then fails on a
    ``Constant <value_ints: ints = @axes>`` left without a value), even where the schema
    has a default. Run before onnx's shape inference.
    """
    translated = frozenset(translated)
    for node in source.model.graph.node:
        if expandable(node, opset, translated) or node.op_type in _INFERENCE_MISREADS:
            _apply_defaults(node, schema_of(node, opset))


#: Ops whose shape inference in onnx reads an unset attribute otherwise than their schema
#: and reference do (STFT's ``onesided``: 0 to inference, 1 to the schema), so their
#: defaults are set as well: the declared output shapes then agree with inference.
_INFERENCE_MISREADS = frozenset({"STFT"})


def importable(node: onnx.NodeProto, model: onnx.ModelProto) -> bool:
    """Whether :func:`hetero.load_onnx` takes ``node`` of ``model``: a translator, or a
    function body of ops it takes (context-dependent bodies on trust, as above)."""
    from hetero.core.frontend.onnx.context import TRANSLATORS

    versions = [o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS]
    opset = max(versions[0] if versions else UPGRADE_TO, UPGRADE_TO)
    return not unsupported_ops(node, opset, TRANSLATORS)


def expand_functions(source: Source, opset: int, types: Mapping[str, TensorType],
                     translated: Iterable[str]) -> list[Expansion]:
    """Replace every top-level node of a function op without a translator by its body.

    ``types`` holds the known types of the graph's values (graph inputs and what onnx's
    shape inference found; initializers are read from the model), which a
    context-dependent body needs. Returns what was expanded, in graph order; raises one
    UnsupportedOpError listing every node that could not be.
    """
    translated = frozenset(translated)
    graph = source.model.graph
    total = sum(expandable(n, opset, translated) for n in graph.node)
    if not total:
        return []
    known = {name: _type_proto(t) for name, t in types.items()}
    for tensor in [*graph.initializer, *source.set_aside.values()]:
        known[tensor.name] = helper.make_tensor_type_proto(tensor.data_type, tensor.dims)
    expander = _Expander(source, opset, translated, known)
    nodes: list[onnx.NodeProto] = []
    expansions: list[Expansion] = []
    failures: list[tuple[onnx.NodeProto, str]] = []
    for node in graph.node:
        if not expandable(node, opset, translated):
            nodes.append(node)
            continue
        progress.step("expand function ops", len(expansions) + len(failures) + 1, total,
                      node_label(node))
        try:
            body = expander.expand(node, 0)
        except _Refused as exc:
            failures.append((node, str(exc)))
            nodes.append(node)
            continue
        nodes.extend(body)
        expansions.append(Expansion(node.op_type, node_label(node), len(body)))
    progress.end("expand function ops")
    if failures:
        listed = "; ".join(f"{node_label(n)}: {why}" for n, why in failures)
        raise UnsupportedOpError(
            f"model {source.name}: {len(failures)} node(s) of ops that onnx defines by a "
            f"function body cannot be expanded into ops hetero supports: {listed}. hetero's "
            "canonical op set is listed by hetero.core.ir.opdef.op_names(); rewrite these "
            "ops in terms of it before export"
        )
    del graph.node[:]
    graph.node.extend(nodes)
    return expansions


class _Refused(Exception):
    """A node's body cannot be expanded; the message says why (internal to this module)."""


class _Expander:
    """Expands nodes one at a time, naming the body's nodes and values after them."""

    def __init__(self, source: Source, opset: int, translated: frozenset[str],
                 types: dict[str, onnx.TypeProto]) -> None:
        self.source = source
        self.opset = opset
        self.translated = translated
        self.types = types
        self.inferred = False
        graph = source.model.graph
        self.taken = {v for n in graph.node for v in (*n.input, *n.output, n.name)}
        self.taken |= {v.name for v in (*graph.input, *graph.output, *graph.value_info)}
        self.taken |= {t.name for t in graph.initializer}
        self.taken.discard("")

    def fresh(self, base: str) -> str:
        """A name no value or node of the model uses yet."""
        return fresh_name(base, self.taken)

    def expand(self, node: onnx.NodeProto, depth: int) -> list[onnx.NodeProto]:
        """``node``'s body, nested function ops expanded, named after ``node``."""
        if depth >= MAX_DEPTH:
            raise _Refused(f"its function bodies nest more than {MAX_DEPTH} levels deep")
        body = self._inline(node)
        result: list[onnx.NodeProto] = []
        for inner in body:
            if expandable(inner, self.opset, self.translated):
                result.extend(self.expand(inner, depth + 1))
            else:
                result.append(inner)
        missing = sorted({n.op_type if n.domain in DEFAULT_DOMAINS else f"{n.domain}.{n.op_type}"
                          for n in result
                          if n.domain not in DEFAULT_DOMAINS or n.op_type not in self.translated})
        if missing:
            raise _Refused(f"its onnx function body uses {', '.join(missing)}, which hetero "
                           "does not support")
        if _control_flow([n for n in result if n.op_type not in self.translated]):
            raise _Refused("its onnx function body holds a subgraph (control flow), which "
                           "hetero does not import")
        return result

    def _inline(self, node: onnx.NodeProto) -> list[onnx.NodeProto]:
        """One level of ``node``'s body from onnx's inliner, renamed after ``node``."""
        call = onnx.NodeProto()
        call.CopyFrom(node)
        call.domain = ""
        _apply_defaults(call, schema_of(node, self.opset))
        inputs = list(dict.fromkeys(v for v in call.input if v))
        if not self.inferred and any(v not in self.types for v in inputs):
            # hetero keeps only static types; onnx may still know a dynamic one's dtype.
            self.inferred = True
            self._learn_types(self.source.model)
        outputs = [v for v in call.output if v]
        wrapper = helper.make_model(
            helper.make_graph(
                [call], "function_call",
                [helper.make_value_info(v, self.types.get(v, onnx.TypeProto())) for v in inputs],
                [helper.make_value_info(v, onnx.TypeProto()) for v in outputs]),
            opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            inlined = inliner.inline_selected_functions(
                wrapper, [("", node.op_type)], inline_schema_functions=True)
        except Exception:  # noqa: BLE001 - onnx's C++ raises bare RuntimeErrors
            inlined = self._inline_built(wrapper)
        body = list(inlined.graph.node)
        if len(body) == 1 and body[0].op_type == node.op_type:
            raise _Refused("onnx gives no function body for its attributes and input types "
                           f"({self._described(inputs)})")
        if any(expandable(n, self.opset, self.translated) for n in body):
            self._learn_types(inlined)
        return self._renamed(body, set(inputs) | set(outputs), _base(node))

    def _inline_built(self, wrapper: onnx.ModelProto) -> onnx.ModelProto:
        """The wrapper's call inlined from a body built here and made a model-local function.

        onnx's inliner cannot build a context-dependent body for a node that skips an
        optional input in the middle (it asks for the type of ""); the schema can, given
        an empty type for it, and the inliner then inlines that body as a local function.
        """
        call = wrapper.graph.node[0]
        schema = schema_of(call, self.opset)
        body = static_body(schema, self.opset) if schema is not None else None
        try:
            if body is None and schema is not None and has_body(schema, self.opset):
                types = [self.types.get(v, onnx.TypeProto()).SerializeToString() if v
                         else onnx.TypeProto().SerializeToString() for v in call.input]
                body = onnx.FunctionProto()
                body.ParseFromString(schema.get_context_dependent_function_with_opset_version(
                    self.opset, call.SerializeToString(), types))
            if body is None:
                raise _Refused("onnx gives no function body for it")
            body.domain = call.domain = _LOCAL_DOMAIN
            wrapper.functions.append(body)
            wrapper.opset_import.append(helper.make_opsetid(_LOCAL_DOMAIN, 1))
            return inliner.inline_local_functions(wrapper)
        except _Refused:
            raise
        except Exception as exc:  # noqa: BLE001 - onnx's C++ raises bare RuntimeErrors
            raise _Refused(f"onnx's inliner could not expand its function body ({reason(exc)})"
                           ) from None

    def _learn_types(self, model: onnx.ModelProto) -> None:
        """Add the types onnx infers for ``model``'s values (a context-dependent body needs
        its inputs' types); an untyped value is reported where a body needs it."""
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - onnx's C++ raises bare RuntimeErrors
            return
        for info in inferred.graph.value_info:
            if info.type.WhichOneof("value") is not None:
                self.types.setdefault(info.name, info.type)

    def _renamed(self, body: list[onnx.NodeProto], outer: set[str],
                 base: str) -> list[onnx.NodeProto]:
        names: dict[str, str] = {}

        def rename(value: str) -> str:
            if not value or value in outer:
                return value
            if value not in names:
                names[value] = self.fresh(f"{base}/{_INLINER_SUFFIX.sub('', value)}")
                if value in self.types:
                    self.types[names[value]] = self.types[value]
            return names[value]

        for inner in body:
            inner.name = self.fresh(f"{base}/{inner.op_type}")
            inner.input[:] = [rename(v) for v in inner.input]
            inner.output[:] = [rename(v) for v in inner.output]
            for attr in inner.attribute:  # a Scan or If body reads the body's values by name
                for graph in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else
                              list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []):
                    _rename_reads(graph, names)
        return body

    def _described(self, inputs: list[str]) -> str:
        described = []
        for name in inputs:
            t = self.types.get(name)
            described.append(f"{name}: {'unknown' if t is None else _type_text(t)}")
        return ", ".join(described) or "no inputs"


#: The domain a body built here is given as a model-local function while it is inlined.
_LOCAL_DOMAIN = "hetero.function_body"

#: The suffix onnx's inliner gives the values of each body it inlines (``X_RM__1``).
_INLINER_SUFFIX = re.compile(r"__\d+$")


def _base(node: onnx.NodeProto) -> str:
    """What the body's node and value names start with: the node's name or first output."""
    return node.name or next((o for o in node.output if o), node.op_type)


def _apply_defaults(node: onnx.NodeProto, schema: onnx.defs.OpSchema | None) -> None:
    """Give ``node`` every attribute its schema defaults and it leaves unset."""
    if schema is None:
        return
    present = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        default = attr.default_value
        if name not in present and default.type != onnx.AttributeProto.UNDEFINED:
            copy = onnx.AttributeProto()
            copy.CopyFrom(default)
            copy.name = name
            node.attribute.append(copy)


def _rename_reads(graph: onnx.GraphProto, names: Mapping[str, str]) -> None:
    """Rename, in ``graph`` and the graphs nested in it, every read of an outer value
    that ``names`` renames (a subgraph's own values keep their names)."""
    own = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {
        o for n in graph.node for o in n.output}
    for node in graph.node:
        node.input[:] = [names.get(v, v) if v not in own else v for v in node.input]
        for attr in node.attribute:
            for inner in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else
                          list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []):
                _rename_reads(inner, {k: v for k, v in names.items() if k not in own})
    for out in graph.output:
        if out.name not in own:
            out.name = names.get(out.name, out.name)


def _control_flow(nodes: Iterable[onnx.NodeProto]) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
               for n in nodes for a in n.attribute)


def _type_proto(t: TensorType) -> onnx.TypeProto:
    try:
        elem = helper.np_dtype_to_tensor_dtype(t.dtype)
    except (KeyError, TypeError, ValueError):
        return onnx.TypeProto()
    return helper.make_tensor_type_proto(elem, list(t.shape))


def _type_text(t: onnx.TypeProto) -> str:
    if t.WhichOneof("value") != "tensor_type":
        return "not a tensor"
    tensor = t.tensor_type
    name = onnx.TensorProto.DataType.Name(tensor.elem_type).lower()
    if not tensor.HasField("shape"):
        return name
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in tensor.shape.dim]
    return f"{name}[{','.join(dims)}]"

