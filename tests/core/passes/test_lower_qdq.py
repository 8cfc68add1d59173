"""lower_qdq: QDQ units become int8 ops, within one output step of the QDQ graph's numbers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from oracle import quantize_with_onnxruntime

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder, Value
from hetero.core.passes.lower_qdq import lower_qdq, lower_qdq_where, unit_of

RNG = np.random.default_rng(11)
QDQ_OPS = {"QuantizeLinear", "DequantizeLinear"}


def qdq(b: GraphBuilder, x: Value, scale: float, zero: int, dtype: str = "int8") -> Value:
    """``DQ(Q(x))`` with per-tensor parameters."""
    s, z = np.float32(scale), np.array(zero, dtype)
    return b.DequantizeLinear(b.QuantizeLinear(x, s, z), s, z)


def out(b: GraphBuilder, y: Value, scale: float, zero: int) -> Graph:
    """Quantise ``y`` to the unit's output, dequantise it as the graph output, build."""
    b.output(qdq(b, y, scale, zero))
    return b.build()


def weight(b: GraphBuilder, shape: tuple[int, ...], axis: int = 0,
           zero: int = 0) -> tuple[Value, np.ndarray]:
    """A per-channel int8 weight behind its DequantizeLinear, and its scales."""
    w = RNG.integers(-127, 128, shape).astype(np.int8)
    scales = RNG.uniform(0.002, 0.01, shape[axis]).astype(np.float32)
    zeros = np.full(shape[axis], zero, np.int8)
    return b.DequantizeLinear(w, scales, zeros, axis=axis), scales


def bias(b: GraphBuilder, scales: np.ndarray) -> Value:
    q = RNG.integers(-3000, 3000, scales.shape).astype(np.int32)
    return b.DequantizeLinear(q, scales, np.zeros(scales.shape, np.int32), axis=0)


def conv_relu() -> Graph:
    b = GraphBuilder("conv_relu")
    x = qdq(b, b.input("x", (1, 3, 6, 6)), 0.03, 4)
    w, ws = weight(b, (4, 3, 3, 3))
    y = b.Relu(b.Conv(x, w, bias(b, ws * np.float32(0.03)), pads=(1, 1, 1, 1)))
    return out(b, y, 0.02, -128)


def depthwise_clip() -> Graph:
    b = GraphBuilder("depthwise_clip")
    x = qdq(b, b.input("x", (2, 3, 5, 5)), 0.04, -7)
    w, ws = weight(b, (3, 1, 3, 3))
    y = b.Clip(b.Conv(x, w, bias(b, ws * np.float32(0.04)), group=3, strides=(2, 2)),
               min=0.0, max=0.5)
    return out(b, y, 0.003, -128)


def gemm_trans_b() -> Graph:
    b = GraphBuilder("gemm")
    x = qdq(b, b.input("x", (4, 16)), 0.05, 2)
    w, ws = weight(b, (8, 16), axis=0)
    return out(b, b.Gemm(x, w, bias(b, ws * np.float32(0.05)), transB=1), 0.04, 3)


def matmul() -> Graph:
    b = GraphBuilder("matmul")
    x = qdq(b, b.input("x", (2, 3, 16)), 0.05, -2)
    w, _ = weight(b, (16, 8), axis=1)
    return out(b, b.MatMul(x, w), 0.04, 0)


def add_relu() -> Graph:
    b = GraphBuilder("add_relu")
    x1 = qdq(b, b.input("x1", (1, 4, 3, 3)), 0.03, 5)
    x2 = qdq(b, b.input("x2", (1, 4, 1, 3)), 0.011, -20)
    return out(b, b.Relu(b.Add(x1, x2)), 0.025, -100)


def mul() -> Graph:
    b = GraphBuilder("mul")
    x1 = qdq(b, b.input("x1", (2, 5)), 0.021, 3)
    x2 = qdq(b, b.input("x2", (5,)), 0.017, -1)
    return out(b, b.Mul(x1, x2), 0.013, 1)


def average_pool() -> Graph:
    b = GraphBuilder("average_pool")
    x = qdq(b, b.input("x", (1, 2, 6, 6)), 0.03, 1)
    y = b.AveragePool(x, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1),
                      count_include_pad=1)
    return out(b, y, 0.017, -3)


def global_average_pool() -> Graph:
    b = GraphBuilder("global_average_pool")
    x = qdq(b, b.input("x", (2, 3, 4, 4)), 0.03, 1)
    return out(b, b.GlobalAveragePool(x), 0.007, 0)


def max_pool_same_params() -> Graph:
    b = GraphBuilder("max_pool")
    x = qdq(b, b.input("x", (1, 2, 4, 4)), 0.03, 1)
    return out(b, b.MaxPool(x, kernel_shape=(2, 2), strides=(2, 2)), 0.03, 1)


