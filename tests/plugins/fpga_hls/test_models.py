"""Whole networks on the FPGA: SqueezeNet (as onnx ships it, with seeded random weights) and
a MobileNetV2-style network compile with ``targets=["fpga_hls", "llvm_cpu"]`` with no
fallback, every kernel's C simulation runs, and the whole matches the reference.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import onnx
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.frontend.onnx import randomize_weights
from hetero.plugins.fpga_hls.csim import find_gxx
from hetero.testing.networks import mobilenet_v2_style

pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_gxx() is None, reason="C simulation needs g++")]

SQUEEZENET = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")


def _squeezenet() -> hetero.core.ir.Graph:
    return hetero.load_onnx(randomize_weights(onnx.load(SQUEEZENET), 0))


@pytest.mark.parametrize("name, model", [("squeezenet", _squeezenet), ("mobilenet_v2_style", mobilenet_v2_style)])
def test_the_network_runs_by_c_simulation_and_matches_the_reference(name: str, model) -> None:  # noqa: ANN001
    graph = model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", hetero.core.compiler.CompileFallbackWarning)
        exe = hetero.compile(graph, targets=["fpga_hls", "llvm_cpu"])
    assert not exe.fallbacks and {p.backend for p in exe.placements} == {"fpga_hls"}
    rng = np.random.default_rng(0)
    inputs = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs}
    got, want = exe.run(inputs), run_reference(graph, inputs)
    for key, expected in want.items():
        # float32 through up to 26 layers, each summing in the lowering's order where the
        # reference uses numpy's: relative differences of a few 1e-6 grow to about 1e-5.
        scale = float(np.abs(expected).max())
        np.testing.assert_allclose(got[key], expected, rtol=1e-4, atol=1e-5 * scale)
    part = exe.placements[0].part
    assert part.cycles > 0 and "HLS kernels for u50" in part.report()
