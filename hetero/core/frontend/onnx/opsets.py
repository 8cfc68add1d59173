"""Opset handling: which opsets hetero accepts and how old models are brought forward.

Translators are written for opset 13 and newer. A model of opset 7 to 12 is first
upgraded to 13 with onnx's own version converter, so the translators only deal with
the differences between 13 and the newest opset onnx knows.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import version_converter

from hetero.core.frontend.onnx.loader import Source, fresh_name, reason
from hetero.errors import ModelLoadError

#: The oldest opset hetero imports.
MIN_OPSET = 7
#: Models older than this are upgraded to it before translation.
UPGRADE_TO = 13
#: The ONNX names of the default operator domain.
DEFAULT_DOMAINS = ("", "ai.onnx")


def newest_opset() -> int:
    """The newest default-domain opset the installed onnx knows."""
    return onnx.defs.onnx_opset_version()


def default_opset(source: Source) -> int:
    """The model's default-domain opset; ModelLoadError unless it is in the accepted range."""
    versions = [o.version for o in source.model.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise ModelLoadError(
            f"model {source.name} imports no version of the default ONNX domain; re-export "
            "it with an opset_import for domain ''"
        )
    version = versions[0]
    if not MIN_OPSET <= version <= newest_opset():
        raise ModelLoadError(
            f"model {source.name} uses opset {version}; hetero imports opsets {MIN_OPSET} to "
            f"{newest_opset()}: re-export the model at an opset in that range"
        )
    return version


def upgrade(source: Source, version: int) -> None:
    """Bring a model below opset 13 up to 13 in place (``source.model`` is replaced)."""
    if version >= UPGRADE_TO:
        return
    flatten_old_hardmax(source.model)
    if version < 11:
        switch_off_old_onehot_negatives(source)
    old_resizes = {n.output[0] for n in source.model.graph.node
                   if n.op_type in ("Upsample", "Resize") and n.domain in DEFAULT_DOMAINS}
    try:
        source.model = version_converter.convert_version(source.model, UPGRADE_TO)
    except Exception as exc:  # the converter raises bare RuntimeErrors from C++
        raise ModelLoadError(
            f"model {source.name}: onnx's version converter could not upgrade it from opset "
            f"{version} to {UPGRADE_TO} ({reason(exc)}); re-export the model at opset {UPGRADE_TO} "
            "or newer"
        ) from None
    if version < 11:
        pin_old_resize(source.model, old_resizes)


def pin_old_resize(model: onnx.ModelProto, outputs: set[str]) -> None:
    """Give the Resize nodes computing ``outputs`` (Upsample's and Resize-10's, upgraded)
    their old meaning: asymmetric coordinates, and nearest rounding by onnxruntime's
    rule for them (``simple``: ceil on a shrinking axis, floor on a growing one).

    onnx's version converter turns them into Resize-13 nodes without these attributes,
    which would read them with Resize-11's half_pixel default.
    """
    for node in model.graph.node:
        if node.op_type == "Resize" and node.output[0] in outputs:
            kept = [a for a in node.attribute
                    if a.name not in ("coordinate_transformation_mode", "nearest_mode")]
            del node.attribute[:]
            node.attribute.extend(kept + [
                onnx.helper.make_attribute("coordinate_transformation_mode", "asymmetric"),
                onnx.helper.make_attribute("nearest_mode", "simple")])


def switch_off_old_onehot_negatives(source: Source) -> None:
    """Give each OneHot of opset < 11 its old meaning for negative indices: an all-off row.

    From opset 11 a negative index counts from the end; onnx's version converter keeps
    the node as it is, which would turn an old model's all-off rows into one-hot ones.
    So its indices pass through ``Where(indices < 0, depth, indices)`` first: ``depth``
    is out of range under either meaning. The Cast to the indices' type needs that
    type, which onnx's inference (without data propagation) gives.
    """
    model = source.model
    olds = [n.op_type == "OneHot" and n.domain in DEFAULT_DOMAINS for n in model.graph.node]
    if not any(olds):
        return
    graph = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.value_info)}
    types.update((t.name, t.data_type) for t in graph.initializer)
    fresh = _fresh_names(model)
    nodes = []
    for node, old in zip(model.graph.node, olds):
        if not old:
            nodes.append(node)
            continue
        indices, depth = node.input[0], node.input[1]
        elem = types.get(indices, onnx.TensorProto.UNDEFINED)
        if elem == onnx.TensorProto.UNDEFINED:
            raise ModelLoadError(
                f"model {source.name}: OneHot {node.name or node.output[0]} of an opset-10-or-older "
                f"model reads indices {indices!r} of a type onnx cannot infer, and hetero needs it to "
                "keep the old meaning of negative indices; re-export the model at opset 11 or newer")
        zero, negative = fresh(f"{indices}/zero"), fresh(f"{indices}/negative")
        off, kept = fresh(f"{indices}/off"), fresh(f"{indices}/old_onehot")
        nodes += [
            onnx.helper.make_node("Sub", [indices, indices], [zero], name=fresh(f"{node.name}/zero")),
            onnx.helper.make_node("Less", [indices, zero], [negative], name=fresh(f"{node.name}/negative")),
            onnx.helper.make_node("Cast", [depth], [off], name=fresh(f"{node.name}/off"), to=elem),
            onnx.helper.make_node("Where", [negative, off, indices], [kept], name=fresh(f"{node.name}/old")),
        ]
        node.input[0] = kept
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def _fresh_names(model: onnx.ModelProto) -> Callable[[str], str]:
    """A function giving names no value or node of ``model`` has yet."""
    taken = {v for n in model.graph.node for v in (*n.input, *n.output, n.name)}
    taken |= {v.name for v in (*model.graph.input, *model.graph.initializer)}
    return lambda base: fresh_name(base, taken)


def flatten_old_hardmax(model: onnx.ModelProto) -> None:
    """Rewrite each Hardmax of opset < 13 as Flatten, Hardmax over the last axis, Reshape back.

    Below 13 Hardmax works on the input flattened to 2-D at ``axis`` (default 1); onnx's
    version converter keeps the node as it is, which would read it with opset 13's
    single-axis meaning (it does flatten Softmax and LogSoftmax).
    """
    fresh = _fresh_names(model)
    nodes = []
    for node in model.graph.node:
        if node.op_type != "Hardmax" or node.domain not in DEFAULT_DOMAINS:
            nodes.append(node)
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        x, y = node.input[0], node.output[0]
        shape, flat, hard = fresh(f"{y}/shape"), fresh(f"{y}/flat"), fresh(f"{y}/hardmax")
        nodes += [
            onnx.helper.make_node("Shape", [x], [shape], name=fresh(f"{node.name}/shape")),
            onnx.helper.make_node("Flatten", [x], [flat], name=fresh(f"{node.name}/flatten"),
                                  axis=axis),
            onnx.helper.make_node("Hardmax", [flat], [hard], name=node.name, axis=1),
            onnx.helper.make_node("Reshape", [hard, shape], [y], name=fresh(f"{node.name}/reshape")),
        ]
    del model.graph.node[:]
    model.graph.node.extend(nodes)
