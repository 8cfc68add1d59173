"""RNN, LSTM and GRU: the references against onnxruntime (directions, peepholes,
input_forget, linear_before_reset, clip, run-time sequence lengths with empty entries,
every activation with its alpha and beta), against onnx's reference implementation at
the defaults, the batch-major layout against the time-major one (onnxruntime has no
layout 1), opsets 7, 14 and 22, and the translator's and inference's refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
import onnxruntime as ort
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.errors import InputError, OpAttributeError, ShapeError, UnsupportedOpError

_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def recurrent_model(op: str, attrs: dict[str, Any], steps: int = 5, batch: int = 3,
                    size: int = 4, units: int = 3, bias: bool = True, initial: bool = True,
                    peepholes: bool = False, lens: list[int] | None = None,
                    opset: int = 14, seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model (weights as initializers, X and sequence_lens as inputs) and its feeds."""
    rng = np.random.default_rng(seed)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gates, layout = _GATES[op], attrs.get("layout", 0)
    state = (batch, dirs, units) if layout else (dirs, batch, units)
    x = rng.standard_normal((batch, steps, size) if layout else (steps, batch, size)).astype(np.float32)
    arrays = {"W": rng.standard_normal((dirs, gates * units, size)) * 0.5,
              "R": rng.standard_normal((dirs, gates * units, units)) * 0.5}
    names = ["X", "W", "R"]
    if bias:
        arrays["B"] = rng.standard_normal((dirs, 2 * gates * units)) * 0.5
    names.append("B" if bias else "")
    names.append("L" if lens is not None else "")
    if initial:
        arrays["h0"] = rng.standard_normal(state)
        names.append("h0")
        if op == "LSTM":
            arrays["c0"] = rng.standard_normal(state)
            names.append("c0")
    if peepholes:
        names += [] if initial else ["", ""]
        arrays["P"] = rng.standard_normal((dirs, 3 * units)) * 0.5
        names.append("P")
    while names[-1] == "":
        names.pop()
    outputs = ["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"]
    node = helper.make_node(op, names, outputs, hidden_size=units, **attrs)
    y_shape = (batch, steps, dirs, units) if layout else (steps, dirs, batch, units)
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)]
    feeds = {"X": x}
    if lens is not None:
        inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, (batch,)))
        feeds["L"] = np.array(lens, np.int32)
    graph = helper.make_graph(
        [node], op.lower(), inputs,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, y_shape if n == "Y" else state)
         for n in outputs],
        [helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.astype(np.float32).ravel())
         for n, a in arrays.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), feeds


def ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    got = run_reference(hetero.load_onnx(model), feeds)
    return [got[o.name] for o in model.graph.output]


