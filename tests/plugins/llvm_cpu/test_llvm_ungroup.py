"""Grouped-convolution splitting: structure of the rewritten graph and its numbers once compiled."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import hetero
from hetero.core.frontend.onnx import load_onnx, randomize_weights
from hetero.core.ir import Graph, GraphBuilder
from hetero.plugins.llvm_cpu.ungroup import MIN_CHANNELS_PER_GROUP, ungroup_convs
from models import light_model_path


def grouped_conv(c_in: int, c_out: int, group: int, *, bias: bool = True, size: int = 9,
                 kernel: int = 3, pads: tuple[int, ...] = (1, 1, 1, 1),
                 strides: tuple[int, int] = (1, 1)) -> Graph:
    rng = np.random.default_rng(0)
    b = GraphBuilder("grouped")
    x = b.input("x", (1, c_in, size, size))
    w = rng.standard_normal((c_out, c_in // group, kernel, kernel)).astype(np.float32)
    bias_value = rng.standard_normal(c_out).astype(np.float32) if bias else None
    conv = b.Conv(x, w, bias_value, group=group, pads=pads, strides=strides, name="conv")
    b.output(b.Relu(conv, name="relu"), conv)
    return b.build()


def test_a_wide_group_2_conv_becomes_split_convs_and_concat() -> None:
    g = grouped_conv(32, 32, 2)
    before = str(g)
    out = ungroup_convs(g)
    assert str(g) == before
    assert [n.op for n in g.nodes] == ["Conv", "Relu"]
    assert sorted(n.op for n in out.nodes) == ["Concat", "Conv", "Conv", "Relu", "Split"]
    convs = [n for n in out.nodes if n.op == "Conv"]
    assert all(n.attrs["group"] == 1 for n in convs)
    assert [n.inputs[1].shape for n in convs] == [(16, 16, 3, 3)] * 2
    concat = next(n for n in out.nodes if n.op == "Concat")
    # The grouped Conv's output name survives on the Concat, for its user and the graph output.
    assert concat.output.name == "conv"
    assert out.node("relu").inputs[0] is concat.output
    assert [v.name for v in out.outputs] == ["relu", "conv"]


@pytest.mark.parametrize("c_in, c_out, group", [
    (32, 32, 32),                                          # depthwise
    (24, 48, 4),                                           # 6 input channels per group
    (2 * MIN_CHANNELS_PER_GROUP, 2 * MIN_CHANNELS_PER_GROUP - 2, 2),  # one output channel short
    (32, 32, 1),
])
def test_depthwise_narrow_and_ungrouped_convs_stay(c_in: int, c_out: int, group: int) -> None:
    out = ungroup_convs(grouped_conv(c_in, c_out, group))
    assert [(n.op, n.attrs.get("group")) for n in out.nodes] == [("Conv", group), ("Relu", None)]


@pytest.mark.parametrize("bias, pads, strides, kernel", [
    (True, (1, 1, 1, 1), (1, 1), 3),
    (False, (2, 2, 2, 2), (1, 1), 5),
    (True, (0, 1, 2, 0), (2, 2), 3),
    (False, (0, 0, 0, 0), (2, 1), 1),
])
def test_compiled_split_conv_matches_the_grouped_reference(
    bias: bool, pads: tuple[int, ...], strides: tuple[int, int], kernel: int
) -> None:
    g = grouped_conv(32, 48, 2, bias=bias, pads=pads, strides=strides, kernel=kernel)
    # In NCHW: the blocked layout keeps these groups (24 output channels, not whole blocks
    # of 16) one grouped kernel instead.
    exe = hetero.compile(g, targets=["llvm_cpu"], num_threads=1, layout="nchw")
    steps = [s.name for s in exe.placements[0].part.steps]
    assert any("Split" in s for s in steps) and any("Concat" in s for s in steps)
    x = np.random.default_rng(1).standard_normal((1, 32, 9, 9)).astype(np.float32)
    ours, ref = exe.run({"x": x}), hetero.run_reference(g, {"x": x})
    assert set(ours) == set(ref) == {"relu", "conv"}
    for name in ref:
        # Each output is a dot product of at most 16 * 5 * 5 = 400 float32 terms of
        # magnitude ~1, summed in a different order than the reference: the error grows
        # like sqrt(400) ulps of a sum of size ~20, well under 1e-4.
        np.testing.assert_allclose(ours[name], ref[name], rtol=1e-4, atol=1e-4)


def test_alexnet_grouped_convs_are_split() -> None:
    model = randomize_weights(onnx.load(light_model_path("bvlc_alexnet")), 0)
    graph = load_onnx(model)
    grouped = [n.name for n in graph.nodes if n.op == "Conv" and n.attrs["group"] > 1]
    assert len(grouped) == 3
    out = ungroup_convs(graph)
    assert all(n.attrs["group"] == 1 for n in out.nodes if n.op == "Conv")
    assert sum(n.op == "Concat" for n in out.nodes) == len(grouped)
    assert [v.name for v in out.outputs] == [v.name for v in graph.outputs]
