"""npu_sim Concat elimination: producers store into the Concat's output, and the Concat copies
only what could not be placed (region inputs, values with other readers, constants)."""

from __future__ import annotations

import math

import numpy as np

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.ops.fixed_point import quantize_multiplier
from hetero.plugins.npu_sim.backend import NpuPart, NpuSimBackend
from hetero.plugins.npu_sim.compiler import concat_views, lower_graph
from hetero.plugins.npu_sim.config import NpuConfig
from hetero.plugins.npu_sim.estimate import node_cycles, region_cycles, value_locs
from hetero.plugins.npu_sim.isa import Store
from hetero.core.plugin.target import bind
from tests.plugins.npu_sim.test_compiler_conv import assert_exact


def _conv(b: GraphBuilder, x: Value, cin: int, cout: int, kernel: int, seed: int, name: str) -> Value:
    """A random QConv, ``kernel`` × ``kernel`` with same padding, outputs spread over int8."""
    rng = np.random.default_rng(seed)
    m, s = quantize_multiplier(1 / (150 * math.sqrt(cin * kernel * kernel)))
    return b.QConv(x, rng.integers(-127, 128, (cout, cin, kernel, kernel)).astype(np.int8),
                   rng.integers(-999, 999, cout).astype(np.int32), pads=(kernel // 2,) * 4, x_zero=-3,
                   multiplier=(m,), shift=(s,), y_zero=2, name=name)


def _fire(b: GraphBuilder, x: Value, cin: int, squeeze: int, expand: int, prefix: str) -> Value:
    """SqueezeNet's fire module: a 1×1 squeeze, then 1×1 and 3×3 expands joined on channels."""
    s = _conv(b, x, cin, squeeze, 1, 1, f"{prefix}_squeeze")
    e1 = _conv(b, s, squeeze, expand, 1, 2, f"{prefix}_e1")
    e3 = _conv(b, s, squeeze, expand, 3, 3, f"{prefix}_e3")
    return b.Concat(e1, e3, axis=1, name=f"{prefix}_concat")


def _fire_net() -> Graph:
    """MaxPool → fire → fire → 1×1 conv: both Concats read only their expands' outputs."""
    b = GraphBuilder("fire")
    x = b.input("x", (1, 24, 16, 16), "int8")
    h = b.MaxPool(x, kernel_shape=(3, 3), strides=(2, 2), pads=(0, 0, 1, 1), name="pool")
    h = _fire(b, h, 24, 8, 16, "fire2")
    h = _fire(b, h, 32, 8, 16, "fire3")
    b.output(_conv(b, h, 32, 10, 1, 4, "classifier"))
    return b.build()


def _mixed_net() -> Graph:
    """A Concat of the region input, a value another node also reads, a constant and a conv
    output that only the Concat reads: only the last lies in place."""
    b = GraphBuilder("mixed")
    x = b.input("x", (1, 8, 6, 6), "int8")
    shared = _conv(b, x, 8, 8, 3, 5, "shared")
    own = _conv(b, shared, 8, 16, 1, 6, "own")
    constant = np.random.default_rng(9).integers(-128, 128, (1, 4, 6, 6)).astype(np.int8)
    joined = b.Concat(x, shared, own, b.constant(constant, name="bias_map"), axis=1, name="join")
    y = _conv(b, joined, 36, 12, 1, 7, "head")
    b.output(y, _conv(b, shared, 8, 4, 1, 8, "side"))
    return b.build()


def _nested_net() -> Graph:
    """Concat(Concat(a, b), c) with every input placed: both Concats vanish."""
    b = GraphBuilder("nested")
    x = b.input("x", (1, 8, 5, 5), "int8")
    inner = b.Concat(_conv(b, x, 8, 8, 1, 1, "a"), _conv(b, x, 8, 12, 3, 2, "b"), axis=1, name="inner")
    outer = b.Concat(inner, _conv(b, x, 8, 4, 1, 3, "c"), axis=1, name="outer")
    b.output(b.MaxPool(outer, kernel_shape=(2, 2), strides=(2, 2), name="pool"))
    return b.build()


def _stored_bytes(graph: Graph, tag: str) -> int:
    program = lower_graph(graph, NpuConfig()).program
    return sum(math.prod(i.dims) for i in program.instrs if isinstance(i, Store) and i.tag == tag)


def _tags(graph: Graph) -> set[str]:
    return {i.tag for i in lower_graph(graph, NpuConfig()).program.instrs}


def _inputs(graph: Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {v.name: rng.integers(-128, 128, v.shape).astype(np.int8) for v in graph.inputs}


def test_fire_module_concats_emit_nothing_and_are_exact() -> None:
    graph = _fire_net()
    assert set(concat_views(graph)) == {"fire2_e1", "fire2_e3", "fire3_e1", "fire3_e3"}
    tags = _tags(graph)
    assert "fire2_concat" not in tags and "fire3_concat" not in tags
    assert {"fire2_e1", "fire2_e3", "classifier"} <= tags
    assert_exact(graph)


def test_nested_concats_all_in_place_are_exact() -> None:
    graph = _nested_net()
    assert set(concat_views(graph)) == {"a", "b", "c", "inner"}
    assert not {"inner", "outer"} & _tags(graph)
    assert_exact(graph)


def test_unplaceable_inputs_are_still_copied() -> None:
    graph = _mixed_net()
    assert set(concat_views(graph)) == {"own"}
    # The region input x (8 channels), the twice-read `shared` (8) and the constant (4); not `own`.
    assert _stored_bytes(graph, "join") == (8 + 8 + 4) * 6 * 6
    assert_exact(graph)


def test_concat_of_a_graph_output_layout_keeps_its_copies() -> None:
    """A Concat that is a graph output is row-major; its NHWC conv inputs are copied, not placed."""
    b = GraphBuilder("out")
    x = b.input("x", (1, 8, 5, 5), "int8")
    b.output(b.Concat(_conv(b, x, 8, 8, 1, 1, "a"), _conv(b, x, 8, 8, 3, 2, "b"), axis=1, name="cat"))
    graph = b.build()
    assert concat_views(graph) == {}
    assert _stored_bytes(graph, "cat") == 16 * 5 * 5
    assert_exact(graph)


def test_views_read_back_and_survive_the_artifact() -> None:
    graph = _mixed_net()
    part = bind(NpuSimBackend()).compile(graph)
    loaded = NpuPart.from_artifact(part.artifact)
    assert loaded.locs == part.locs and loaded.locs["own"].frame == (1, 36, 6, 6)
    inputs = _inputs(graph)
    want = hetero.run_reference(graph, inputs, keep=True)
    for source in (part, loaded):
        got = source.run_intermediates(inputs)
        for node in graph.nodes:
            assert np.array_equal(got[node.output.name], want[node.output.name]), node.name


def test_estimate_counts_an_eliminated_concat_as_free() -> None:
    graph, config = _fire_net(), NpuConfig()
    locs = value_locs(graph)
    concat = next(n for n in graph.nodes if n.name == "fire2_concat")
    assert node_cycles(concat, config, locs) == 0
    mixed = _mixed_net()
    join = next(n for n in mixed.nodes if n.name == "join")
    assert node_cycles(join, config, value_locs(mixed)) > 0
    assert region_cycles(graph, config) == sum(node_cycles(n, config, locs) for n in graph.nodes
                                               if n.op != "Concat")
