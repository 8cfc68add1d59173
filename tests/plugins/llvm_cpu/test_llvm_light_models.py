"""The nine light models, compiled by llvm_cpu alone, compute what onnxruntime computes.

Every node of each optimised graph runs as generated machine code (the kernels cover
all of them). Tolerance: ~20 to ~120 float32 layers whose sums hetero's tiled loops
and onnxruntime's MLAS accumulate in different orders; measured differences stay
near 1e-5 of the output's largest magnitude, so the bound is 1e-4 of it, while a
wrong pad, stride or axis moves results by 1e-2 of it or more.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import hetero
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.plugin import get_backend
from hetero.core.plugin.target import bind
from hetero.plugins.llvm_cpu.backend import kernel_graph
from models import LIGHT_MODELS, light_model_path
from oracle import run_model


#: The one light model quick enough (~3 s) for the fast inner loop; the others take 6-23 s.
_QUICK = {"squeezenet"}


@pytest.mark.parametrize("name", [
    n if n in _QUICK else pytest.param(n, marks=pytest.mark.slow) for n in LIGHT_MODELS])
def test_light_model_on_llvm_cpu_matches_onnxruntime(name: str) -> None:
    model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
    graph = hetero.optimize(hetero.load_onnx(model))
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[])
    (placement,) = exe.placements
    assert placement.backend == "llvm_cpu"
    covered = sorted(n for step in placement.part.steps for n in step.nodes)
    # The backend first splits wide grouped convolutions into ordinary ones (but those
    # the blocked layout takes whole), fuses epilogues and puts convolution chains in the
    # host's blocked layout: each node of the graph that makes, and no other, is computed
    # by exactly one step.
    compiled = kernel_graph(graph, bind(get_backend("llvm_cpu")))
    assert covered == sorted(n.name for n in compiled.nodes)

    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    feeds = {graph.inputs[0].name: x}
    ours = exe.run(feeds)[graph.outputs[0].name]
    theirs = run_model(model, feeds)[0]
    scale = float(np.abs(theirs).max())
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * scale)
