"""Gather's indices out of range: an error naming the node, never a clamped element.

onnxruntime raises on such indices and so does the reference. Constant indices are
refused when the graph is built (importing the model); run-time indices are checked
by llvm_cpu on the host before its kernel runs, in a part loaded from its artifact
too. In-range negative indices wrap, as in onnxruntime.
"""

from __future__ import annotations

import numpy as np
from oracle import node_model, run_model
import pytest

import hetero
from hetero.core.ir import GraphBuilder
from hetero.core.plugin.manager import get_backend
from hetero.errors import InputError, ShapeError
from hetero.core.plugin.target import bind

X = np.arange(10, dtype=np.float32).reshape(2, 5)


def test_a_constant_index_out_of_range_is_refused_when_the_graph_is_built() -> None:
    b = GraphBuilder("g")
    with pytest.raises(ShapeError, match=r"node gather \(Gather\): constant 'idx': index 7 is out of "
                                         r"range for axis 1 of size 5"):
        b.Gather(b.input("x", X.shape), b.constant(np.array([1, 7], np.int64), "idx"), axis=1,
                 name="gather")


def test_importing_a_model_with_a_constant_index_out_of_range_names_the_node() -> None:
    model = node_model("Gather", {"x": X, "idx": np.array([-6], np.int64)}, constant_inputs=("idx",), axis=1)
    model.graph.node[0].name = "lookup"
    with pytest.raises(Exception):  # onnxruntime refuses it too
        run_model(model, {"x": X})
    with pytest.raises(ShapeError, match=r"lookup.*index -6 is out of range for axis 1 of size 5"):
        hetero.load_onnx(model)


def _runtime_gather_part():  # noqa: ANN202 - an LlvmCpuPart
    b = GraphBuilder("g")
    b.output(b.Gather(b.input("x", X.shape), b.input("idx", (3,), np.int64), axis=1, name="lookup"))
    return bind(get_backend("llvm_cpu")).compile(b.build())


@pytest.mark.parametrize("bad", [5, -6, 2**40])
def test_a_runtime_index_out_of_range_is_an_input_error_naming_the_node(bad: int) -> None:
    part = _runtime_gather_part()
    idx = np.array([0, bad, 1], np.int64)
    with pytest.raises(InputError, match=rf"lookup \(Gather\): idx: index {bad} is out of range "
                                         r"for axis 1 of size 5"):
        part.run({"x": X, "idx": idx})
    loaded = get_backend("llvm_cpu").load_artifact(part.artifact)
    with pytest.raises(InputError, match=rf"index {bad} is out of range"):
        loaded.run({"x": X, "idx": idx})


def test_runtime_negative_indices_in_range_wrap_as_in_onnxruntime() -> None:
    idx = np.array([-5, -1, 4], np.int64)
    got = _runtime_gather_part().run({"x": X, "idx": idx})["lookup"]
    model = node_model("Gather", {"x": X, "idx": idx}, axis=1)
    np.testing.assert_array_equal(got, run_model(model, {"x": X, "idx": idx})[0])
