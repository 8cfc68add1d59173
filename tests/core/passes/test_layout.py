"""The blocked-channel layout pass, its ops' references and their llvm_cpu lowerings.

Numbers: the pass must keep every light model's output (hetero with and without it,
and onnxruntime, on seeded random weights and input, within the light-model bound of
1e-4 of the output's largest magnitude: hetero's tiled sums and MLAS's add in other
orders). Structure: every conversion sits where a blocked chain meets an NCHW op or a
graph input or output, never between two blocked ops.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.ir import GraphBuilder
from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.opdef import get_op
from hetero.core.ir.ops.layout import blocked_weight, from_blocked, to_blocked, unblocked_weight
from hetero.core.passes.fuse import fuse_epilogues, groups
from hetero.core.passes.layout import Placement, block_layout
from hetero.errors import InputError, OptionError, ShapeError
from models import LIGHT_MODELS, light_model_path
from oracle import run_model

#: The block the tests use: AVX-512's float32 lanes, the block llvm_cpu picks on such hosts.
BLOCK = 16
#: The one light model quick enough for the fast inner loop.
_QUICK = {"squeezenet"}
_CONVERSIONS = ("LayoutToBlocked", "LayoutFromBlocked")


def _light(name: str) -> tuple[onnx.ModelProto, Graph, dict[str, np.ndarray]]:
    model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
    graph = hetero.optimize(hetero.load_onnx(model))
    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    return model, graph, {graph.inputs[0].name: x}


def _blocked(v: Value) -> bool:
    """Whether ``v`` is in the blocked layout: made by a blocked convolution or a
    conversion to blocks, or by an op reading such a value that is no conversion back."""
    node = v.producer
    if node is None or node.op == "LayoutFromBlocked":
        return False
    if node.op in ("ConvBlocked", "LayoutToBlocked") or node.name.endswith("_to_nchw1c"):
        return True
    return any(_blocked(u) for u in node.inputs if u is not None and u.data is None)


def _conversion_problems(graph: Graph) -> list[str]:
    """Each conversion that is not at a blocked chain's boundary, with why."""
    problems = []
    outputs = {id(v) for v in graph.outputs}
    for node in graph.nodes:
        if node.op == "LayoutFromBlocked":
            source = node.inputs[0].producer
            if source is None or source.op in _CONVERSIONS:
                problems.append(f"{node.name} converts {node.inputs[0].name}, not a blocked op's output")
            if id(node.output) not in outputs and any(u.op == "ConvBlocked" or _blocked(u.output)
                                                      for u in node.output.users):
                problems.append(f"{node.name} feeds a blocked op")
        elif node.op == "LayoutToBlocked" or node.name.endswith("_to_nchw1c"):
            source = node.inputs[0].producer
            if source is not None and _blocked(node.inputs[0]):
                problems.append(f"{node.name} converts an already blocked value")
            if any(not _blocked(u.output) for u in node.output.users):
                problems.append(f"{node.name} feeds an NCHW op")
    for node in graph.nodes:
        converted = [v for v in node.inputs if v is not None and v.producer is not None
                     and v.producer.op in _CONVERSIONS]
        if len({v.name for v in converted}) != len(converted):
            problems.append(f"{node.name} reads one conversion twice")
    seen: dict[tuple[str, str], str] = {}
    for node in graph.nodes:
        if node.op in _CONVERSIONS:
            key = (node.op, node.inputs[0].name)
            if key in seen:
                problems.append(f"{node.inputs[0].name} is converted twice ({seen[key]}, {node.name})")
            seen[key] = node.name
    return problems


# -- the light models ------------------------------------------------------------------


@pytest.mark.parametrize("name", LIGHT_MODELS)
def test_light_model_conversions_sit_only_at_chain_boundaries(name: str) -> None:
    _, graph, _ = _light(name)
    blocked = block_layout(fuse_epilogues(graph), BLOCK)
    histogram = blocked.op_histogram()
    assert histogram.get("ConvBlocked", 0) > 0, histogram
    assert _conversion_problems(blocked) == []
    # Chains, not a conversion pair around every Conv: at most one conversion in and one
    # out per blocked convolution (ShuffleNet's depthwise ones, between channel shuffles
    # and narrow groups, are chains of one).
    conversions = sum(histogram.get(op, 0) for op in _CONVERSIONS)
    assert conversions <= 2 * histogram["ConvBlocked"], histogram
    if name == "resnet50":
        # One chain from the stem (read as blocks of one) to the global pool.
        assert (histogram["ConvBlocked"], conversions) == (53, 1), histogram


