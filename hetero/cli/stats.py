"""``hetero inspect``'s numbers for a model hetero cannot import whole.

A model with ops outside hetero's op set cannot become a graph, but the user still
wants its op histogram, parameters and FLOPs. :func:`supported_stats` cuts the
unsupported nodes out (their outputs become inputs of the cut model, typed by onnx's
shape inference) and imports the rest: its statistics cover every supported node, and
the unsupported ones are counted in the histogram with no FLOPs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import onnx
from onnx import helper

from hetero.core.ir.stats import GraphStats, graph_stats
from hetero.errors import HeteroError


@dataclass(frozen=True)
class Unsupported:
    """The nodes of a model outside hetero's op set: op type -> node names."""

    nodes: dict[str, list[str]]

    @property
    def count(self) -> int:
        """How many nodes are unsupported."""
        return sum(len(names) for names in self.nodes.values())


def unsupported_nodes(model: onnx.ModelProto) -> Unsupported:
    """The top-level nodes of ``model`` that hetero's importer has no translation for."""
    from hetero.core.frontend.onnx.functions import importable
    from hetero.core.frontend.onnx.opsets import DEFAULT_DOMAINS

    nodes: dict[str, list[str]] = {}
    for node in model.graph.node:
        if importable(node, model):
            continue
        op = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"
        nodes.setdefault(op, []).append(node.name or f"(unnamed, computes {node.output[0]!r})")
    return Unsupported(dict(sorted(nodes.items())))


def supported_stats(model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None,
                    max_elements: int | None) -> tuple[GraphStats | None, Unsupported]:
    """Statistics of the supported part of ``model``, and its unsupported nodes.

    The statistics are None when the cut model cannot be imported either (onnx cannot
    type an unsupported node's outputs, a custom domain's op say); the histogram then
    holds only what the ONNX file itself says.
    """
    unsupported = unsupported_nodes(model)
    counts = {op: len(names) for op, names in unsupported.nodes.items()}
    try:
        cut = _cut(model, input_shapes)
        import hetero

        options = {} if max_elements is None else {"max_elements": max_elements}
        stats = graph_stats(hetero.load_onnx(cut, input_shapes, **options))
    except (HeteroError, onnx.onnx_cpp2py_export.shape_inference.InferenceError,  # type: ignore[attr-defined]
            onnx.checker.ValidationError, ValueError):
        return None, unsupported
    histogram = dict(sorted({**stats.op_histogram, **counts}.items()))
    return replace(stats, nodes=stats.nodes + unsupported.count, op_histogram=histogram), unsupported


def _cut(model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]] | None) -> onnx.ModelProto:
    """``model`` without its unsupported nodes, whose outputs become typed graph inputs."""
    from hetero.core.frontend.onnx.functions import importable

    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    for value in fixed.graph.input:
        if input_shapes and value.name in input_shapes:
            shape = value.type.tensor_type.shape
            shape.ClearField("dim")
            for d in input_shapes[value.name]:
                shape.dim.add().dim_value = int(d)
    inferred = onnx.shape_inference.infer_shapes(fixed)
    types = {v.name: v for v in (*inferred.graph.value_info, *inferred.graph.output)}
    stored = {t.name for t in fixed.graph.initializer} | {v.name for v in fixed.graph.input}
    kept, cut_outputs, cut_inputs = [], [], []
    for node in fixed.graph.node:
        if importable(node, fixed):
            kept.append(node)
        else:
            cut_outputs += [o for o in node.output if o]
            cut_inputs += [i for i in node.input if i and i not in stored]
    # What the cut nodes read becomes an output, so the nodes computing it stay counted.
    outputs = [v.name for v in fixed.graph.output]
    cut_inputs = [i for i in dict.fromkeys(cut_inputs) if i not in cut_outputs and i not in outputs]
    missing = [o for o in (*cut_outputs, *cut_inputs) if o not in types]
    if missing:
        raise ValueError(f"onnx cannot type {missing[0]!r}")
    graph = helper.make_graph(
        kept, fixed.graph.name, [*fixed.graph.input, *(types[o] for o in cut_outputs)],
        [v for v in fixed.graph.output if v.name not in cut_outputs] + [types[i] for i in cut_inputs],
        list(fixed.graph.initializer), value_info=[])
    return helper.make_model(graph, opset_imports=list(fixed.opset_import), ir_version=fixed.ir_version)