def transpose_new_params() -> Graph:
    b = GraphBuilder("transpose")
    x = qdq(b, b.input("x", (2, 3, 4)), 0.03, 1)
    return out(b, b.Transpose(x, perm=(2, 0, 1)), 0.021, -4)


def relu() -> Graph:
    b = GraphBuilder("relu")
    x = qdq(b, b.input("x", (3, 7)), 0.03, 9)
    return out(b, b.Relu(x), 0.013, -128)


def concat() -> Graph:
    b = GraphBuilder("concat")
    x1 = qdq(b, b.input("x1", (1, 2, 3)), 0.03, 1)
    x2 = qdq(b, b.input("x2", (1, 4, 3)), 0.05, -6)
    return out(b, b.Concat(x1, x2, axis=1), 0.03, 1)


UNITS: list[tuple[Callable[[], Graph], dict[str, int]]] = [
    (conv_relu, {"QConv": 1}),
    (depthwise_clip, {"QConv": 1}),
    (gemm_trans_b, {"QMatMul": 1}),
    (matmul, {"QMatMul": 1}),
    (add_relu, {"QAdd": 1}),
    (mul, {"QMul": 1}),
    (average_pool, {"QAveragePool": 1}),
    (global_average_pool, {"QAveragePool": 1}),
    (max_pool_same_params, {"MaxPool": 1}),
    (transpose_new_params, {"Transpose": 1, "Requantize": 1}),
    (relu, {"Requantize": 1}),
    (concat, {"Concat": 1, "Requantize": 1}),
]


def assert_within_one_step(before: Graph, after: Graph, step: float, seeds: int = 3) -> None:
    """Outputs differ by at most one output step, and agree on at least 90 % of elements.

    The float QDQ path rounds half to even after float32 arithmetic; the integer ops
    round once, half up, so a value near a tie may land one step away.
    """
    exact = total = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        feeds = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in before.inputs}
        ours, ref = run_reference(after, feeds), run_reference(before, feeds)
        for name, expected in ref.items():
            steps = np.abs(ours[name].astype(np.float64) - expected) / step
            assert steps.max() <= 1 + 1e-4, name
            exact += int((steps < 1e-4).sum())
            total += steps.size
    assert exact / total >= 0.9


def output_step(graph: Graph) -> float:
    return float(graph.outputs[0].producer.inputs[1].data)


@pytest.mark.parametrize("build, expected", UNITS, ids=[f.__name__ for f, _ in UNITS])
def test_a_qdq_unit_becomes_integer_ops(
        build: Callable[[], Graph], expected: dict[str, int]) -> None:
    before = build()
    text = str(before)
    after = lower_qdq(before)
    assert str(before) == text  # the input graph is untouched
    hist = after.op_histogram()
    for op, count in expected.items():
        assert hist.get(op) == count, hist
    # Only the boundaries stay: a Q per float input and the DQ of the float output.
    assert set(hist) - QDQ_OPS == set(expected)
    assert hist["QuantizeLinear"] == len(before.inputs) and hist["DequantizeLinear"] == 1
    assert_within_one_step(before, after, output_step(before))


def test_units_whose_integer_nodes_no_backend_accepts_stay_float() -> None:
    b = GraphBuilder("two_units")
    x = qdq(b, b.input("x", (1, 3, 6, 6)), 0.03, 2)
    w, _ = weight(b, (4, 3, 3, 3))
    y = qdq(b, b.Conv(x, w, pads=(1, 1, 1, 1), name="conv"), 0.05, -3)
    before = out(b, b.Concat(y, y, axis=1, name="cat"), 0.05, -3)
    # Accept everything but Concat's int8 form: the concat unit stays float, conv lowers.
    after = lower_qdq_where(before, lambda n: n.op != "Concat")
    hist = after.op_histogram()
    assert hist.get("QConv") == 1 and "Concat" in hist
    cat = next(n for n in after.nodes if n.op == "Concat")
    assert cat.output.dtype == np.float32
    assert lower_qdq_where(before, lambda n: True).op_histogram() == lower_qdq(before).op_histogram()
    assert all(n.op not in ("QConv", "Requantize") for n in lower_qdq_where(before, lambda n: False).nodes)
    assert {unit_of(n) for n in lower_qdq(before).nodes if n.name.startswith(("conv", "cat"))} >= {"conv"}


def test_a_clip_folds_into_the_clamp() -> None:
    node = next(n for n in lower_qdq(depthwise_clip()).nodes if n.op == "QConv")
    # Clip(0, 0.5) at scale 0.003, zero -128: [-128, -128 + round(0.5 / 0.003)].
    assert (node.attrs["y_min"], node.attrs["y_max"]) == (-128, -128 + 167)


