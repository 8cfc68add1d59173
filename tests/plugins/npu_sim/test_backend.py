"""The npu_sim backend: declarations, refusals with reasons, compile/run, artifacts, discovery."""

from __future__ import annotations

import numpy as np
import pytest
from plugins.npu_sim.npu_programs import int8_inputs, int8_net

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.plugin.backend import validate_backend
from hetero.core.plugin.manager import get_backend
from hetero.errors import PluginError
from hetero.plugins.npu_sim.backend import NpuPart, NpuSimBackend
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.core.plugin.target import bind
from tests.plugins.npu_sim.test_compiler_conv import qconv_graph


def test_found_through_its_entry_point_with_sound_declarations() -> None:
    backend = get_backend("npu_sim")
    assert isinstance(backend, NpuSimBackend)
    assert validate_backend(backend) == []
    config = NpuConfig()
    assert backend.device_kind == "npu"
    assert backend.peak_gflops == 2 * config.array_rows * config.array_cols * config.clock_ghz
    assert backend.memory == config.memory_hierarchy()


def test_float_node_is_declined_with_the_quantise_reason() -> None:
    b = GraphBuilder("f")
    y = b.MaxPool(b.input("x", (1, 2, 4, 4)), kernel_shape=(2, 2))
    b.output(y)
    support = bind(NpuSimBackend()).supports(b.build().nodes[0])
    assert not support and "int8 only" in support.reason and "quantize=" in support.reason


def test_unsupported_op_and_overflowing_qadd_are_declined_with_reasons() -> None:
    b = GraphBuilder("q")
    x = b.input("x", (1, 4), "int8")
    y = b.QAdd(x, x, a_zero=0, b_zero=0, a_multiplier=2**30, b_multiplier=2**30, shift=31, y_zero=0)
    z = b.Softmax(b.input("f", (2,)), axis=0)
    b.output(y, z)
    graph = b.build()
    backend = NpuSimBackend()
    qadd, relu = graph.nodes
    assert "15-bit" in bind(backend).supports(qadd).reason
    assert "does not implement Softmax" in bind(backend).supports(relu).reason
    assert bind(backend).supports(qconv_graph(1, 2, (4, 4), 2, 3).nodes[0])


def test_compile_run_is_exact_and_keeps_stats() -> None:
    graph = int8_net(3, 8, 11, seed=7)
    part = bind(NpuSimBackend(), {"npu_preset": "tiny-64k"}).compile(graph)
    inputs = int8_inputs(graph)
    got = part.run(inputs)
    want = hetero.run_reference(graph, inputs)
    assert np.array_equal(got["fc"], want["fc"])
    assert part.last_stats.cycles > 0 and part.last_stats.macs > 0


def test_run_intermediates_gives_every_node_output_in_graph_layout() -> None:
    graph = int8_net(3, 8, 11, seed=7)
    part = bind(NpuSimBackend()).compile(graph)
    inputs = int8_inputs(graph)
    got = part.run_intermediates(inputs)
    want = hetero.run_reference(graph, inputs, keep=True)
    for node in graph.nodes:
        assert np.array_equal(got[node.output.name], want[node.output.name]), node.name


def test_artifact_round_trips_and_is_deterministic() -> None:
    graph = int8_net(3, 8, 11, seed=7)
    backend = NpuSimBackend()
    first = bind(backend, {"npu_preset": "tiny-64k"}).compile(graph)
    assert first.artifact == bind(backend, {"npu_preset": "tiny-64k"}).compile(graph).artifact
    loaded = backend.load_artifact(first.artifact)
    assert isinstance(loaded, NpuPart) and loaded.config == first.config
    inputs = int8_inputs(graph)
    assert np.array_equal(loaded.run(inputs)["fc"], first.run(inputs)["fc"])
    assert loaded.artifact == first.artifact


def test_layer_too_large_for_the_weight_buffer_raises_plugin_error_naming_node_and_buffer() -> None:
    # A 7x7 tap block of 64 input channels is 3 KiB; the 4 KiB preset's weight slot is 1 KiB.
    graph = qconv_graph(1, 64, (9, 9), 4, 7)
    with pytest.raises(PluginError, match=rf"{graph.nodes[0].name}.*wgt buffer"):
        bind(NpuSimBackend(), {"npu_sram_kib": 4, "npu_array": 64}).compile(graph)


def test_hetero_compile_with_npu_sim_target_is_exact() -> None:
    graph = int8_net(3, 8, 11, seed=7)
    exe = hetero.compile(graph, targets=["npu_sim", "llvm_cpu"], passes=[])
    inputs = int8_inputs(graph)
    got = exe.run(inputs)
    want = hetero.run_reference(graph, inputs)
    assert np.array_equal(got["fc"] if isinstance(got, dict) else got[0], want["fc"])


def test_quantised_float_model_runs_exactly_on_npu_sim() -> None:
    """Float model → calibrate → QDQ → lower_qdq → hetero.compile: every int8 node on the NPU."""
    from hetero.core.passes.lower_qdq import lower_qdq
    from hetero.core.passes.quantize import quantize
    from hetero.core.quant import calibrate

    rng = np.random.default_rng(0)
    b = GraphBuilder("float_net")
    x = b.input("x", (1, 3, 12, 12))
    h = b.Relu(b.Conv(x, rng.normal(0, .3, (16, 3, 3, 3)).astype(np.float32),
                      rng.normal(0, .1, 16).astype(np.float32), pads=(1,) * 4))
    h = b.Relu(b.Conv(h, rng.normal(0, .1, (24, 16, 3, 3)).astype(np.float32), None, pads=(1,) * 4, strides=(2, 2)))
    h = b.Flatten(b.GlobalAveragePool(b.MaxPool(h, kernel_shape=(2, 2), strides=(2, 2))), axis=1)
    b.output(b.MatMul(h, rng.normal(0, .3, (24, 10)).astype(np.float32)))
    graph = b.build()
    samples = [{"x": rng.normal(0, 1, (1, 3, 12, 12)).astype(np.float32)} for _ in range(4)]
    quantised = lower_qdq(quantize(graph, calibrate(graph, samples)))
    exe = hetero.compile(quantised, targets=["npu_sim", "llvm_cpu"], passes=[])
    npu = NpuSimBackend()
    assert all(bind(npu).supports(n) for n in quantised.nodes if n.op in npu.supported_ops)
    got = exe.run(samples[0])
    want = hetero.run_reference(quantised, samples[0])
    name = quantised.outputs[0].name
    assert np.array_equal(got[name] if isinstance(got, dict) else got[0], want[name])