@pytest.mark.parametrize("name", [
    n if n in _QUICK else pytest.param(n, marks=pytest.mark.slow) for n in LIGHT_MODELS])
def test_light_model_keeps_its_numbers_in_the_blocked_layout(name: str) -> None:
    model, graph, feeds = _light(name)
    out = graph.outputs[0].name
    theirs = run_model(model, feeds)[0]
    scale = float(np.abs(theirs).max())
    results = {}
    for layout in ("nchw", "blocked"):
        exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[], num_threads=1, layout=layout)
        results[layout] = exe.run(feeds)[out]
        np.testing.assert_allclose(results[layout], theirs, rtol=0, atol=1e-4 * scale)
    np.testing.assert_allclose(results["blocked"], results["nchw"], rtol=0, atol=1e-4 * scale)


# -- the pass on a small chain -----------------------------------------------------------


def _chain() -> Graph:
    """stem (3 channels) -> Relu -> MaxPool -> Conv + per-channel Add -> Concat with a
    depthwise Conv -> a 10-channel head the block does not divide -> output."""
    rng = np.random.default_rng(1)
    gb = GraphBuilder()
    x = gb.input("x", (1, 3, 12, 12))

    def weight(*shape: int) -> Value:
        return gb.constant(rng.standard_normal(shape).astype(np.float32))

    stem = gb.Relu(gb.Conv(x, weight(16, 3, 3, 3), weight(16), pads=(1, 1, 1, 1), strides=(2, 2), name="stem"))
    pool = gb.MaxPool(stem, kernel_shape=(2, 2), strides=(2, 2), pads=(0, 0, 1, 1), name="pool")
    a = gb.Add(gb.Conv(pool, weight(32, 16, 1, 1), name="conv_a"), weight(32, 1, 1), name="bias_a")
    d = gb.Conv(pool, weight(16, 1, 3, 3), pads=(1, 1, 1, 1), group=16, name="depthwise")
    cat = gb.Concat(a, d, axis=1, name="cat")
    head = gb.Conv(cat, weight(10, 48, 1, 1), name="head")
    gb.output(head, cat)
    return gb.build()


def test_pass_blocks_the_chain_and_converts_at_its_ends() -> None:
    graph = _chain()
    blocked = block_layout(graph, BLOCK)
    # A blocked node keeps its name, but for a graph output's: its conversion back takes it.
    ops = {n.name.removesuffix(f"_nchw{BLOCK}c"): n.op for n in blocked.nodes}
    assert [ops[n] for n in ("stem", "depthwise", "conv_a", "head")] == ["ConvBlocked"] * 3 + ["Conv"]
    assert [ops[n] for n in ("pool", "bias_a", "cat")] == ["MaxPool", "Add", "Concat"]
    # The stem reads the 3-channel input as blocks of one (a free reshape); the Concat
    # is converted back once, for both the head and the graph output.
    assert sorted(n.op for n in blocked.nodes if n.op in _CONVERSIONS or n.op == "Reshape") == [
        "LayoutFromBlocked", "Reshape"]
    assert [v.name for v in blocked.outputs] == [v.name for v in graph.outputs]
    assert blocked.node("pool").attrs["kernel_shape"] == (2, 2, 1)
    assert blocked.node("pool").attrs["pads"] == (0, 0, 0, 1, 1, 0)
    assert _conversion_problems(blocked) == []
    x = np.random.default_rng(2).standard_normal((1, 3, 12, 12)).astype(np.float32)
    want, got = run_reference(graph, {"x": x}), run_reference(blocked, {"x": x})
    for v in graph.outputs:
        np.testing.assert_allclose(got[v.name], want[v.name], rtol=1e-5, atol=1e-5)


