"""npu_sim's estimate against its own simulator: single layers, a quantised model's region, cost.

The estimate is analytic (no instruction emitted, nothing simulated), so the test is how
close it lands to the simulated cycles of the compiled program. Measured estimate /
simulated on the default preset (edge-512k):

=========================================  =====
conv 3×3, 64→64, 28×28, pad 1               1.00
conv 1×1, 256→64, 28×28                     0.97
conv 1×1 stride 2, 64→128, 28×28            0.95
conv 3×3 stride 2, 64→128, 28×28            1.08
conv 7×7 stride 2, 3→16, 56×56 (tap-packed) 1.05
depthwise 3×3, 32 channels, 28×28           1.01
matmul 8×512 @ 512×100                      1.03
QAdd 1×64×28×28                             1.10
MaxPool 3×3 stride 2, 64×28×28              1.00
global QAveragePool 7×7, 256 channels       1.00
two convs and their Concat, 14×14            1.17
two fire modules, Concats stored in place   1.19
SqueezeNet's quantised NPU region           1.00
=========================================  =====

The bound is ±30 %: the model mirrors each emitter's tiling, so what it leaves out is
second-order (edge tiles costed as whole ones, pipeline fill per input of a Concat,
stalls between engines that are not the slowest one).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import hetero
from hetero.core.frontend.light import resolve_model
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.plugins.npu_sim.backend import NpuPart, NpuSimBackend
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.estimate import region_cycles
from hetero.core.plugin.target import bind
from tests.plugins.npu_sim.test_compiler_conv import qconv_graph
from tests.plugins.npu_sim.test_compiler_vector import _add_multipliers
from tests.plugins.npu_sim.test_concat_in_place import _fire_net

TOLERANCE = 0.30


def simulated_cycles(graph: Graph, backend: NpuSimBackend) -> int:
    """Compile ``graph`` on ``backend`` and simulate one run on random int8 inputs; its cycles."""
    rng = np.random.default_rng(0)
    part = bind(backend).compile(graph)
    part.run({v.name: rng.integers(-128, 128, v.shape).astype(np.int8) for v in graph.inputs})
    return part.last_stats.cycles


def _build(name: str, build) -> Graph:
    b = GraphBuilder(name)
    b.output(build(b))
    return b.build()


def _matmul() -> Graph:
    rng = np.random.default_rng(2)
    m, s = quantize_multiplier(1 / 3000)
    return _build("matmul", lambda b: b.QMatMul(
        b.input("x", (8, 512), "int8"), rng.integers(-127, 128, (512, 100)).astype(np.int8),
        rng.integers(-999, 999, 100).astype(np.int32), a_zero=3, multiplier=(m,), shift=(s,), y_zero=0))


def _add() -> Graph:
    ma, mb, shift = _add_multipliers(0.8, 0.3)
    return _build("add", lambda b: b.QAdd(b.input("a", (1, 64, 28, 28), "int8"), b.input("b", (1, 64, 28, 28), "int8"),
                                          a_zero=5, b_zero=-9, a_multiplier=ma, b_multiplier=mb, shift=shift, y_zero=1))


def _maxpool() -> Graph:
    return _build("maxpool", lambda b: b.MaxPool(b.input("x", (1, 64, 28, 28), "int8"), kernel_shape=(3, 3),
                                                 strides=(2, 2), pads=(1, 1, 1, 1)))


def _global_pool() -> Graph:
    m, s = quantize_multiplier(1 / 49)
    return _build("gap", lambda b: b.QAveragePool(b.input("x", (1, 256, 7, 7), "int8"), kernel_shape=(7, 7),
                                                  x_zero=2, multiplier=m, shift=s, y_zero=0))


def _concat() -> Graph:
    """Two convolutions into a Concat, so the Concat reads NHWC intermediates as in a model."""
    left, right = qconv_graph(1, 16, (14, 14), 32, 1, seed=3).nodes[0], qconv_graph(1, 16, (14, 14), 32, 3, pad=1,
                                                                                   seed=4).nodes[0]
    b = GraphBuilder("concat")
    x = b.input("x", (1, 16, 14, 14), "int8")
    outs = [b.QConv(x, n.inputs[1].data, n.inputs[2].data, **n.attrs) for n in (left, right)]
    b.output(b.Concat(*outs, axis=1))
    return b.build()


LAYERS = {
    "conv3x3": lambda: qconv_graph(1, 64, (28, 28), 64, 3, pad=1),
    "conv1x1": lambda: qconv_graph(1, 256, (28, 28), 64, 1),
    "conv1x1_s2": lambda: qconv_graph(1, 64, (28, 28), 128, 1, stride=2),
    "conv3x3_s2": lambda: qconv_graph(1, 64, (28, 28), 128, 3, stride=2, pad=1),
    "conv7x7_s2_tap_packed": lambda: qconv_graph(1, 3, (56, 56), 16, 7, stride=2, pad=3),
    "depthwise3x3": lambda: qconv_graph(1, 32, (28, 28), 32, 3, pad=1, group=32),
    "matmul": _matmul,
    "qadd": _add,
    "maxpool": _maxpool,
    "global_average_pool": _global_pool,
    "concat": _concat,
    "fire_concat_in_place": _fire_net,
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_single_layer_estimate_is_within_30_percent_of_simulated(name: str) -> None:
    backend = NpuSimBackend()
    graph = LAYERS[name]()
    estimated = round(bind(backend).estimate(graph) * backend.config.clock_ghz * 1e9)
    simulated = simulated_cycles(graph, backend)
    assert abs(estimated / simulated - 1) <= TOLERANCE, f"{name}: estimate {estimated}, simulated {simulated}"


def test_estimate_is_seconds_at_the_declared_clock() -> None:
    graph = qconv_graph(1, 16, (14, 14), 16, 3, pad=1)
    slow = NpuSimBackend(NpuConfig(clock_ghz=0.5))
    assert bind(slow).estimate(graph) == pytest.approx(region_cycles(graph, slow.config) / 0.5e9)
    assert bind(slow).estimate(graph) == pytest.approx(2 * bind(NpuSimBackend()).estimate(graph))


def test_a_layer_that_fits_no_tiling_is_infinitely_slow_not_an_error() -> None:
    graph = qconv_graph(1, 64, (8, 8), 64, 3, pad=1)
    tiny = NpuSimBackend(NpuConfig(array_rows=8, array_cols=8, inp_bytes=64, wgt_bytes=64, out_bytes=64,
                                   acc_bytes=64))
    assert bind(tiny).estimate(graph) == float("inf")


def test_estimate_is_cheap_once_a_layer_has_been_seen() -> None:
    """The partitioner asks about the same nodes in many candidate regions: after the first
    ask (the tiling search, a few milliseconds for a large layer) a node costs well under 1 ms."""
    backend = NpuSimBackend()
    graph = qconv_graph(1, 64, (56, 56), 64, 3, pad=1, seed=7)
    bind(backend).estimate(graph)
    start = time.perf_counter()
    for _ in range(20):
        bind(backend).estimate(graph)
    assert (time.perf_counter() - start) / 20 < 1e-3


@pytest.mark.slow
def test_squeezenet_npu_region_estimate_is_within_30_percent_of_simulated() -> None:
    """The whole quantised SqueezeNet region: 26 QConvs, MaxPools, Concats, the average pool."""
    model = randomize_weights(read_model(resolve_model("light:squeezenet")).model, 0)
    graph = hetero.optimize(hetero.load_onnx(model))
    rng = np.random.default_rng(0)
    samples = [{graph.inputs[0].name: rng.standard_normal(graph.inputs[0].shape).astype(np.float32)}
               for _ in range(3)]
    exe = hetero.compile(graph, targets=["npu_sim", "llvm_cpu"], quantize=samples[:2])
    exe.run(samples[2])
    estimates = {r["name"]: r["est_seconds"] for r in exe.partition["regions"]}
    regions = [p for p in exe.placements if isinstance(p.part, NpuPart)]
    assert regions
    for placement in regions:
        estimated = estimates[placement.region] * placement.part.config.clock_ghz * 1e9
        simulated = placement.part.last_stats.cycles
        assert abs(estimated / simulated - 1) <= TOLERANCE, f"{placement.region}: {estimated} vs {simulated}"
