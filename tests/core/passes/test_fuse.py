"""Epilogue fusion groups anchors with their elementwise consumers, and explains refusals."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder, problems
from hetero.core.passes.fuse import FusionLog, fuse_epilogues, groups


def conv_block(extra_user: bool = False):
    rng = np.random.default_rng(0)
    b = GraphBuilder("block")
    x = b.input("x", (1, 4, 8, 8))
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    conv = b.Conv(x, w, None, pads=(1, 1, 1, 1), name="conv")
    biased = b.Add(conv, rng.standard_normal((1, 4, 1, 1)).astype(np.float32), name="bias")
    summed = b.Add(biased, x, name="residual")
    out = b.Relu(summed, name="relu")
    b.output(out, conv) if extra_user else b.output(out)
    return b.build()


def test_anchor_and_epilogue_form_one_group() -> None:
    g = conv_block()
    fused = fuse_epilogues(g)
    assert {k: [n.name for n in v] for k, v in groups(fused).items()} == {
        "conv": ["conv", "bias", "residual", "relu"]
    }
    assert problems(fused) == []
    assert "%relu = Relu(%residual) : f32[1,4,8,8]  # group conv" in str(fused)
    assert all(n.group is None for n in g.nodes)  # the input graph is untouched


def test_an_output_needed_elsewhere_stops_the_group_with_a_reason() -> None:
    log = FusionLog()
    fused = fuse_epilogues(conv_block(extra_user=True), log)
    assert groups(fused) == {}
    assert log.rejected == [("conv", "conv", "conv is a graph output, so it must be stored")]


def test_verifier_rejects_a_broken_group() -> None:
    fused = fuse_epilogues(conv_block())
    fused.node("residual").group = None
    assert any("does not read the previous member" in p for p in problems(fused))


def side_branch_after_anchor():
    """MatMul(x, W) -> mm; Relu(y) -> r; Add(mm, r): the Add's operand r comes after mm."""
    b = GraphBuilder("side")
    x, y = b.input("x", (4, 8)), b.input("y", (4, 6))
    mm = b.MatMul(x, np.ones((8, 6), np.float32), name="mm")
    r = b.Relu(y, name="r")
    b.output(b.Add(mm, r, name="add"))
    return b.build()


def test_a_group_is_gathered_where_its_last_operand_is_ready() -> None:
    g = side_branch_after_anchor()
    assert [n.name for n in g.nodes] == ["mm", "r", "add"]
    fused = fuse_epilogues(g)
    assert {k: [n.name for n in v] for k, v in groups(fused).items()} == {"mm": ["mm", "add"]}
    assert [n.name for n in fused.nodes] == ["r", "mm", "add"]
    assert problems(fused) == []


def test_verifier_rejects_a_group_split_by_another_node() -> None:
    fused = fuse_epilogues(side_branch_after_anchor())
    mm, r, add = (fused.node(n) for n in ("mm", "r", "add"))
    fused.nodes = [mm, r, add]  # still topological, but r runs inside the group
    assert any("group mm: its members are not consecutive (node r (Relu)" in p for p in problems(fused))
