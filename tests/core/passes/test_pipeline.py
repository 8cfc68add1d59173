"""The default pipeline, the pass registry, and what the passes do to real models."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import hetero
from hetero.core.frontend import load_onnx, randomize_weights
from hetero.core.frontend.light import light_model_path
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.passes.pipeline import DEFAULT_PASSES, get_pass, pass_names, run_passes
from hetero.errors import UnknownPassError

# Folded weights round once in float32 (see test_fold_batchnorm); through a hundred
# layers those differences add up to ~1e-6 of the output's magnitude.
TOL = {"rtol": 1e-4, "atol": 1e-4}


def conv_bn_relu_chain() -> Graph:
    rng = np.random.default_rng(3)
    b = GraphBuilder("chain")
    h = b.input("x", (1, 3, 8, 8))
    for i in range(3):
        c_in = h.shape[1]
        w = (rng.standard_normal((4, c_in, 3, 3)) * 0.3).astype(np.float32)
        h = b.Conv(h, w, pads=(1, 1, 1, 1))
        params = [rng.uniform(0.5, 1.5, 4).astype(np.float32) for _ in range(4)]
        h = b.Dropout(b.BatchNormalization(h, *params))
        scale = b.Unsqueeze(b.constant(rng.uniform(0.5, 1.5, 4).astype(np.float32)), axes=(1, 2))
        h = b.Relu(b.Mul(h, scale))
    b.output(b.Reshape(b.Reshape(h, shape=(1, 256)), shape=(4, 64), name="y"))
    return b.build()


def test_optimize_runs_the_default_passes_to_a_fixed_point(same_numbers):
    g = conv_bn_relu_chain()
    text = str(g)
    out = hetero.optimize(g)
    assert str(g) == text
    assert out.op_histogram() == {"Conv": 3, "Relu": 3, "Reshape": 1}
    same_numbers(g, out, rtol=1e-5, atol=1e-5)


def test_a_later_pass_opens_work_for_an_earlier_one_in_the_next_round(same_numbers):
    b = GraphBuilder()
    conv = b.Conv(b.input("x", (1, 2, 4, 4)), np.ones((2, 2, 1, 1), np.float32))
    same = b.Reshape(conv, shape=(1, 2, 4, 4))
    ones = np.ones(2, np.float32)
    b.output(b.BatchNormalization(same, ones * 2, ones, ones / 2, ones, name="y"))
    g = b.build()
    result = run_passes(g)
    assert result.graph.op_histogram() == {"Conv": 1}
    assert result.iterations == 3  # fold in round 2, confirm in round 3
    same_numbers(g, result.graph, rtol=1e-6, atol=1e-6)


def test_run_passes_logs_what_fired():
    result = run_passes(conv_bn_relu_chain())
    fired = {a.rule for a in result.applied}
    assert {"remove_identity", "fold_constants", "batchnorm_into_conv", "mul_into_conv",
            "merge_reshapes"} <= fired
    assert result.converged and result.rejected == []


def test_chosen_passes_run_in_the_given_order():
    g = conv_bn_relu_chain()
    out = hetero.optimize(g, ["remove_identity", "dead_code"])
    assert "Dropout" not in out.op_histogram()
    assert out.op_histogram()["BatchNormalization"] == 3
    assert str(hetero.optimize(g, [])) == str(g)


def test_the_registry_names_every_default_pass_and_rejects_typos():
    assert set(DEFAULT_PASSES) <= set(pass_names())
    with pytest.raises(UnknownPassError, match="no graph pass 'constant_foldin'.*did you mean "
                                               "'constant_folding'"):
        get_pass("constant_foldin")


def light(name: str) -> Graph:
    return load_onnx(randomize_weights(onnx.load(light_model_path(name))))


@pytest.mark.parametrize("name", ["densenet121", "inception_v2"])
def test_the_passes_shrink_light_models(name):
    g = light(name)
    before = g.op_histogram()
    out = hetero.optimize(g)
    after = out.op_histogram()
    assert len(out.nodes) < len(g.nodes) / 2
    for gone in ("Unsqueeze", "Mul", "Add"):  # BN's imported scale and shift, folded away
        assert gone in before and gone not in after
    assert after["Conv"] == before["Conv"]
    assert not any(n.op == "BatchNormalization" and n.inputs[0].producer is not None
                   and n.inputs[0].producer.op == "Conv" for n in out.nodes)


@pytest.mark.slow
def test_an_optimized_light_model_computes_the_same(same_numbers):
    g = light("densenet121")
    same_numbers(g, hetero.optimize(g), **TOL)
