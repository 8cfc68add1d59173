"""Liveness: steps (nodes and fused groups) and the live interval of each intermediate."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import Graph, GraphBuilder
from hetero.core.memory import LiveInterval, analyze_liveness, schedule_steps
from hetero.core.passes.fuse import fuse_epilogues


def diamond() -> Graph:
    """x -> a = Relu(x) -> b = Relu(a) -> c = Add(a, b): a is read two steps after it is made."""
    b = GraphBuilder("diamond")
    x = b.input("x", (1, 16))
    a = b.Relu(x, name="a")
    r = b.Relu(a, name="b")
    b.output(b.Add(a, r, name="c"))
    return b.build()


def test_interval_runs_from_producer_to_last_user() -> None:
    live = analyze_liveness(diamond())
    assert [tuple(n.name for n in s) for s in live.steps] == [("a",), ("b",), ("c",)]
    assert live.intervals == (
        LiveInterval("a", 0, 2, 64), LiveInterval("b", 1, 2, 64), LiveInterval("c", 2, 2, 64),
    )
    assert live.interval("b") == LiveInterval("b", 1, 2, 64)


def test_inputs_and_constants_are_not_intermediates() -> None:
    b = GraphBuilder("consts")
    x = b.input("x", (1, 4))
    b.output(b.Add(x, np.ones((1, 4), np.float32), name="y"))
    live = analyze_liveness(b.build())
    assert [iv.name for iv in live.intervals] == ["y"]


def test_live_values_per_step_and_peak() -> None:
    live = analyze_liveness(diamond())
    assert [[iv.name for iv in live.live_at(s)] for s in range(3)] == [["a"], ["a", "b"], ["a", "b", "c"]]
    assert [live.live_bytes(s) for s in range(3)] == [64, 128, 192]
    assert live.peak_step == 2 and live.peak_bytes == 192


def test_graph_output_made_early_lives_to_the_end() -> None:
    b = GraphBuilder("early")
    x = b.input("x", (1, 8))
    early = b.Relu(x, name="early")
    h = b.Neg(early, name="h")
    h = b.Neg(h, name="h2")
    b.output(early, b.Neg(h, name="last"))
    live = analyze_liveness(b.build())
    assert live.interval("early") == LiveInterval("early", 0, 3, 32)
    assert live.interval("h") == LiveInterval("h", 1, 2, 32)


def test_unread_result_lives_only_while_written() -> None:
    b = GraphBuilder("split")
    x = b.input("x", (1, 8))
    left, _right = b.Split(x, axis=1, split=(3, 5), name="cut")
    b.output(b.Relu(left, name="y"))
    live = analyze_liveness(b.build())
    assert live.interval("cut:1") == LiveInterval("cut:1", 0, 0, 20)
    assert live.interval("cut:0") == LiveInterval("cut:0", 0, 1, 12)


def fused_block() -> Graph:
    """conv -> bias -> residual (+ r, made after conv in node order) -> relu fused; Softmax after."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("block")
    x = b.input("x", (1, 4, 8, 8))
    conv = b.Conv(x, rng.standard_normal((4, 4, 3, 3)).astype(np.float32), None,
                  pads=(1, 1, 1, 1), name="conv")
    r = b.Sigmoid(x, name="r")
    biased = b.Add(conv, rng.standard_normal((1, 4, 1, 1)).astype(np.float32), name="bias")
    out = b.Relu(b.Add(biased, r, name="residual"), name="relu")
    b.output(b.Softmax(out, name="y"))
    return fuse_epilogues(b.build())


def test_fused_group_is_one_step_at_its_last_member() -> None:
    g = fused_block()
    steps = schedule_steps(g)
    assert [tuple(n.name for n in s) for s in steps] == [
        ("r",), ("conv", "bias", "residual", "relu"), ("y",),
    ]
    live = analyze_liveness(g)
    assert live.step_name(1) == "group conv (Conv+Add+Add+Relu)"
    assert live.step_name(0) == "r (Sigmoid)"


def test_values_inside_a_fused_group_take_no_memory() -> None:
    live = analyze_liveness(fused_block())
    nbytes = 4 * 4 * 8 * 8
    assert live.intervals == (
        LiveInterval("r", 0, 1, nbytes), LiveInterval("relu", 1, 2, nbytes),
        LiveInterval("y", 2, 2, nbytes),
    )


def test_graph_without_nodes_has_no_steps() -> None:
    b = GraphBuilder("empty")
    b.output(b.input("x", (2,)))
    live = analyze_liveness(b.build())
    assert live.steps == () and live.intervals == ()
    assert live.peak_bytes == 0