def test_a_dequantize_read_by_a_float_op_stays() -> None:
    b = GraphBuilder("boundary")
    x = qdq(b, b.input("x", (1, 3, 4, 4)), 0.03, 0)
    w, _ = weight(b, (2, 3, 1, 1))
    y = qdq(b, b.Conv(x, w), 0.02, 0)
    b.output(y, b.Sigmoid(x))
    before = b.build()
    after = lower_qdq(before)
    assert after.op_histogram()["QConv"] == 1
    sigmoid = next(n for n in after.nodes if n.op == "Sigmoid")
    assert sigmoid.inputs[0].producer.op == "DequantizeLinear"
    assert_within_one_step(before, after, 0.02)


def uint8_conv() -> Graph:
    b = GraphBuilder("uint8")
    x = qdq(b, b.input("x", (1, 3, 4, 4)), 0.03, 128, "uint8")
    w, _ = weight(b, (2, 3, 1, 1))
    return out(b, b.Conv(x, w), 0.02, -3)


def asymmetric_weights() -> Graph:
    b = GraphBuilder("asymmetric")
    x = qdq(b, b.input("x", (1, 3, 4, 4)), 0.03, 0)
    w, _ = weight(b, (2, 3, 1, 1), zero=3)
    return out(b, b.Conv(x, w), 0.02, 0)


def gemm_alpha() -> Graph:
    b = GraphBuilder("gemm_alpha")
    x = qdq(b, b.input("x", (2, 16)), 0.05, 2)
    w, _ = weight(b, (16, 8), axis=1)
    return out(b, b.Gemm(x, w, alpha=2.0), 0.04, 3)


def per_axis_output() -> Graph:
    b = GraphBuilder("per_axis")
    x = qdq(b, b.input("x", (1, 3, 4, 4)), 0.03, 0)
    w, _ = weight(b, (2, 3, 1, 1))
    scales, zeros = np.array([0.02, 0.03], np.float32), np.zeros(2, np.int8)
    y = b.QuantizeLinear(b.Conv(x, w), scales, zeros, axis=1)
    b.output(b.DequantizeLinear(y, scales, zeros, axis=1))
    return b.build()


@pytest.mark.parametrize("build, reason", [
    (uint8_conv, "quantises to uint8; only int8 activations are lowered"),
    (asymmetric_weights, "has nonzero zero points: only symmetric weights are lowered"),
    (gemm_alpha, "only alpha = beta = 1 and transA = 0 are lowered"),
    (per_axis_output, "quantises per axis; only per-tensor activation scales are lowered"),
])
def test_a_unit_that_does_not_fit_stays_float_and_says_why(
        build: Callable[[], Graph], reason: str, caplog: pytest.LogCaptureFixture) -> None:
    before = build()
    with caplog.at_level(logging.DEBUG, logger="hetero.core.passes.lower_qdq"):
        after = lower_qdq(before)
    assert after.op_histogram() == before.op_histogram()
    assert reason in caplog.text


# -- a model written by onnxruntime's quantiser ------------------------------------------


def write_float_model(path: Path) -> None:
    """conv → relu → maxpool → conv → add (residual) → flatten → gemm; random weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
            for n, s in (("w1", (4, 3, 3, 3)), ("b1", (4,)), ("w2", (4, 4, 3, 3)), ("b2", (4,)),
                         ("w3", (10, 64)), ("b3", (10,)))]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "p1"], ["a"]),
        helper.make_node("Flatten", ["a"], ["f"]),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_model_quantised_by_onnxruntime_runs_on_int8_ops(tmp_path: Path) -> None:
    import onnxruntime as ort
    float_path, qdq_path = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    write_float_model(float_path)
    rng = np.random.default_rng(1)
    quantize_with_onnxruntime(float_path, qdq_path,
                              [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(8)])
    lowered = lower_qdq(hetero.load_onnx(str(qdq_path)))
    hist = lowered.op_histogram()
    assert (hist["QConv"], hist["QAdd"], hist["QMatMul"], hist["MaxPool"]) == (2, 1, 1, 1)
    assert not {"Conv", "Gemm", "Add"} & set(hist)
    step = output_step(lowered)
    session = ort.InferenceSession(str(qdq_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(2)
    for _ in range(4):
        x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
        ours = run_reference(lowered, {"x": x})["y"]
        theirs = session.run(None, {"x": x})[0]
        # One step of rounding difference per integer op can compound: allow two.
        assert np.abs(ours - theirs).max() <= 2 * step * (1 + 1e-4)
