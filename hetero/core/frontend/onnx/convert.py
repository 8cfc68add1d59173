"""The ONNX importer: :func:`load_onnx` reads, checks and translates a model.

The steps, each failing with an error that names the file, tensor or node at fault:

1. read the file (or copy the proto) without its external data;
2. check every stored tensor's size against the element budget, from its dims, and
   every input, output and stored tensor's element type;
3. check external-data locations stay inside the model's folder, then read each
   tensor's declared bytes (and no more) from them;
4. check every value is defined before use, the opset is in range and every op is
   supported (translated, or defined by an onnx function body of supported ops);
5. fix the input shapes (each within the budget), run onnx's checker, upgrade opsets
   below 13 to 13 and run onnx's shape inference (with the large weights set aside,
   as typed inputs; with data propagation only where its cost is bounded), then expand
   the ops without a translator that onnx defines by a function body (:mod:`.functions`);
6. translate node by node into canonical ops, folding static operands (at most
   ``FOLD_MAX_ELEMENTS`` computed in all), setting aside the nodes whose shapes or
   decisions depend on data with everything after them that reads their outputs;
7. compare hetero's types with onnx's, drop the dead shape computations, verify; where
   nodes were set aside, raise :class:`~hetero.errors.DataDependentError` carrying the
   split (:mod:`.stages`), which ``hetero.compile`` compiles in stages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
import os
from typing import Any

import onnx
from onnx import numpy_helper

# The translator modules register themselves with TRANSLATORS when imported.
from hetero.core.frontend.onnx import (  # noqa: F401
    translate_elementwise, translate_nn, translate_tensor,
)
from hetero.core.frontend.onnx import translate_linalg  # noqa: F401
from hetero.core.frontend.onnx import translate_indexing  # noqa: F401
from hetero.core.frontend.onnx import translate_signal  # noqa: F401
from hetero.core.frontend.onnx import translate_control  # noqa: F401
from hetero.core.frontend.onnx import translate_sequence
from hetero.core.frontend.onnx import translate_host  # noqa: F401
from hetero.core.frontend.onnx.bind import bind_input_values
from hetero.core.frontend.onnx.budget import DEFAULT_MAX_ELEMENTS
from hetero.core.frontend.onnx.context import TRANSLATORS, ModelContext, NodeContext
from hetero.core.frontend.onnx.external import load_external_data
from hetero.core.frontend.onnx.functions import (
    apply_defaults, expand_functions, unsupported_ops,
)
from hetero.core.frontend.onnx.loader import (
    Source, check_defined_before_use, check_element_types, check_model, check_tensor_sizes,
    node_label, read_model, reason, set_weights_aside,
)
from hetero.core.frontend.onnx.opsets import DEFAULT_DOMAINS, UPGRADE_TO, default_opset, upgrade
from hetero.core.frontend.onnx.shapes import graph_inputs, infer_onnx_types, resolve_input_shapes
from hetero.core.frontend.onnx.stages import StagePlan, staged_error
from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.types import TensorType
from hetero.core.ir.verify import verify
from hetero.errors import (
    DataDependentError, HeteroError, ModelLoadError, OperandInputError, ShapeError, UnsupportedOpError,
)


def load_onnx(
    model: str | os.PathLike[str] | onnx.ModelProto,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    input_values: Mapping[str, Any] | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> Graph:
    """Import an ONNX model as a verified hetero :class:`Graph` of canonical ops.

    ``model`` is a path or a ``ModelProto`` (never modified). ``input_shapes`` fixes
    input dimensions the model leaves dynamic (or overrides declared ones), e.g.
    ``{"input": [1, 3, 224, 224]}``. ``input_values`` binds inputs to values, e.g.
    ``{"axes": [1]}``: each becomes a constant, so the operands computed from it (axes,
    pads, shapes, ``k``) fold and the graph is compiled for that value alone. ``max_elements`` bounds the element count of
    any one tensor the model stores, takes as input or computes; it is checked from
    shapes, before anything is allocated or read. External data is read only for
    the bytes each tensor declares, from files inside the model's folder.

    >>> graph = load_onnx("resnet50.onnx", {"data": [1, 3, 224, 224]})  # doctest: +SKIP
    """
    source = read_model(model)
    check_tensor_sizes(source, max_elements)
    check_element_types(source)
    load_external_data(source)
    check_defined_before_use(source)
    bind_input_values(source, input_values)
    version = default_opset(source)
    check_supported(source, max(version, UPGRADE_TO))
    input_types = resolve_input_shapes(source, input_shapes, max_elements)
    set_weights_aside(source)
    check_model(source)
    upgrade(source, version)
    apply_defaults(source, max(version, UPGRADE_TO), TRANSLATORS)
    onnx_types = infer_onnx_types(source, max(version, UPGRADE_TO))
    source.expansions = expand_functions(source, max(version, UPGRADE_TO),
                                         {**input_types, **onnx_types}, TRANSLATORS)
    plan = StagePlan()
    declared = [(info.name, input_types[info.name].shape, input_types[info.name].dtype.name)
                for info in graph_inputs(source)]
    outputs = [o.name for o in source.model.graph.output]
    try:
        ctx = translate(source, input_types, max_elements, max(version, UPGRADE_TO), version, plan)
    except OperandInputError as exc:
        exc.model_inputs, exc.model_outputs = declared, outputs
        raise
    compare_types(ctx, onnx_types)
    if not plan:
        remove_dead_nodes(ctx.graph)
        return verify(ctx.graph)
    split = plan.split(ctx.graph.name, ctx.graph, ctx.values, declared, outputs, ctx.evaluate,
                       source.model)
    remove_dead_nodes(ctx.graph)
    if split.prefix is not None:
        verify(split.prefix)
    raise staged_error(split)


def check_supported(source: Source, opset: int) -> None:
    """One UnsupportedOpError listing every op type hetero can neither translate nor expand.

    An op onnx defines by a function body is supported when its body's ops are
    (:mod:`.functions` expands it after shape inference).
    """
    examples: dict[str, str] = {}
    counts: Counter[str] = Counter()
    needs: dict[str, set[str]] = {}
    for node in source.model.graph.node:
        missing = unsupported_ops(node, opset, TRANSLATORS)
        if not missing:
            continue
        key = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        counts[key] += 1
        examples.setdefault(key, node.name or f"(unnamed, computes {node.output[0]!r})")
        needs.setdefault(key, set()).update(missing - {key})
    if counts:
        listed = "; ".join(
            f"{op} ({counts[op]} node{'s' if counts[op] > 1 else ''}, e.g. {examples[op]}"
            + (f"; its onnx function body uses {', '.join(sorted(needs[op]))}" if needs[op] else "")
            + ")"
            for op in sorted(counts)
        )
        raise UnsupportedOpError(
            f"model {source.name} uses {len(counts)} op type(s) hetero does not support: "
            f"{listed}. hetero's canonical op set is listed by "
            "hetero.core.ir.opdef.op_names(); rewrite these ops in terms of it before export"
        )


def translate(
    source: Source, input_types: Mapping[str, TensorType], max_elements: int,
    opset: int = UPGRADE_TO, exported_opset: int | None = None, plan: StagePlan | None = None,
) -> ModelContext:
    """Build the canonical graph: inputs, initializers as constants, then each node.

    With a ``plan``, a node whose shapes or decisions depend on data is set aside in
    it, with every node after it that reads its outputs (:mod:`.stages`), and the graph
    is left without outputs for the plan to give it; without one, such a node raises.

    ``opset`` is the default domain's version the nodes are read at (the model's, or
    13 for an older model upgraded to it): a translator asks it where an attribute's
    default changed between versions; ``exported_opset`` the model's own, before any
    upgrade (for meanings onnx's version converter does not carry over)."""
    onnx_graph = source.model.graph
    name = onnx_graph.name or os.path.splitext(source.name)[0]
    ctx = ModelContext(Graph(name), source.model, source.name, max_elements, opset,
                       opset if exported_opset is None else exported_opset)
    for info in graph_inputs(source):
        t = input_types[info.name]
        ctx.values[info.name] = ctx.graph.add_input(info.name, t.shape, t.dtype)
    if onnx_graph.sparse_initializer:
        raise ModelLoadError(
            f"model {source.name}: sparse initializer "
            f"{onnx_graph.sparse_initializer[0].values.name!r} is not supported; store it dense"
        )
    for tensor in [*onnx_graph.initializer, *source.set_aside.values()]:
        try:
            array = numpy_helper.to_array(tensor)
            array.flags.writeable = False  # ours alone: the graph may keep it without a copy
            ctx.values[tensor.name] = ctx.graph.add_constant(array, tensor.name)
        except (HeteroError, ValueError, TypeError) as exc:
            raise ModelLoadError(
                f"model {source.name}: initializer {tensor.name!r} cannot be read: {reason(exc)}"
            ) from None
    for node in onnx_graph.node:
        if plan is not None and plan.waits(node):
            continue
        translate_sequence.check_operands(ctx, node)
        try:
            TRANSLATORS[node.op_type](NodeContext(ctx, node))
        except DataDependentError as exc:
            if plan is None:
                raise
            plan.defer(node, exc, ctx.values)
            continue
        for i, out in enumerate(node.output):
            if out and out in ctx.read and not translate_sequence.is_bound(ctx, out):
                raise UnsupportedOpError(
                    f"model {source.name}: {node_label(node)}: its output {i} ({out!r}) is "
                    "used, but hetero's canonical op does not compute it"
                )
    if not plan:
        ctx.graph.set_outputs([translate_sequence.graph_output(ctx, o) for o in onnx_graph.output])
    return ctx


def compare_types(ctx: ModelContext, onnx_types: Mapping[str, TensorType]) -> None:
    """ShapeError where hetero and onnx infer different types for one value."""
    for name, value in ctx.values.items():
        expected = onnx_types.get(name)
        if expected is not None and expected != value.type:
            node = value.producer.name if value.producer is not None else "(no node)"
            raise ShapeError(
                f"model {ctx.model_name}: value {name!r} (computed by {node}) has type "
                f"{value.type} in hetero but {expected} in onnx's shape inference; one of them "
                "has a bug: please report it with the model"
            )


def remove_dead_nodes(graph: Graph) -> None:
    """Drop nodes no graph output depends on (folded shape computations), then their constants."""
    live: set[Node] = set()
    stack = list(graph.outputs)
    while stack:
        node = stack.pop().producer
        if node is None or node in live:
            continue
        live.add(node)
        stack.extend(v for v in node.inputs if v is not None)
    for node in reversed(list(graph.nodes)):
        if node not in live:
            graph.remove_node(node)
    graph.remove_unused_constants()
