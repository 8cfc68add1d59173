"""The quantize pass: QDQ structure, numbers against the float graph, onnxruntime's quantiser."""

from __future__ import annotations


import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero import GraphBuilder
from hetero.core.exec.reference import run_reference
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.ir.graph import Graph
from hetero.core.ir.verify import verify
from hetero.core.passes.quantize import quantize
from hetero.core.quant import Calibration, calibrate
from hetero.errors import QuantizationError
from models import light_model_path
from oracle import quantize_with_onnxruntime

#: The float graph, its calibration and its quantised copy.
Small = tuple[Graph, Calibration, Graph]


def _samples(shape: tuple[int, ...], count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]


def _small_graph() -> Graph:
    """conv -> relu -> maxpool -> conv -> add (residual) -> reshape -> gemm."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("small")
    x = b.input("x", (1, 3, 8, 8))
    w1 = b.constant(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "w1")
    b1 = b.constant(rng.standard_normal(4).astype(np.float32) * 0.1, "b1")
    w2 = b.constant(rng.standard_normal((4, 4, 3, 3)).astype(np.float32) * 0.3, "w2")
    b2 = b.constant(rng.standard_normal(4).astype(np.float32) * 0.1, "b2")
    wg = b.constant(rng.standard_normal((10, 64)).astype(np.float32) * 0.2, "wg")
    bg = b.constant(rng.standard_normal(10).astype(np.float32) * 0.1, "bg")
    r1 = b.Relu(b.Conv(x, w1, b1, pads=(1, 1, 1, 1), name="c1"), name="r1")
    p1 = b.MaxPool(r1, kernel_shape=(2, 2), strides=(2, 2), name="p1")
    a1 = b.Add(b.Conv(p1, w2, b2, pads=(1, 1, 1, 1), name="c2"), p1, name="a1")
    f = b.Reshape(a1, shape=(1, 64), name="f")
    b.output(b.Gemm(f, wg, bg, transB=1, name="y"))
    return b.build()


def _quantised_tensors(graph: Graph) -> set[str]:
    """Names of the float tensors that feed a QuantizeLinear, as the float graph named them."""
    return {n.inputs[0].name.removesuffix("_QuantizeLinear_Input")
            for n in graph.nodes if n.op == "QuantizeLinear"}


def _constant_dqs(graph: Graph) -> dict[str, tuple[str, int | None]]:
    """Quantised constants by float name: (integer dtype, per-channel axis or None)."""
    out = {}
    for n in graph.nodes:
        if n.op == "DequantizeLinear" and n.inputs[0].is_constant:
            per_axis = n.inputs[1].type.size > 1
            out[n.inputs[0].name.removesuffix("_quantized")] = (
                n.inputs[0].dtype.name, n.attrs["axis"] if per_axis else None)
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.fixture(scope="module")
def small() -> Small:
    graph = _small_graph()
    # 16 samples: the 10-wide output sees few values per sample, and a held-out input
    # beyond the calibrated range is clipped (as it would be by any int8 deployment).
    calib = calibrate(graph, _samples((1, 3, 8, 8), 16, seed=1))
    return graph, calib, quantize(graph, calib)


def test_pairs_sit_where_onnxruntime_puts_them(small: Small) -> None:
    _, _, q = small
    # No pair between c1 and its Relu; y (a graph output) is quantised and keeps its name.
    assert _quantised_tensors(q) == {"x", "r1", "p1", "c2", "a1", "f", "y"}
    assert [v.name for v in q.outputs] == ["y"] and q.outputs[0].producer.op == "DequantizeLinear"
    assert q.inputs[0].users[0].op == "QuantizeLinear" and len(q.inputs[0].users) == 1
    assert q.node("r1").inputs[0].producer.op == "Conv"
    # One pair per tensor, shared: p1 feeds c2 and a1 through the same DequantizeLinear.
    p1_dq = q.node("c2").inputs[0]
    assert p1_dq.producer.op == "DequantizeLinear" and p1_dq in q.node("a1").inputs
    verify(q)


def test_an_add_and_its_relu_are_one_unit_that_lowers_to_a_clamping_qadd() -> None:
    # ResNet's residual join: Add -> Relu. No pair between them, so the Relu is the
    # QAdd's clamp instead of a Requantize of its own.
    from hetero.core.passes.lower_qdq import lower_qdq

    b = GraphBuilder("residual")
    x, skip = b.input("x", (1, 4, 4, 4)), b.input("skip", (1, 4, 4, 4))
    b.output(b.Relu(b.Add(x, skip, name="a"), name="r"))
    graph = b.build()
    rng = np.random.default_rng(3)
    samples = [{n: rng.standard_normal((1, 4, 4, 4)).astype(np.float32) for n in ("x", "skip")}
               for _ in range(4)]
    q = quantize(graph, calibrate(graph, samples))
    assert q.node("r").inputs[0].producer.op == "Add"
    assert _quantised_tensors(q) == {"x", "skip", "r"}
    lowered = lower_qdq(q)
    [qadd] = [n for n in lowered.nodes if n.op == "QAdd"]
    assert "Requantize" not in lowered.op_histogram()
    assert qadd.attrs["y_min"] >= qadd.attrs["y_zero"]


def test_data_movement_ops_reuse_their_input_parameters(small: Small) -> None:
    _, _, q = small
    quant = {n.inputs[0].name: n for n in q.nodes if n.op == "QuantizeLinear"}
    assert quant["p1"].inputs[1] is quant["r1"].inputs[1]   # MaxPool
    assert quant["f"].inputs[2] is quant["a1"].inputs[2]    # Reshape
    assert float(quant["r1"].inputs[2].data) == -128        # a ReLU output's range starts at 0


def test_weights_are_int8_per_channel_and_biases_int32(small: Small) -> None:
    _, _, q = small
    assert _constant_dqs(q) == {
        "w1": ("int8", 0), "w2": ("int8", 0), "wg": ("int8", 0),
        "b1": ("int32", 0), "b2": ("int32", 0), "bg": ("int32", 0),
    }
    conv = q.node("c2")
    x_scale = conv.inputs[0].producer.inputs[1].data
    w_scale = conv.inputs[1].producer.inputs[1].data
    b_dq = conv.inputs[2].producer
    np.testing.assert_array_equal(b_dq.inputs[1].data, x_scale * w_scale)
    assert not b_dq.inputs[2].data.any()


def test_per_tensor_weights_when_asked() -> None:
    graph = _small_graph()
    calib = calibrate(graph, _samples((1, 3, 8, 8), 2, seed=1))
    q = quantize(graph, calib, per_channel=False)
    assert all(axis is None for _, axis in _constant_dqs(q).values())


def test_input_graph_is_not_changed(small: Small) -> None:
    graph, _, _ = small
    assert str(graph) == str(_small_graph())


def test_optimize_keeps_the_dequantized_constants(small: Small) -> None:
    _, _, q = small
    optimized = hetero.optimize(q)
    assert _constant_dqs(optimized) == _constant_dqs(q)
    assert _quantised_tensors(optimized) == _quantised_tensors(q)


def test_quantised_graph_agrees_with_float_graph(small: Small) -> None:
    graph, _, q = small
    for feeds in _samples((1, 3, 8, 8), 2, seed=2):  # held out: not calibration samples
        expected = run_reference(graph, feeds)["y"]
        actual = run_reference(q, feeds)["y"]
        assert _cosine(actual, expected) >= 0.99


def test_quantising_twice_is_refused_but_other_ops_may_follow(small: Small) -> None:
    graph, calib, q = small
    with pytest.raises(QuantizationError, match="already quantised.*ops="):
        quantize(q, calib)
    convs_only = quantize(graph, calib, ops={"Conv"})
    assert "f" not in _quantised_tensors(convs_only)
    both = quantize(convs_only, calib, ops={"Gemm"})
    assert {"f", "y"} <= _quantised_tensors(both)
    assert _quantised_tensors(convs_only) <= _quantised_tensors(both)


def test_uncalibrated_tensor_is_named(small: Small) -> None:
    graph, calib, _ = small
    partial = Calibration({k: v for k, v in calib.items() if k != "a1"})
    with pytest.raises(QuantizationError, match="'a1'.*calibrate"):
        quantize(graph, partial)


@pytest.mark.slow
def test_squeezenet_with_random_weights_keeps_its_outputs() -> None:
    model = randomize_weights(read_model(light_model_path("squeezenet")).model, 0)
    graph = hetero.optimize(hetero.load_onnx(model))
    name, shape = graph.inputs[0].name, graph.inputs[0].shape
    rng = np.random.default_rng(0)
    feeds = [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(6)]
    q = quantize(graph, calibrate(graph, feeds[:4]))
    assert sum(n.op == "Conv" for n in q.nodes) == sum(n.op == "Conv" for n in graph.nodes)
    softmax = next(n for n in graph.nodes if n.op == "Softmax")
    logits, out = softmax.inputs[0].name, graph.outputs[0].name
    for sample in feeds[4:]:
        expected = run_reference(graph, sample, keep=True)
        actual = run_reference(q, sample, keep=True)
        # The logits too: a softmax can look alike for logits that are not.
        assert _cosine(actual[logits], expected[logits]) >= 0.99
        assert _cosine(actual[out], expected[out]) >= 0.99


# -- onnxruntime's quantiser ------------------------------------------------------------
#: The float ONNX model and what onnxruntime's quantize_static made of it.
Models = tuple[onnx.ModelProto, onnx.ModelProto]


def _float_onnx_model() -> onnx.ModelProto:
    """The small graph's shape of network as ONNX, ending in a MatMul whose B is per column."""
    rng = np.random.default_rng(0)

    def init(name: str, shape: tuple[int, ...], std: float) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * std).astype(np.float32), name)

    inits = [init("w1", (4, 3, 3, 3), 0.3), init("b1", (4,), 0.1), init("w2", (4, 4, 3, 3), 0.3),
             init("b2", (4,), 0.1), init("wg", (10, 64), 0.2), init("bg", (10,), 0.1),
             init("wm", (10, 5), 0.3), numpy_helper.from_array(np.array([1, 64], np.int64), "shp")]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p1"], ["a1"]),
        helper.make_node("Reshape", ["a1", "shp"], ["f"]),
        helper.make_node("Gemm", ["f", "wg", "bg"], ["g"], transB=1),
        helper.make_node("MatMul", ["g", "wm"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "ortq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture(scope="module")
def ort_quantised(tmp_path_factory: pytest.TempPathFactory) -> Models:
    folder = tmp_path_factory.mktemp("ortq")
    float_model = _float_onnx_model()
    onnx.save(float_model, folder / "float.onnx")
    quantize_with_onnxruntime(folder / "float.onnx", folder / "qdq.onnx", _samples((1, 3, 8, 8), 4, seed=1))
    return float_model, onnx.load(folder / "qdq.onnx")


def test_same_structure_and_parameters_as_onnxruntime(ort_quantised: Models) -> None:
    float_model, ort_model = ort_quantised
    theirs = hetero.load_onnx(ort_model)
    graph = hetero.load_onnx(float_model)
    ours = quantize(graph, calibrate(graph, _samples((1, 3, 8, 8), 4, seed=1)))
    assert _quantised_tensors(ours) == _quantised_tensors(theirs)
    assert _constant_dqs(ours) == _constant_dqs(theirs)
    assert _constant_dqs(ours)["wm"] == ("int8", 1)
    for mine, other in zip(sorted(_qparams(ours).items()), sorted(_qparams(theirs).items())):
        assert mine[0] == other[0]
        # Both calibrate the same samples, in different executors: float32 rounding apart.
        np.testing.assert_allclose(mine[1][0], other[1][0], rtol=1e-5, err_msg=mine[0])
        assert abs(mine[1][1] - other[1][1]) <= 1, mine[0]


def _qparams(graph: Graph) -> dict[str, tuple[float, int]]:
    return {n.inputs[0].name.removesuffix("_QuantizeLinear_Input"):
            (float(n.inputs[1].data), int(n.inputs[2].data))
            for n in graph.nodes if n.op == "QuantizeLinear"}


def test_onnxruntime_qdq_model_runs_as_onnxruntime_runs_it(ort_quantised: Models) -> None:
    import onnxruntime as ort

    _, ort_model = ort_quantised
    graph = hetero.optimize(hetero.load_onnx(ort_model))
    out_dq = graph.outputs[0].producer
    assert out_dq.op == "DequantizeLinear"
    step = float(out_dq.inputs[1].data)
    session = ort.InferenceSession(ort_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    for feeds in _samples((1, 3, 8, 8), 3, seed=2):
        expected = session.run(None, feeds)[0]
        actual = run_reference(graph, feeds)["y"]
        # onnxruntime runs the units in integer kernels; the reference in float: one
        # output step apart at most (a rounding that lands the other way).
        np.testing.assert_allclose(actual, expected, rtol=0, atol=step * 1.001)


def test_a_tensor_calibrated_to_an_infinite_range_stays_float() -> None:
    # GPT-2's causal mask: Where(mask, scores, -inf), plus the attention mask, then
    # Softmax. int8 cannot hold -inf, so that tensor keeps float (the Add reading it is
    # not quantised); the rest is, and the result still agrees.
    b = GraphBuilder("masked")
    x = b.input("x", (1, 4, 4))
    keep = np.tril(np.ones((4, 4), bool))[None]
    masked = b.Where(keep, b.MatMul(x, x, name="scores"), np.array(-np.inf, np.float32), name="masked")
    biased = b.Add(masked, np.zeros((1, 4, 4), np.float32) + 0.5, name="biased")
    b.output(b.Softmax(biased, axis=-1, name="p"))
    graph = b.build()
    rng = np.random.default_rng(4)
    samples = [{"x": rng.standard_normal((1, 4, 4)).astype(np.float32)} for _ in range(4)]
    q = quantize(graph, calibrate(graph, samples))
    quantised = _quantised_tensors(q)
    assert "masked" not in quantised and "x" in quantised
    got, want = run_reference(q, samples[0])["p"], run_reference(graph, samples[0])["p"]
    np.testing.assert_allclose(got, want, atol=0.05)
