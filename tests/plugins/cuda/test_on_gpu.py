"""The cuda backend on a real GPU: the driver, device memory, launches, and whole graphs
against the reference. Skipped, with the probe's reason, on a machine without one (these
machines have none; a session lent a GPU runs this file there).
"""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.plugins.cuda.driver import CudaArray, probe
from hetero.plugins.cuda.part import GPU
from hetero.testing.models import MODELS, model_inputs

pytestmark = pytest.mark.skipif(not probe().ok, reason=f"needs a GPU: {probe().reason}")


def test_the_probe_names_a_gpu_of_a_known_architecture() -> None:
    found = probe()
    assert found.arch.startswith("sm_") and int(found.arch[3:]) >= 80 and found.memory_bytes > 2**30


def test_device_memory_round_trips_and_a_reshape_shares_it() -> None:
    host = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    on_gpu = GPU.copy_in(host)
    assert isinstance(on_gpu, CudaArray) and GPU.describe(on_gpu) == ((2, 3, 4), np.dtype(np.float32))
    view = on_gpu.reshape((6, 4))
    assert view.pointer == on_gpu.pointer
    np.testing.assert_array_equal(GPU.copy_out(view), host.reshape(6, 4))


def _net() -> hetero.core.ir.Graph:
    b = GraphBuilder("net")
    x = b.input("x", (2, 16, 20, 20))
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    y = b.Relu(b.Conv(x, w, name="conv", pads=[1, 1, 1, 1]), name="relu")
    y = b.GlobalAveragePool(y, name="gap")
    y = b.Reshape(y, name="flat", shape=[2, 32])
    wm = (rng.standard_normal((32, 10)) * 0.1).astype(np.float32)
    b.output(b.Softmax(b.MatMul(y, wm, name="fc"), name="sm", axis=1))
    return b.build()


def test_a_small_network_runs_on_the_gpu_and_matches_the_reference() -> None:
    graph = _net()
    exe = hetero.compile(graph, targets=["cuda", "llvm_cpu"])
    assert {p.backend for p in exe.placements} == {"cuda"}
    x = {"x": np.random.default_rng(1).standard_normal((2, 16, 20, 20)).astype(np.float32)}
    got, want = exe.run(x), run_reference(graph, x)
    # float32 sums of 144 products and a 400-element mean, reassociated on the GPU.
    np.testing.assert_allclose(got["sm"], want["sm"], rtol=1e-4, atol=1e-6)
    part = exe.placements[0].part
    assert part.last_profile and all(seconds > 0 for _, seconds in part.last_profile)


@pytest.mark.parametrize("name", list(MODELS))
def test_the_conformance_models_run_on_the_gpu(name: str) -> None:
    graph = MODELS[name]()
    exe = hetero.compile(graph, targets=["cuda", "llvm_cpu"], min_ratio=0.0)
    inputs = model_inputs(graph)
    want = run_reference(graph, inputs)
    for key, value in exe.run(inputs).items():
        np.testing.assert_allclose(value, want[key], rtol=1e-3, atol=1e-4)
