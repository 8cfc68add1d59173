"""Grouped-convolution splitting for the llvm_cpu backend.

Invariant established: no Conv with ``1 < group`` remains whose constant weights
give at least :data:`MIN_CHANNELS_PER_GROUP` input and output channels per group.
Each such Conv becomes one ``Split`` of its input along the channel axis, one
ordinary (``group=1``) Conv per group with that group's slice of the weights and
bias as new constants, and a ``Concat`` along the channel axis. The Concat's output
takes the grouped Conv's output name, so graph outputs and users are untouched.

Why: the register-tiled kernel (:mod:`hetero.plugins.llvm_cpu.schedules_tiled`)
needs a block that is one plain sum of products; a grouped Conv's input read
depends on ``oc // (K / G)``, so it falls back to the generic loop nest, which is
an order of magnitude slower at AlexNet's sizes. Split and Concat each cost one
pass over memory, cheap next to the convolution once each group has enough
channels to fill the tile. Depthwise and narrow-group convolutions stay as they
are: with a handful of channels per group the tile would be mostly empty, and the
window schedule already handles them.

>>> split = ungroup_convs(graph)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hetero.plugin import Const, Graph, Match, Node, Op, Opt, Rule, Value, Var, rewrite

#: Fewest input and output channels per group for which splitting pays. Measured at
#: 1 thread on 27x27 3x3 convolutions: 8 per group runs 3-4x faster split (G = 2, 8
#: and 32); 4 and 6 per group run 10-25% slower split, as the tile is mostly padding
#: and each group's launch and the Split and Concat passes are not repaid.
MIN_CHANNELS_PER_GROUP = 8


def _check(graph: Graph, m: Match) -> str | None:
    conv = m.root
    group = conv.attrs["group"]
    if group == 1:
        return ""
    c_in, c_out = m["x"].shape[1] // group, m["w"].shape[0] // group
    if min(c_in, c_out) < MIN_CHANNELS_PER_GROUP:
        return (f"Conv {conv.name} has {c_in} input and {c_out} output channels per group; "
                f"splitting needs at least {MIN_CHANNELS_PER_GROUP} of each to pay")
    return None


def _split(graph: Graph, m: Match) -> Value:
    conv, x, w = m.root, m["x"], m.const("w")
    group = conv.attrs["group"]
    c_in, c_out = x.shape[1] // group, w.shape[0] // group
    parts = graph.add_node("Split", [x], {"axis": 1, "split": [c_in] * group},
                           name=f"{conv.name}_split").outputs
    attrs = {**conv.attrs, "group": 1}
    outs = []
    for g, part in enumerate(parts):
        rows = slice(g * c_out, (g + 1) * c_out)
        inputs = [part, graph.add_constant(w[rows], f"{conv.name}_w{g}")]
        if "b" in m:
            inputs.append(graph.add_constant(m.const("b")[rows], f"{conv.name}_b{g}"))
        outs.append(graph.add_node("Conv", inputs, attrs, name=f"{conv.name}_g{g}").output)
    return graph.add_node("Concat", outs, {"axis": 1}, name=f"{conv.name}_concat").output


RULES = (
    Rule("ungroup_conv", Op("Conv", Var("x"), Const("w"), Opt(Const("b"))), _split, _check,
         doc="Conv(x, W, B, group=G) is Concat of G ordinary Convs over Split(x)"),
)


def ungroup_convs(graph: Graph, keep: Callable[[Node], bool] | None = None) -> Graph:
    """A copy of ``graph`` with wide grouped Convs split into one ordinary Conv per group,
    but those ``keep`` says stay grouped (the ones the blocked layout takes whole)."""
    if keep is None:
        return rewrite(graph, RULES).graph

    def check(g: Graph, m: Match) -> str | None:
        if keep(m.root):
            return f"Conv {m.root.name} stays grouped: the blocked layout takes it whole"
        return _check(g, m)

    return rewrite(graph, tuple(replace(rule, check=check) for rule in RULES)).graph
