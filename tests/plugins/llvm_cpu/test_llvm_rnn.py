"""The recurrent ops compiled by llvm_cpu: run-time sequence lengths (one compile serves
every value; a length past the sequence is refused on the host, never read), and a
stacked LSTM of real size against onnxruntime."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper
import onnxruntime as ort
import pytest

import hetero
from hetero.core.ir import GraphBuilder
from hetero.errors import InputError
from hetero.onnx_backend import HeteroBackend


def test_sequence_lengths_are_read_at_run_time() -> None:
    rng = np.random.default_rng(3)
    steps, batch, size, units = 4, 3, 2, 5
    b = GraphBuilder("gru")
    x = b.input("X", (steps, batch, size), np.float32)
    lens = b.input("L", (batch,), np.int32)
    w = b.constant(rng.uniform(-0.5, 0.5, (2, 3 * units, size)).astype(np.float32), "W")
    r = b.constant(rng.uniform(-0.5, 0.5, (2, 3 * units, units)).astype(np.float32), "R")
    b.output(*b.GRU(x, w, r, None, lens, direction="bidirectional"))
    graph = b.build()
    exe = hetero.compile(graph, targets=["llvm_cpu"])
    feeds = {"X": rng.standard_normal((steps, batch, size)).astype(np.float32)}
    for value in ([4, 4, 4], [1, 0, 3], [0, 0, 0]):
        feeds["L"] = np.array(value, np.int32)
        got, want = exe.run(feeds), hetero.run_reference(graph, feeds)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)
    feeds["L"] = np.array([1, 5, 2], np.int32)
    with pytest.raises(InputError, match="out of range"):
        exe.run(feeds)


def test_two_layer_lstm_matches_onnxruntime() -> None:
    """Two stacked LSTM layers, 50 steps, 64 units (a speech or text model's shape)."""
    rng = np.random.default_rng(0)
    steps, batch, size, units = 50, 2, 32, 64
    nodes, inits, prev = [], [], "X"
    for layer in range(2):
        width = size if layer == 0 else units
        for name, shape in (("W", (1, 4 * units, width)), ("R", (1, 4 * units, units)),
                            ("B", (1, 8 * units))):
            a = (rng.standard_normal(shape) / np.sqrt(units)).astype(np.float32)
            inits.append(helper.make_tensor(f"{name}{layer}", TensorProto.FLOAT, shape, a.ravel()))
        nodes += [helper.make_node("LSTM", [prev, f"W{layer}", f"R{layer}", f"B{layer}"],
                                   [f"Y{layer}", f"H{layer}"], hidden_size=units),
                  helper.make_node("Squeeze", [f"Y{layer}", "axis"], [f"S{layer}"])]
        prev = f"S{layer}"
    inits.append(helper.make_tensor("axis", TensorProto.INT64, (1,), [1]))
    graph = helper.make_graph(
        nodes, "lstm2", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (steps, batch, size))],
        [helper.make_tensor_value_info("S1", TensorProto.FLOAT, (steps, batch, units)),
         helper.make_tensor_value_info("H1", TensorProto.FLOAT, (1, batch, units))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    x = rng.standard_normal((steps, batch, size)).astype(np.float32)
    got = HeteroBackend.prepare(model).run([x])
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"X": x})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
