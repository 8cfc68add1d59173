"""Function operators: ops without a translator are expanded into their onnx function bodies.

The numbers are checked against onnx's reference implementation. Ops that may gain a
translator of their own (Celu, Elu) are tested with their translators removed, so these
tests hold whether or not hetero has a dedicated kernel for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.frontend.onnx import functions
from hetero.core.frontend.onnx.context import TRANSLATORS
from hetero.core.frontend.onnx.functions import expand_functions
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.ir.graph import Graph
from hetero.core.ir.types import TensorType
from hetero.errors import UnsupportedOpError
from models import tiny_model

rng = np.random.default_rng(0)


def model_of(nodes: Sequence[onnx.NodeProto], feeds: Mapping[str, np.ndarray],
             outputs: Sequence[str] = ("y",), opset: int = 18) -> onnx.ModelProto:
    """A model of ``nodes``, its outputs typed from what onnx's reference computes."""
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                            a.shape) for n, a in feeds.items()]
    untyped = [helper.make_value_info(n, onnx.TypeProto()) for n in outputs]
    model = helper.make_model(helper.make_graph(list(nodes), "tiny", inputs, untyped),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 21 else 10
    results = ReferenceEvaluator(model).run(None, dict(feeds))
    del model.graph.output[:]
    model.graph.output.extend(
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape)
        for n, r in zip(outputs, results))
    return model


def check(nodes: Sequence[onnx.NodeProto], feeds: Mapping[str, np.ndarray],
          outputs: Sequence[str] = ("y",), opset: int = 18, rtol: float = 1e-5) -> Graph:
    """Import, run hetero's reference and onnx's; assert they agree; return the graph."""
    model = model_of(nodes, feeds, outputs, opset)
    graph = hetero.load_onnx(model)
    ours = hetero.run_reference(graph, dict(feeds))
    theirs = ReferenceEvaluator(model).run(None, dict(feeds))
    for name, expected in zip(outputs, theirs):
        assert ours[name].dtype == expected.dtype, name
        np.testing.assert_allclose(ours[name], expected, rtol=rtol, atol=1e-6, err_msg=name)
    return graph


def ops(graph: Graph) -> list[str]:
    return [n.op for n in graph.nodes]


@pytest.fixture
def without_translators(monkeypatch: pytest.MonkeyPatch):
    """Remove translators for the length of a test: ``without_translators("Celu", "Elu")``."""

    def remove(*op_types: str) -> None:
        for op_type in op_types:
            monkeypatch.delitem(TRANSLATORS, op_type, raising=False)

    return remove


# -- expansion --------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("axes", [None, [0, 1], [2, 3]])
def test_mean_variance_normalization_is_its_function_body(opset: int, axes: list[int] | None
                                                          ) -> None:
    # opset 11 is upgraded to 13 first; opset 18's body reads axes as an input.
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn", **attrs)
    graph = check([node], {"x": rng.standard_normal((2, 3, 4, 5)).astype(np.float32)},
                  opset=opset, rtol=1e-4)
    assert "MeanVarianceNormalization" not in ops(graph)
    assert "ReduceMean" in ops(graph)
    assert all(n.name.startswith("mvn/") for n in graph.nodes)


@pytest.mark.parametrize("saturate", [None, 0, 1])
@pytest.mark.parametrize("to", [np.float64, np.int32, np.float16])
def test_cast_like_is_a_cast(to: type, saturate: int | None, without_translators) -> None:
    # Its function body (hetero translates CastLike itself too; that is tested below).
    without_translators("CastLike")
    attrs = {} if saturate is None else {"saturate": saturate}
    node = helper.make_node("CastLike", ["x", "like"], ["y"], name="cl", **attrs)
    feeds = {"x": (rng.standard_normal((3, 4)) * 100).astype(np.float32),
             "like": np.zeros([1], to)}
    graph = check([node], feeds, opset=21)
    assert ops(graph) == ["Cast"]
    assert graph.nodes[0].name == "cl/Cast"


@pytest.mark.parametrize("to", [np.float64, np.int32, np.float16])
def test_cast_like_translates_to_one_cast(to: type) -> None:
    node = helper.make_node("CastLike", ["x", "like"], ["y"], name="cl")
    feeds = {"x": (rng.standard_normal((3, 4)) * 100).astype(np.float32), "like": np.zeros([1], to)}
    graph = check([node], feeds, opset=21)
    assert ops(graph) == ["Cast"] and graph.nodes[0].attrs["to"] == np.dtype(to)


def test_swish_is_its_function_body(without_translators) -> None:
    without_translators("Swish")
    node = helper.make_node("Swish", ["x"], ["y"], name="sw", alpha=0.7)
    graph = check([node], {"x": rng.standard_normal((4, 6)).astype(np.float32)}, opset=24)
    assert "Sigmoid" in ops(graph)


def test_a_translator_wins_over_a_function_body() -> None:
    # Gelu and LayerNormalization have function bodies and translators of their own.
    x = rng.standard_normal((2, 8)).astype(np.float32)
    nodes = [helper.make_node("Gelu", ["x"], ["g"], name="gelu"),
             helper.make_node("LayerNormalization", ["g", "scale"], ["y"], name="ln")]
    model = model_of(nodes, {"x": x, "scale": np.ones(8, np.float32)}, opset=20)
    graph = hetero.load_onnx(model)
    assert ops(graph) == ["Gelu", "LayerNormalization"]


