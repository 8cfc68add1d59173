"""The verifier's work grows linearly with the graph, a constant shared by every node included."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import hetero
from hetero.core.ir import GraphBuilder
from hetero.core.ir.verify import problems
from workcount import growth


def _chain(n: int):
    b = GraphBuilder("chain")
    x = b.input("x", (4,), "float32")
    one = b.constant(np.ones(4, np.float32), "one")
    for _ in range(n):
        x = b.Add(x, one)
    b.output(x)
    return b.build()


def test_verifying_a_chain_that_shares_one_constant_is_linear() -> None:
    graphs = {n: _chain(n) for n in (100, 400)}
    assert problems(graphs[100]) == []
    # Linear: about 4x the lines for 4x the nodes (quadratic would be 16x).
    assert growth(lambda n: problems(graphs[n]), 100) < 6


def _chain_model(n: int):
    nodes = [helper.make_node("Add", [f"v{i}", "one"], [f"v{i + 1}"]) for i in range(n)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [4])],
                              [numpy_helper.from_array(np.ones(4, np.float32), "one")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_importing_such_a_chain_is_linear() -> None:
    models = {n: _chain_model(n) for n in (100, 400)}
    assert growth(lambda n: hetero.load_onnx(models[n]), 100) < 6