def onnxruntime(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


_DIRECTIONS = ["forward", "reverse", "bidirectional"]


@pytest.mark.parametrize("op", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("direction", _DIRECTIONS)
def test_defaults_match_onnxruntime_and_onnx(op: str, direction: str) -> None:
    model, feeds = recurrent_model(op, {"direction": direction})
    assert_close(ours(model, feeds), onnxruntime(model, feeds))
    assert_close(ours(model, feeds), ReferenceEvaluator(model).run(None, feeds))


@pytest.mark.parametrize("op,attrs,options", [
    ("LSTM", {}, {"peepholes": True}),
    ("LSTM", {"direction": "bidirectional"}, {"peepholes": True, "initial": False}),
    ("LSTM", {"input_forget": 1}, {}),
    ("LSTM", {"clip": 0.5}, {"peepholes": True}),
    ("GRU", {"linear_before_reset": 1}, {}),
    ("GRU", {"linear_before_reset": 1, "direction": "bidirectional", "clip": 0.3}, {}),
    ("GRU", {"clip": 0.3}, {"bias": False}),
    ("RNN", {"clip": 0.3}, {"bias": False, "initial": False}),
])
def test_options_match_onnxruntime(op: str, attrs: dict[str, Any], options: dict[str, Any]) -> None:
    model, feeds = recurrent_model(op, attrs, **options)
    assert_close(ours(model, feeds), onnxruntime(model, feeds))


@pytest.mark.parametrize("op", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("direction", _DIRECTIONS)
def test_run_time_sequence_lengths_match_onnxruntime(op: str, direction: str) -> None:
    """Entries shorter than the sequence, one empty (its Y_h is zero, as onnxruntime's)."""
    model, feeds = recurrent_model(op, {"direction": direction}, lens=[5, 0, 2],
                                   peepholes=op == "LSTM")
    assert_close(ours(model, feeds), onnxruntime(model, feeds))


@pytest.mark.parametrize("op,activations,alpha,beta", [
    ("RNN", ["Relu"], [], []),
    ("RNN", ["LeakyRelu"], [], []),  # ONNX's default alpha, 0.01
    ("RNN", ["LeakyRelu"], [0.3], []),
    ("RNN", ["ThresholdedRelu"], [0.2], []),
    ("RNN", ["ScaledTanh"], [0.7], [1.3]),
    ("RNN", ["Affine"], [0.7], [0.2]),
    ("RNN", ["HardSigmoid"], [], []),
    ("RNN", ["HardSigmoid"], [0.3], [0.4]),
    ("RNN", ["Elu"], [0.5], []),
    ("RNN", ["Softsign"], [], []),
    ("RNN", ["Softplus"], [], []),
    ("LSTM", ["sigmoid", "tanh", "TANH"], [], []),  # without case, as onnxruntime's LSTM
    ("LSTM", ["HardSigmoid", "Elu", "LeakyRelu"], [0.3, 0.5, 0.1], [0.4]),
    ("GRU", ["HardSigmoid", "Affine", "Sigmoid", "ScaledTanh"], [0.3, 0.5, 0.7, 0.9],
     [0.4, 0.1, 0.2]),
])
def test_activations_take_alpha_and_beta_in_order(op: str, activations: list[str],
                                                   alpha: list[float], beta: list[float]) -> None:
    """alpha and beta go, in order, to the activations that take them (onnxruntime's reading)."""
    attrs: dict[str, Any] = {"activations": activations}
    if len(activations) == 4:
        attrs["direction"] = "bidirectional"
    if alpha:
        attrs["activation_alpha"] = alpha
    if beta:
        attrs["activation_beta"] = beta
    model, feeds = recurrent_model(op, attrs)
    assert_close(ours(model, feeds), onnxruntime(model, feeds))


def test_missing_alpha_takes_onnx_defaults() -> None:
    """ThresholdedRelu's alpha defaults to 1 (ONNX's op; onnxruntime takes 0) and Affine's to
    1 and 0; ScaledTanh has no default and is refused without its values."""
    model, _ = recurrent_model("LSTM", {"activations": ["ThresholdedRelu", "Affine", "Tanh"]})
    node = next(n for n in hetero.load_onnx(model).nodes if n.op == "LSTM")
    assert node.attrs["activation_alpha"] == (1.0, 1.0, 0.0)
    assert node.attrs["activation_beta"] == (0.0, 0.0, 0.0)
    model, _ = recurrent_model("RNN", {"activations": ["ScaledTanh"], "activation_alpha": [0.5]})
    with pytest.raises(UnsupportedOpError, match="ScaledTanh needs its alpha and beta"):
        hetero.load_onnx(model)


@pytest.mark.parametrize("op", ["RNN", "LSTM", "GRU"])
def test_batch_major_layout_is_the_time_major_one_transposed(op: str) -> None:
    major, feeds = recurrent_model(op, {"direction": "bidirectional", "layout": 1}, lens=[4, 5, 1])
    minor, minor_feeds = recurrent_model(op, {"direction": "bidirectional"}, lens=[4, 5, 1])
    # The same numbers: X and the initial states transposed between the layouts.
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in major.graph.initializer}
    for init in minor.graph.initializer:
        if init.name in ("h0", "c0"):
            init.CopyFrom(onnx.numpy_helper.from_array(np.swapaxes(inits[init.name], 0, 1), init.name))
    minor_feeds["X"] = np.swapaxes(feeds["X"], 0, 1)
    got, want = ours(major, feeds), ours(minor, minor_feeds)
    np.testing.assert_array_equal(got[0], np.transpose(want[0], (2, 0, 1, 3)))
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, np.swapaxes(w, 0, 1))


@pytest.mark.parametrize("opset", [7, 22])
@pytest.mark.parametrize("op", ["RNN", "LSTM", "GRU"])
def test_other_opsets_import(op: str, opset: int) -> None:
    model, feeds = recurrent_model(op, {"direction": "bidirectional"}, opset=opset, lens=[5, 1, 3])
    assert_close(ours(model, feeds), onnxruntime(model, feeds))


def test_sequence_lengths_out_of_range_are_refused() -> None:
    model, feeds = recurrent_model("GRU", {}, lens=[5, 6, 1])
    with pytest.raises(InputError, match="sequence_lens"):
        ours(model, feeds)


def test_inference_refuses_bad_shapes_and_activation_counts() -> None:
    model, _ = recurrent_model("LSTM", {"direction": "bidirectional",
                                        "activations": ["Sigmoid", "Tanh", "Tanh"]})
    with pytest.raises(OpAttributeError, match="takes 6 activation"):
        hetero.load_onnx(model)
    model, _ = recurrent_model("GRU", {})
    model.graph.node[0].attribute[0].i = 4  # hidden_size no longer R's
    with pytest.raises((ShapeError, hetero.errors.HeteroError)):
        hetero.load_onnx(model)
