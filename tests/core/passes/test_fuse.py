"""Epilogue fusion groups anchors with their elementwise consumers, and explains refusals."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder, problems
from hetero.core.passes.fuse import MAX_ELEMENTWISE_CHAIN, FusionLog, fuse_epilogues, groups


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
    # The Conv stays alone; what followed it chains as elementwise ops of their own.
    assert {k: [n.name for n in v] for k, v in groups(fused).items()} == {"bias": ["bias", "residual", "relu"]}
    assert log.rejected == [("conv", "conv", "conv is a graph output, so it must be stored")]


def _elementwise_chain(n: int, shared_at: int | None = None):
    b = GraphBuilder("chain")
    x = b.input("x", (4, 8))
    one = b.constant(np.ones((4, 8), np.float32), "one")
    values = []
    for i in range(n):
        x = b.Add(x, one, name=f"add{i}") if i % 2 == 0 else b.Relu(x, name=f"relu{i}")
        values.append(x)
    outputs = [x] if shared_at is None else [x, b.Neg(values[shared_at], name="side")]
    for v in outputs:
        b.output(v)
    return b.build()


def test_elementwise_ops_no_anchor_took_chain_into_kernels_of_bounded_length() -> None:
    fused = fuse_epilogues(_elementwise_chain(2 * MAX_ELEMENTWISE_CHAIN + 5))
    sizes = [len(v) for v in groups(fused).values()]
    assert sizes == [MAX_ELEMENTWISE_CHAIN, MAX_ELEMENTWISE_CHAIN, 5]
    assert problems(fused) == []


def test_an_elementwise_chain_stops_where_a_value_has_another_reader() -> None:
    fused = fuse_epilogues(_elementwise_chain(6, shared_at=2))
    assert [[n.name for n in v] for v in groups(fused).values()] == [
        ["add0", "relu1", "add2"], ["relu3", "add4", "relu5"]]


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
