"""The blocked-layout convolution tile: which blocks it takes, the tile it picks, its numbers."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.core.ir.ops.layout import blocked_weight, to_blocked
from hetero.core.lower import lower_node
from hetero.plugins.llvm_cpu.host import host
from hetero.plugins.llvm_cpu.schedules import default_schedule
from hetero.plugins.llvm_cpu.schedules_blocked import plan_blocked, tile_shape


def _conv(op: str, c: int, size: int, pads: int, group: int = 1) -> GraphBuilder:
    rng = np.random.default_rng(0)
    lanes = host().lanes(4)
    gb = GraphBuilder()
    w = rng.standard_normal((c, c // group, 3, 3)).astype(np.float32)
    if op == "ConvBlocked":
        x = gb.input("x", (1, c // lanes, size, size, lanes))
        w = blocked_weight(w, 1 if c // group == 1 else lanes, lanes)
    else:
        x = gb.input("x", (1, c, size, size))
    gb.output(gb.op(op, x, gb.constant(w, "w"), pads=(pads,) * 4, group=group))
    return gb


@pytest.mark.parametrize("rows,blocks,want", [(56, 4, (8, 2)), (13, 4, (13, 1)), (7, 32, (7, 2)),
                                              (1, 1, (1, 1))])
def test_tile_shape_fills_half_the_registers_with_divisors(rows: int, blocks: int, want: tuple[int, int]) -> None:
    assert tile_shape(rows, blocks, 32) == want


def test_tile_of_a_grouped_conv_keeps_to_one_group_and_loads_less_than_it_computes() -> None:
    # ShuffleNet's groups of 34 channels on 3 blocks, 12 blocks in all, at 28 columns: 4
    # blocks would fill more registers but straddle two groups (measured 12-15% slower
    # over the model), 14 x 1 more but loads once per multiply-add (17-25% slower).
    assert tile_shape(28, 12, 32) == (4, 4)
    assert tile_shape(28, 12, 32, group_blocks=3) == (4, 3)
    assert tile_shape(28, 8, 32, group_blocks=2) == (7, 2)
    # Where no tile within a group loads less than it computes, the most accumulators.
    assert tile_shape(7, 36, 32, group_blocks=9) == (7, 1)
    assert tile_shape(14, 20, 32, group_blocks=5) == (14, 1)


def test_plan_reads_a_grouped_convs_blocks_per_group_from_its_input_index() -> None:
    lanes = host().lanes(4)
    rng = np.random.default_rng(2)
    gb = GraphBuilder()
    x = gb.input("x", (1, 3, 7, 7, lanes))
    w = blocked_weight(rng.standard_normal((4 * lanes, 10, 1, 1)).astype(np.float32), 1, lanes)
    sources = gb.constant(rng.permutation(3 * lanes)[:20].astype(np.int64))
    gb.output(gb.ConvBlocked(x, gb.constant(w), None, sources, group=2))
    func = lower_node(gb.build().nodes[0])
    assert plan_blocked(func, "convblocked").group_blocks == 2
    ungrouped = lower_node(_conv("ConvBlocked", 2 * lanes, 8, 1).build().nodes[0])
    assert plan_blocked(ungrouped, "convblocked").group_blocks == 0


def test_plan_takes_a_blocked_conv_and_not_an_nchw_one() -> None:
    lanes = host().lanes(4)
    blocked = lower_node(_conv("ConvBlocked", 2 * lanes, 8, 1).build().nodes[0])
    plain = lower_node(_conv("Conv", 2 * lanes, 8, 1).build().nodes[0])
    # The padded workspace stage is no reduction; the convolution is.
    assert [plan_blocked(blocked, b) is not None for b in ("convblocked_pad", "convblocked")] == [False, True]
    assert plan_blocked(plain, "conv") is None


@pytest.mark.parametrize("group,threads", [(1, 1), (1, 2), ("depthwise", 1), (2, 1), (2, 2)])
def test_blocked_tile_matches_the_reference(group: object, threads: int) -> None:
    lanes = host().lanes(4)
    c = 4 * lanes
    graph = _conv("ConvBlocked", c, 13, 1, c if group == "depthwise" else group).build()
    x = to_blocked(np.random.default_rng(1).standard_normal((1, c, 13, 13)).astype(np.float32), lanes)
    schedule = default_schedule(lower_node(graph.nodes[0]), threads)
    assert any(i.kind == "tile_accumulator" for i in schedule.trace.instructions)
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads)
    name = graph.outputs[0].name
    want = run_reference(graph, {"x": x})[name]
    np.testing.assert_allclose(exe.run({"x": x})[name], want, rtol=1e-5, atol=1e-4)
