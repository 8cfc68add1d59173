"""Seeded random weights: deterministic, role-aware, scaled for deep nets."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from hetero.core.frontend.onnx import randomize_weights
from models import light_model_path, tiny_model


def _weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def _fill(name: str, shape: list[int]) -> list[onnx.NodeProto]:
    """A ConstantOfShape weight, the way the light models store theirs."""
    return [helper.make_node("ConstantOfShape", [f"{name}_shape"], [name],
                             value=numpy_helper.from_array(np.array([0.02], np.float32)))]


def _residual_block() -> onnx.ModelProto:
    """conv -> bn -> relu -> conv -> bn -> (+ input) -> relu -> gemm, weights as fills."""
    c = 64
    shapes = {"w1": [c, c, 3, 3], "w2": [c, c, 3, 3], "fc": [10, c], "fc_b": [10]}
    for bn in ("bn1", "bn2"):
        shapes.update({f"{bn}_{p}": [c] for p in ("s", "b", "m", "v")})
    nodes = [n for name, shape in shapes.items() for n in _fill(name, shape)]
    nodes += [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c2", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["n2"]),
        helper.make_node("Add", ["n2", "x"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["y"], transB=1),
    ]
    inits = [numpy_helper.from_array(np.array(s, np.int64), f"{n}_shape")
             for n, s in shapes.items()]
    inits.append(numpy_helper.from_array(np.array([3, 1], np.int32), "unrelated_ints"))
    return tiny_model(nodes, {"x": (TensorProto.FLOAT, [1, c, 8, 8])}, ["y"], inits)


def test_same_seed_same_weights_and_other_seed_other_weights() -> None:
    model = _residual_block()
    first, again, other = (randomize_weights(model, s) for s in (7, 7, 8))
    assert first.SerializeToString() == again.SerializeToString()
    assert not np.array_equal(_weights(first)["w1"], _weights(other)["w1"])


def test_fills_become_initializers_and_integers_are_kept() -> None:
    model = _residual_block()
    before = model.SerializeToString()
    randomized = randomize_weights(model)
    assert model.SerializeToString() == before  # the input is not modified
    assert not [n for n in randomized.graph.node if n.op_type == "ConstantOfShape"]
    weights = _weights(randomized)
    assert not [n for n in weights if n.endswith("_shape")]  # shapes nothing reads any more
    np.testing.assert_array_equal(weights["unrelated_ints"], [3, 1])
    assert weights["w1"].shape == (64, 64, 3, 3) and weights["w1"].dtype == np.float32
    onnx.checker.check_model(randomized)


def test_each_role_gets_its_distribution() -> None:
    w = _weights(randomize_weights(_residual_block(), seed=3))
    fan_in = 64 * 9
    # Both convs feed a ReLU (through BN, and the second through the residual Add): He.
    for conv in ("w1", "w2"):
        assert abs(w[conv].std() - math.sqrt(2 / fan_in)) < 0.05 * math.sqrt(2 / fan_in)
    # The classifier has no ReLU after it: gain 1.
    assert abs(w["fc"].std() - math.sqrt(1 / 64)) < 0.15 * math.sqrt(1 / 64)
    assert np.all((w["bn1_s"] >= 0.5) & (w["bn1_s"] <= 1.5))
    assert np.all((w["bn1_v"] >= 0.5) & (w["bn1_v"] <= 1.5))
    assert np.all((w["bn2_v"] >= 0.5) & (w["bn2_v"] <= 1.5))
    # The BN that ends the residual branch starts small, so the block stays near identity.
    assert np.all((w["bn2_s"] >= 0.05) & (w["bn2_s"] <= 0.15))
    for shift in ("bn1_b", "bn1_m", "bn2_b", "bn2_m"):
        assert 0.05 < w[shift].std() < 0.15 and abs(w[shift].mean()) < 0.05
    assert w["fc_b"].std() < 0.03


def test_light_model_keeps_its_integer_tensors() -> None:
    model = onnx.load(light_model_path("squeezenet"))
    randomized = randomize_weights(model)
    def floats(m: onnx.ModelProto) -> list[str]:
        return [t.name for t in m.graph.initializer if t.data_type == TensorProto.FLOAT]

    fills = [n.output[0] for n in model.graph.node if n.op_type == "ConstantOfShape"]
    assert sorted(floats(randomized)) == sorted(floats(model) + fills)
    ints = {t.name: t for t in model.graph.initializer if t.data_type == TensorProto.INT64}
    for t in randomized.graph.initializer:
        if t.data_type == TensorProto.INT64:
            assert t == ints[t.name]
    onnx.checker.check_model(randomized)
