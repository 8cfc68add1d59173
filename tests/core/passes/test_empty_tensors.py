"""Empty tensors fold: nodes with only empty outputs, Concat's and Split's empty parts,
scatters of nothing."""

from __future__ import annotations

import numpy as np

from hetero.core.exec.reference import run_reference
from hetero.core.ir.graph import Graph
from hetero.core.passes.pipeline import optimize


def test_a_node_whose_outputs_are_empty_becomes_a_constant() -> None:
    g = Graph("g")
    x = g.add_input("x", (0, 4), "float32")
    y = g.add_node("Relu", [x]).output
    g.set_outputs([y])
    out = optimize(g)
    assert not out.nodes
    assert out.outputs[0].data is not None and out.outputs[0].shape == (0, 4)


def test_concat_drops_its_empty_operands() -> None:
    g = Graph("g")
    x = g.add_input("x", (2, 3), "float32")
    e = g.add_input("e", (2, 0), "float32")
    y = g.add_node("Concat", [e, x, e], {"axis": 1}).output
    g.set_outputs([g.add_node("Relu", [y]).output])
    out = optimize(g)
    concat = next(n for n in out.nodes if n.op == "Concat")
    assert [v.name for v in concat.inputs] == ["x"]
    xs = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    feeds = {"x": xs, "e": np.zeros((2, 0), np.float32)}
    (expected,), (got,) = run_reference(g, feeds).values(), run_reference(out, feeds).values()
    np.testing.assert_array_equal(got, expected)


def test_a_split_keeps_only_its_non_empty_outputs() -> None:
    g = Graph("g")
    x = g.add_input("x", (2, 4), "float32")
    split = g.add_node("Split", [x], {"axis": 1, "split": [4, 0]})
    g.set_outputs([g.add_node("Relu", [v]).output for v in split.outputs])
    out = optimize(g)
    (node,) = [n for n in out.nodes if n.op == "Split"]
    assert list(node.attrs["split"]) == [4]
    assert out.outputs[1].data is not None and out.outputs[1].shape == (2, 0)


def test_a_scatter_of_no_updates_is_its_data() -> None:
    # Faster R-CNN's RoI pooling scatters each FPN level's boxes; a level may get none.
    g = Graph("g")
    x = g.add_input("x", (3, 4), "float32")
    idx = g.add_input("idx", (0, 4), "int64")
    upd = g.add_input("upd", (0, 4), "float32")
    nd_idx = g.add_input("nd_idx", (0, 1), "int64")
    elements = g.add_node("ScatterElements", [x, idx, upd], {"axis": 0}).output
    nd = g.add_node("ScatterND", [elements, nd_idx, upd]).output
    g.set_outputs([g.add_node("Relu", [nd]).output])
    out = optimize(g)
    assert [n.op for n in out.nodes] == ["Relu"]
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4) - 5, "idx": np.zeros((0, 4), np.int64),
             "upd": np.zeros((0, 4), np.float32), "nd_idx": np.zeros((0, 1), np.int64)}
    (expected,), (got,) = run_reference(g, feeds).values(), run_reference(out, feeds).values()
    np.testing.assert_array_equal(got, expected)