def test_pass_keeps_a_fused_group_whole_and_dissolves_one_a_conversion_splits() -> None:
    rng = np.random.default_rng(3)
    gb = GraphBuilder()
    x = gb.input("x", (1, 16, 6, 6))
    skip = gb.input("skip", (1, 32, 6, 6))
    w = gb.constant(rng.standard_normal((32, 16, 1, 1)).astype(np.float32))
    kept = gb.Relu(gb.Conv(x, w, name="conv_kept"), name="relu_kept")
    # The residual is an NCHW graph input: the Add stays NCHW, so the Conv's output is
    # converted between the group's members.
    split = gb.Add(gb.Conv(kept, gb.constant(rng.standard_normal((32, 32, 1, 1)).astype(np.float32)),
                           name="conv_split"), skip, name="add_split")
    gb.output(split)
    fused = fuse_epilogues(gb.build())
    assert set(groups(fused)) == {"conv_kept", "conv_split"}
    blocked = block_layout(fused, BLOCK)
    found = {name: [n.name for n in members] for name, members in groups(blocked).items()}
    assert found == {"conv_kept": ["conv_kept", "relu_kept"]}
    assert blocked.node("add_split").op == "Add" and blocked.node("add_split").inputs[0].type.rank == 4


def test_pass_refuses_a_block_of_one_channel() -> None:
    with pytest.raises(ShapeError, match="at least 2"):
        block_layout(_chain(), 1)


# -- the ops' references and lowerings --------------------------------------------------


def test_layout_conversions_are_numpy_index_maps() -> None:
    x = np.arange(2 * 32 * 3 * 5, dtype=np.float32).reshape(2, 32, 3, 5)
    y = to_blocked(x, BLOCK)
    assert y.shape == (2, 2, 3, 5, BLOCK)
    assert y[1, 1, 2, 4, 3] == x[1, BLOCK + 3, 2, 4]
    np.testing.assert_array_equal(from_blocked(y), x)
    w = np.random.default_rng(4).standard_normal((32, 16, 3, 3)).astype(np.float32)
    wb = blocked_weight(w, 4, BLOCK)
    assert wb.shape == (2, 4, 3, 3, 4, BLOCK)
    assert wb[1, 2, 0, 1, 3, 5] == w[BLOCK + 5, 2 * 4 + 3, 0, 1]
    np.testing.assert_array_equal(unblocked_weight(wb), w)


def test_layout_to_blocked_pads_the_last_block_with_zero_channels() -> None:
    x = np.random.default_rng(11).standard_normal((1, 10, 3, 3)).astype(np.float32)
    gb = GraphBuilder()
    y = gb.LayoutToBlocked(gb.input("x", x.shape), block=4)
    back = gb.LayoutFromBlocked(y, channels=10)
    gb.output(y, back)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1, layout="nchw")
    got = exe.run({"x": x})
    assert got[y.name].shape == (1, 3, 3, 3, 4)
    np.testing.assert_array_equal(got[y.name][:, 2, ..., 2:], 0)
    np.testing.assert_array_equal(got[y.name], to_blocked(x, 4))
    np.testing.assert_array_equal(got[back.name], x)
    with pytest.raises(ShapeError, match="at least 1"):
        gb.LayoutToBlocked(y, block=0)


def _numpy_conv_blocked(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int, group: int) -> np.ndarray:
    """An independent NCHW[x]c convolution (stride 1): padded input, one einsum per tap."""
    n, cb, h, wd, bi = x.shape
    kh, kw, bo = w.shape[2], w.shape[3], w.shape[-1]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, w.shape[0], oh, ow, bo))
    blocks_per_group = w.shape[0] // group
    for i in range(kh):
        for j in range(kw):
            window = xp[:, :, i:i + oh, j:j + ow, :]
            for g in range(group):
                outs = slice(g * blocks_per_group, (g + 1) * blocks_per_group)
                ins = window[:, g * w.shape[1]:(g + 1) * w.shape[1]]
                y[:, outs] += np.einsum("ncpqy,kcyx->nkpqx", ins, w[outs, :, i, j].astype(np.float64))
    return (y + b[None, :, None, None, :]).astype(np.float32)