def test_nested_bodies_and_default_attributes(without_translators) -> None:
    # Celu's body calls Elu, whose body reads its alpha (default 1.0) by reference; the
    # node sets none, so the default must be applied for the body to be complete.
    without_translators("Celu", "Elu")
    nodes = [helper.make_node("Celu", ["x"], ["c"], name="celu", alpha=2.0),
             helper.make_node("Elu", ["c"], ["y"], name="elu")]
    graph = check(nodes, {"x": (rng.standard_normal((3, 5)) * 3).astype(np.float32)})
    assert {"Celu", "Elu"}.isdisjoint(ops(graph))
    names = [n.name for n in graph.nodes]
    assert any(name.startswith("celu/Elu/") for name in names), names
    assert all(name.startswith(("celu/", "elu/")) for name in names), names


def test_body_names_are_fresh_and_lead_back_to_the_node() -> None:
    # Two unnamed nodes of one op, and a model value that a body value's name would take.
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    nodes = [helper.make_node("MeanVarianceNormalization", ["x"], ["m"], axes=[2]),
             helper.make_node("Identity", ["m"], ["m/X_RM"]),
             helper.make_node("MeanVarianceNormalization", ["m/X_RM"], ["y"], axes=[2])]
    graph = check(nodes, {"x": x}, rtol=1e-4)
    names = [n.name for n in graph.nodes]
    assert len(names) == len(set(names))
    assert any(name.startswith("m/") for name in names)
    assert any(name.startswith("y/") for name in names)


def test_expansions_are_recorded() -> None:
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    nodes = [helper.make_node("MeanVarianceNormalization", ["x"], ["y"], name="mvn"),
             helper.make_node("Relu", ["y"], ["z"], name="relu")]
    source = read_model(model_of(nodes, {"x": x}, ["z"]))
    types = {"x": TensorType((2, 3, 4, 5), np.float32)}
    expansions = expand_functions(source, 18, types, TRANSLATORS)
    assert [e.op_type for e in expansions] == ["MeanVarianceNormalization"]
    assert str(expansions[0]).startswith(
        "expanded node 'mvn' (MeanVarianceNormalization) into its onnx function body (")
    assert source.model.graph.node[-1].name == "relu"
    assert "MeanVarianceNormalization" not in {n.op_type for n in source.model.graph.node}


# -- refusals ---------------------------------------------------------------------------------

def test_a_body_of_unsupported_ops_is_named_before_shapes(without_translators) -> None:
    without_translators("Div")
    nodes = [helper.make_node("MeanVarianceNormalization", ["x"], ["m"], name="mvn"),
             helper.make_node("StringNormalizer", ["m"], ["y"], name="strings")]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 4, 5])}, ["y"])
    with pytest.raises(UnsupportedOpError) as info:
        hetero.load_onnx(model)
    message = str(info.value)
    assert "2 op type(s)" in message
    assert "MeanVarianceNormalization (1 node, e.g. mvn; its onnx function body uses Div)" \
        in message
    assert "StringNormalizer (1 node, e.g. strings)" in message


def test_a_context_dependent_body_of_unsupported_ops(without_translators) -> None:
    # CastLike's body depends on its input types, so it is judged after shape inference.
    without_translators("Cast", "CastLike")
    nodes = [helper.make_node("CastLike", ["x", "like"], ["y"], name="cl_1"),
             helper.make_node("CastLike", ["y", "x"], ["z"], name="cl_2")]
    model = model_of(nodes, {"x": np.zeros(3, np.float32), "like": np.zeros(1, np.int32)},
                     ["z"])
    with pytest.raises(UnsupportedOpError) as info:
        hetero.load_onnx(model)
    message = str(info.value)
    assert "2 node(s)" in message
    for name in ("cl_1", "cl_2"):
        assert f"node '{name}' (CastLike): its onnx function body uses Cast" in message


def test_nesting_is_bounded(without_translators, monkeypatch: pytest.MonkeyPatch) -> None:
    without_translators("Celu", "Elu")
    monkeypatch.setattr(functions, "MAX_DEPTH", 1)
    node = helper.make_node("Celu", ["x"], ["y"], name="celu")
    with pytest.raises(UnsupportedOpError, match="'celu'.*more than 1 levels"):
        hetero.load_onnx(model_of([node], {"x": np.zeros(3, np.float32)}))


def test_an_op_without_a_body_keeps_the_plain_error() -> None:
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], name="regex")
    model = tiny_model([node], {"x": (TensorProto.STRING, [2])}, ["y"], opset=20)
    with pytest.raises(UnsupportedOpError, match=r"RegexFullMatch \(1 node, e.g. regex\)\. "):
        hetero.load_onnx(model)


def test_hetero_inspect_counts_function_ops_as_supported() -> None:
    from hetero.cli.stats import unsupported_nodes

    nodes = [helper.make_node("MeanVarianceNormalization", ["x"], ["m"], name="mvn"),
             helper.make_node("RegexFullMatch", ["m"], ["y"], name="regex")]
    model = tiny_model(nodes, {"x": (TensorProto.FLOAT, [2, 3, 4, 5])}, ["y"])
    assert unsupported_nodes(model).nodes == {"RegexFullMatch": ["regex"]}


def test_a_skipped_optional_input_in_the_middle(without_translators) -> None:
    # onnx's inliner cannot build Attention's context-dependent body when the node skips
    # attn_mask but passes past_key/past_value; the schema builds it and the inliner
    # inlines it as a local function.
    without_translators("Attention")
    q, k, v = (rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))
    past_k, past_v = (rng.standard_normal((1, 2, 2, 4)).astype(np.float32) for _ in range(2))
    node = helper.make_node("Attention", ["q", "k", "v", "", "past_k", "past_v"],
                            ["y", "present_k", "present_v"], name="attn")
    graph = check([node], {"q": q, "k": k, "v": v, "past_k": past_k, "past_v": past_v},
                  outputs=("y", "present_k", "present_v"), opset=23, rtol=1e-4)
    assert "Attention" not in ops(graph)
