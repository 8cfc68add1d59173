"""The nine light models import, verify, and compute what onnxruntime computes.

With seeded random weights (:func:`randomize_weights`) each model runs through the
reference executor and through onnxruntime on one seeded input. Where the model ends
in a Softmax, its logits (the Softmax input) are compared as well, since they carry
the errors of every layer before the Softmax flattens them.

Tolerance: the outputs of ~20 to ~120 float32 layers, accumulated by numpy/BLAS on
one side and MLAS on the other in different orders. Measured, the largest difference
is about 6e-7 of the tensor's largest magnitude (logits up to ~70 differ by up to
3e-5); the bound is 1e-5 of that magnitude, 15-20x headroom, while a wrong pad, axis
or epsilon moves results by 1e-3 of it or far more. A probability moves by at most
twice the largest logit error, so probabilities get twice the logits' bound.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
import pytest

import hetero
from hetero.core.frontend.onnx import randomize_weights
from models import LIGHT_MODELS, light_model_path
from oracle import run_model

#: The models whose randomised run takes over five seconds on two cores (VGG-19 ~11 s:
#: 144M weights to draw, serialise for onnxruntime and run twice; AlexNet and ZFNet ~6 s).
_SLOW = {"vgg19", "bvlc_alexnet", "zfnet512"}
_RELATIVE = 1e-5


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n for n in LIGHT_MODELS])
def test_light_model_matches_onnxruntime(name: str) -> None:
    bare = hetero.load_onnx(light_model_path(name))
    assert hetero.verify(bare) is bare
    assert bare.op_histogram().get("Conv", 0) > 0

    model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
    graph = hetero.load_onnx(model)
    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    feeds = {graph.inputs[0].name: x}
    softmax = [n for n in model.graph.node if n.op_type == "Softmax"]
    logits = softmax[0].input[0] if softmax else None
    ours = hetero.run_reference(graph, feeds, keep=logits is not None)
    if logits is not None:
        model.graph.output.append(
            helper.make_tensor_value_info(logits, onnx.TensorProto.FLOAT, None))
    theirs = run_model(model, feeds)

    output = graph.outputs[0].name
    scale = float(np.abs(theirs[-1]).max())  # the logits, or the only output
    if logits is not None:
        np.testing.assert_allclose(ours[logits], theirs[1], rtol=0, atol=_RELATIVE * scale)
        np.testing.assert_allclose(ours[output], theirs[0], rtol=0, atol=2 * _RELATIVE * scale)
        assert theirs[0].max() < 0.99  # the weights keep the softmax informative
    else:
        np.testing.assert_allclose(ours[output], theirs[0], rtol=0, atol=_RELATIVE * scale)
    assert np.isfinite(ours[output]).all() and 1e-2 < scale < 1e3

    # The default passes shrink the model (the shipped one folds its ConstantOfShape
    # weights; the randomised one folds batch norms and drops dropouts) and leave its
    # numbers where they were: folding re-rounds weights once, well inside the bound.
    assert len(hetero.optimize(bare).nodes) < len(bare.nodes)
    optimized = hetero.optimize(graph)
    assert len(optimized.nodes) <= len(graph.nodes)
    assert not {"Dropout", "Identity", "Unsqueeze"} & set(optimized.op_histogram())
    for node in optimized.nodes:
        if node.op == "BatchNormalization":
            assert node.inputs[0].producer is None or node.inputs[0].producer.op != "Conv"
    np.testing.assert_allclose(
        hetero.run_reference(optimized, feeds)[output], theirs[0], rtol=0,
        atol=(2 if logits is not None else 1) * _RELATIVE * scale)