@pytest.mark.parametrize("c_in,c_out,group,pad", [(32, 16, 1, 1), (3, 16, 1, 0), (32, 32, 2, 1)])
def test_conv_blocked_reference_and_lowering_match_numpy(c_in: int, c_out: int, group: int, pad: int) -> None:
    rng = np.random.default_rng(5)
    block_in = BLOCK if c_in % BLOCK == 0 else 1
    x = to_blocked(rng.standard_normal((1, c_in, 7, 9)).astype(np.float32), block_in)
    w = blocked_weight(rng.standard_normal((c_out, c_in // group, 3, 3)).astype(np.float32), block_in, BLOCK)
    b = rng.standard_normal((c_out // BLOCK, BLOCK)).astype(np.float32)
    want = _numpy_conv_blocked(x, w, b, pad, group)
    attrs = {"kernel_shape": (3, 3), "strides": (1, 1), "dilations": (1, 1), "pads": (pad,) * 4, "group": group}
    np.testing.assert_allclose(get_op("ConvBlocked").reference([x, w, b], attrs)[0], want, rtol=1e-5, atol=1e-4)
    gb = GraphBuilder()
    y = gb.ConvBlocked(gb.input("x", x.shape), gb.constant(w), gb.constant(b), **attrs)
    gb.output(y)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1)
    np.testing.assert_allclose(exe.run({"x": x})[y.name], want, rtol=1e-5, atol=1e-4)


def test_depthwise_conv_blocked_lowering_matches_numpy() -> None:
    rng = np.random.default_rng(6)
    plain_x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    plain_w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    xp = np.pad(plain_x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(xp[:, :, i:i + 8, j:j + 8] * plain_w[None, :, 0, i, j, None, None] for i in range(3) for j in range(3))
    gb = GraphBuilder()
    y = gb.ConvBlocked(gb.input("x", (1, 2, 8, 8, BLOCK)), gb.constant(blocked_weight(plain_w, 1, BLOCK)),
                       pads=(1, 1, 1, 1), group=32)
    gb.output(y)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1)
    np.testing.assert_allclose(exe.run({"x": to_blocked(plain_x, BLOCK)})[y.name], to_blocked(want, BLOCK),
                               rtol=1e-5, atol=1e-5)


def test_blocked_lowerings_of_the_conversions_and_a_pool_match_numpy() -> None:
    x = np.random.default_rng(7).standard_normal((1, 32, 5, 5)).astype(np.float32)
    gb = GraphBuilder()
    blocked = gb.LayoutToBlocked(gb.input("x", x.shape), block=BLOCK)
    pooled = gb.MaxPool(blocked, kernel_shape=(3, 3, 1), strides=(2, 2, 1), pads=(1, 1, 0, 1, 1, 0))
    back = gb.LayoutFromBlocked(pooled)
    gb.output(blocked, back)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1)
    got = exe.run({"x": x})
    np.testing.assert_array_equal(got[blocked.name], to_blocked(x, BLOCK))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.max([padded[:, :, i:i + 5:2, j:j + 5:2] for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_array_equal(got[back.name], want)


def test_pass_pads_a_wide_head_with_zero_channels_and_drops_them_on_the_way_back() -> None:
    rng = np.random.default_rng(8)
    gb = GraphBuilder()
    x = gb.input("x", (1, 32, 5, 5))
    wide = gb.Relu(gb.Conv(x, gb.constant(rng.standard_normal((100, 32, 1, 1)).astype(np.float32)),
                           gb.constant(rng.standard_normal(100).astype(np.float32)), name="wide"), name="relu")
    pooled = gb.MaxPool(wide, kernel_shape=(2, 2), name="pool")
    after = gb.Conv(pooled, gb.constant(rng.standard_normal((32, 100, 3, 3)).astype(np.float32)), name="after")
    gb.output(after, wide)
    graph = gb.build()
    blocked = block_layout(graph, BLOCK)
    # 100 channels fill 7 blocks with 12 zero channels (a tenth of 112): the Conv reading
    # them has zero weights for those; each output drops the padding once.
    assert blocked.node("wide").inputs[1].shape == (7, 2, 1, 1, BLOCK, BLOCK)
    after_blocked = blocked.node(f"after_nchw{BLOCK}c")  # "after" names the output's conversion
    assert after_blocked.op == "ConvBlocked"
    assert after_blocked.inputs[1].shape == (2, 7, 3, 3, BLOCK, BLOCK)
    backs = {n.output.name: n.attrs["channels"] for n in blocked.nodes if n.op == "LayoutFromBlocked"}
    assert backs == {"relu": 100, "after": 0}
    assert _conversion_problems(blocked) == []
    feeds = {"x": rng.standard_normal((1, 32, 5, 5)).astype(np.float32)}
    want, got = run_reference(graph, feeds), run_reference(blocked, feeds)
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)
    ran = exe.run(feeds)
    for v in graph.outputs:
        # float32 sums of up to 900 products: within 1e-5 of the output's largest magnitude.
        scale = float(np.abs(want[v.name]).max())
        np.testing.assert_allclose(got[v.name], want[v.name], rtol=0, atol=1e-6 * scale)
        np.testing.assert_allclose(ran[v.name], want[v.name], rtol=0, atol=1e-5 * scale)


def test_pass_turns_a_blocked_batch_norm_into_one_fused_mul_add_with_its_relu() -> None:
    rng = np.random.default_rng(10)
    gb = GraphBuilder()
    x = gb.input("x", (1, 32, 6, 6))
    conv = gb.Conv(x, gb.constant(rng.standard_normal((32, 32, 1, 1)).astype(np.float32)), name="conv")
    params = [gb.constant(a.astype(np.float32)) for a in (rng.uniform(0.5, 2, 32), rng.standard_normal(32),
                                                          rng.standard_normal(32), rng.uniform(0.5, 2, 32))]
    relu = gb.Relu(gb.BatchNormalization(conv, *params, name="bn"), name="relu")
    gb.output(relu)
    graph = gb.build()
    blocked = block_layout(graph, BLOCK)
    assert "BatchNormalization" not in blocked.op_histogram()
    assert {name: [n.op for n in members] for name, members in groups(blocked).items()} == {
        "bn_scale": ["Mul", "Add", "Relu"]}
    feeds = {"x": rng.standard_normal((1, 32, 6, 6)).astype(np.float32)}
    want = run_reference(graph, feeds)["relu"]
    np.testing.assert_allclose(run_reference(blocked, feeds)["relu"], want, rtol=1e-5, atol=1e-5)
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[], num_threads=1)
    np.testing.assert_allclose(exe.run(feeds)["relu"], want, rtol=1e-5, atol=1e-4)


def test_pass_pads_a_depthwise_conv_and_its_converted_input_with_zero_channels() -> None:
    rng = np.random.default_rng(12)
    gb = GraphBuilder()
    x = gb.input("x", (1, 28, 7, 7))
    d = gb.Conv(x, gb.constant(rng.standard_normal((28, 1, 3, 3)).astype(np.float32)),
                gb.constant(rng.standard_normal(28).astype(np.float32)), pads=(1,) * 4, group=28, name="dw")
    gb.output(gb.Relu(d, name="relu"))
    graph = gb.build()
    blocked = block_layout(graph, BLOCK)
    dw = blocked.node("dw")
    assert (dw.op, dw.attrs["group"], dw.inputs[0].shape) == ("ConvBlocked", 32, (1, 2, 7, 7, BLOCK))
    assert [(n.op, n.attrs.get("channels")) for n in blocked.nodes if n.op in _CONVERSIONS] == [
        ("LayoutToBlocked", None), ("LayoutFromBlocked", 28)]
    feeds = {"x": rng.standard_normal((1, 28, 7, 7)).astype(np.float32)}
    want = run_reference(graph, feeds)["relu"]
    np.testing.assert_allclose(run_reference(blocked, feeds)["relu"], want, rtol=1e-5, atol=1e-5)
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[], num_threads=1)
    np.testing.assert_allclose(exe.run(feeds)["relu"], want, rtol=1e-5, atol=1e-5)


def test_llvm_cpu_refuses_an_unknown_layout_option() -> None:
    with pytest.raises(OptionError, match="layout"):
        hetero.compile(_chain(), targets=["llvm_cpu"], layout="nhwc")


# -- grouped Convs with padded groups and channel shuffles (ShuffleNet's units) -----------


def _shuffle(gb: GraphBuilder, x: Value, groups: int, name: str) -> Value:
    """ShuffleNet's channel shuffle: Reshape to (N, G, C/G, H, W), swap those axes, Reshape back."""
    n, c, h, w = x.shape
    split = gb.Reshape(x, shape=(n, groups, c // groups, h, w), name=f"{name}_split")
    swapped = gb.Transpose(split, perm=(0, 2, 1, 3, 4), name=f"{name}_swap")
    return gb.Reshape(swapped, shape=(n, c, h, w), name=f"{name}_merge")


def _shufflenet_like() -> Graph:
    """ShuffleNet's stem, its first (stride-2) unit and one residual unit, small: grouped 1x1
    Convs of group 4 (6 -> 28 channels a group, then 28 and 34 a group, which the block of 16
    does not divide), each Relu then channel shuffle, depthwise 3x3 Convs, the Concat with an
    AveragePool branch (112 + 24 = 136 channels) and the residual Add."""
    rng = np.random.default_rng(20)
    gb = GraphBuilder()

    def conv(x: Value, c_out: int, group: int = 1, k: int = 1, stride: int = 1, name: str = "") -> Value:
        w = gb.constant(rng.standard_normal((c_out, x.shape[1] // group, k, k)).astype(np.float32) / k)
        b = gb.constant(rng.standard_normal(c_out).astype(np.float32))
        return gb.Conv(x, w, b, pads=(k // 2,) * 4, strides=(stride, stride), group=group, name=name)

    x = gb.input("x", (1, 3, 16, 16))
    stem = gb.Relu(conv(x, 24, k=3, name="stem"), name="stem_relu")
    a = _shuffle(gb, gb.Relu(conv(stem, 112, group=4, name="a1"), name="a1_relu"), 4, "a_shuffle")
    a = conv(conv(a, 112, group=112, k=3, stride=2, name="a_dw"), 112, group=4, name="a2")
    pool = gb.AveragePool(stem, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1), name="a_pool")
    r = gb.Relu(gb.Concat(a, pool, axis=1, name="a_cat"), name="a_relu")
    b = _shuffle(gb, gb.Relu(conv(r, 136, group=4, name="b1"), name="b1_relu"), 4, "b_shuffle")
    b = conv(conv(b, 136, group=136, k=3, name="b_dw"), 136, group=4, name="b2")
    gb.output(gb.Relu(gb.Add(b, r, name="b_add"), name="b_relu"))
    return gb.build()


def test_pass_keeps_shufflenet_units_blocked_and_shuffles_without_a_kernel() -> None:
    graph = _shufflenet_like()
    blocked = block_layout(fuse_epilogues(graph), BLOCK)
    histogram = blocked.op_histogram()
    # Every Conv blocked, both shuffles gone: each grouped Conv reads its groups' channels
    # where they are. Two gathers remain: the residual (the Concat's channels) into the
    # Conv's whole-block groups for the Add, before the Conv so that the Conv, Add and Relu
    # stay one kernel, and the output back in order, which one conversion then takes.
    assert histogram["ConvBlocked"] == 7 and "Conv" not in histogram and "Transpose" not in histogram, histogram
    assert histogram["ChannelGatherBlocked"] == 2 and histogram["LayoutFromBlocked"] == 1, histogram
    assert "LayoutToBlocked" not in histogram and "Reshape" in histogram, histogram  # the stem's input
    assert _conversion_problems(blocked) == []
    # 28 and 34 output channels a group take 2 and 3 blocks each; every group's input
    # channels are read one by one through its table, none padded.
    convs = {n: blocked.node(n) for n in ("a1", "a2", "b1", "b2")}
    assert {n: c.inputs[1].shape for n, c in convs.items()} == {
        "a1": (8, 6, 1, 1, 1, BLOCK), "a2": (8, 28, 1, 1, 1, BLOCK),
        "b1": (12, 34, 1, 1, 1, BLOCK), "b2": (12, 34, 1, 1, 1, BLOCK)}
    assert {n: c.inputs[3].shape for n, c in convs.items()} == {"a1": (24,), "a2": (112,), "b1": (136,), "b2": (136,)}
    assert [n.op for n in groups(blocked)["b2"]] == ["ConvBlocked", "Add", "Relu"]
    feeds = {"x": np.random.default_rng(21).standard_normal((1, 3, 16, 16)).astype(np.float32)}
    want = run_reference(graph, feeds)["b_relu"]
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(run_reference(blocked, feeds)["b_relu"], want, rtol=0, atol=1e-5 * scale)
    exe = hetero.compile(graph, targets=["llvm_cpu"], passes=[], num_threads=1)
    np.testing.assert_allclose(exe.run(feeds)["b_relu"], want, rtol=0, atol=1e-5 * scale)


def test_llvm_cpu_keeps_padded_groups_grouped_only_in_the_blocked_layout() -> None:
    from hetero.core.plugin import get_backend
    from hetero.core.plugin.target import bind
    from hetero.plugins.llvm_cpu.backend import kernel_graph

    graph = _shufflenet_like()
    backend = get_backend("llvm_cpu")
    ops = {layout: kernel_graph(graph, bind(backend, {"layout": layout})).op_histogram()
           for layout in ("nchw", "blocked")}
    # In NCHW the 28- and 34-channel groups are split into one Conv each (the 6-channel
    # ones are too narrow to pay); blocked, every grouped Conv stays one kernel.
    assert ops["nchw"]["Split"] == 3 and ops["nchw"]["Conv"] == 1 + 3 * 4 + 1 + 2, ops["nchw"]
    assert "Split" not in ops["blocked"] and ops["blocked"]["ConvBlocked"] == 7, ops["blocked"]


def test_channel_gather_blocked_moves_channels_across_blocks_and_zeroes_padding() -> None:
    rng = np.random.default_rng(22)
    x = rng.standard_normal((2, 24, 3, 5)).astype(np.float32)
    # ShuffleNet's shuffle of 4 groups of 6, into whole-block groups: 4 blocks of 8.
    source = [k % 4 * 6 + k // 4 for k in range(24)]
    table = np.full(32, -1, np.int64)
    for k in range(24):
        table[k // 6 * 8 + k % 6] = source[k]
    want = np.zeros((2, 32, 3, 5), np.float32)
    for p, s in enumerate(table):
        if s >= 0:
            want[:, p] = x[:, s]
    xb = to_blocked(x, 8)
    got = get_op("ChannelGatherBlocked").reference([xb, table.reshape(4, 8)], {})[0]
    np.testing.assert_array_equal(got, to_blocked(want, 8))
    gb = GraphBuilder()
    y = gb.ChannelGatherBlocked(gb.input("x", xb.shape), gb.constant(table.reshape(4, 8)))
    gb.output(y)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1)
    np.testing.assert_array_equal(exe.run({"x": xb})[y.name], to_blocked(want, 8))
    with pytest.raises(ShapeError, match="channel below 24"):
        get_op("ChannelGatherBlocked").reference([xb, np.full((4, 8), 24, np.int64)], {})
    with pytest.raises(ShapeError, match="block b = 8"):
        gb.ChannelGatherBlocked(y, gb.constant(np.zeros((4, 4), np.int64)))


def test_placement_of_padded_groups_and_its_gather_table() -> None:
    grouped = Placement.grouped(6, 2, 4)
    assert grouped == Placement((0, 1, 2, 4, 5, 6), 8) and not grouped.exact and not grouped.is_prefix
    assert Placement.packed(8, 4).exact and Placement.packed(6, 4).is_prefix
    np.testing.assert_array_equal(grouped.sources(Placement.packed(6, 4)), [0, 1, 2, -1, 3, 4, 5, -1])
    np.testing.assert_array_equal(grouped.scatter(np.arange(1, 7), 0), [1, 2, 3, 0, 4, 5, 6, 0])


def test_conv_blocked_reads_each_group_through_its_sources_and_refuses_one_out_of_range() -> None:
    rng = np.random.default_rng(23)
    # Two groups of 3 input channels, scattered over 2 blocks of 4 (the other lanes must not
    # count), each group giving one block of 4 output channels.
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float32)
    sources = np.array([6, 1, 3, 0, 7, 4], np.int64)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    want = get_op("Conv").reference([x[:, sources], w], {"kernel_shape": (3, 3), "strides": (1, 1),
                                                          "dilations": (1, 1), "pads": (1,) * 4, "group": 2})[0]
    gb = GraphBuilder()
    s = gb.input("s", (6,), np.int64)
    y = gb.ConvBlocked(gb.input("x", (1, 2, 5, 5, 4)), gb.constant(blocked_weight(w, 1, 4)), None, s,
                       pads=(1,) * 4, group=2)
    gb.output(y)
    exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1)
    xb = to_blocked(x, 4)
    np.testing.assert_allclose(exe.run({"x": xb, "s": sources})[y.name], to_blocked(want, 4), rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match="out of range for axis 1 of size 8"):
        exe.run({"x": xb, "s": np.array([6, 1, 3, 0, 8, 4], np.int64)})
    with pytest.raises(ShapeError, match="out of range"):
        gb.ConvBlocked(y, gb.constant(blocked_weight(w, 1, 4)), None, gb.constant(np.full(6, -1, np.int64)),
                       pads=(1,) * 4, group=2)
