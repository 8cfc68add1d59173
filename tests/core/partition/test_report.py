"""The partition report (text and describe()): reasons grouped, composites counted, failed
estimates named. Backends are toys built here; the HTML page is tested in test_dot_html.py."""

from __future__ import annotations

import math

from hetero.core.plugin.target import bind
from toyplugin import ToyBackend

from hetero import GraphBuilder
from hetero.core.ir.pattern import Op, Var
from hetero.core.partition import partition_graph
from hetero.core.partition.costs import estimate
from hetero.core.plugin import Pattern, Support


class Blind(ToyBackend):
    """A toy whose cost model raises."""

    def estimate(self, subgraph, target):  # noqa: ANN001, ANN201
        raise RuntimeError("no cost model")


def negs_then_relus(negs: int = 12, relus: int = 2):
    """``negs`` Negs (which acc refuses), then ``relus`` Relus ``r1``, ``r2``...."""
    b = GraphBuilder("g")
    v = b.input("x", (1, 64))
    for i in range(negs):
        v = b.Neg(v, name=f"neg{i}")
    for i in range(1, relus + 1):
        v = b.Relu(v, name=f"r{i}")
    b.output(v)
    return b.build()


def backends(acc_type: type[ToyBackend] = ToyBackend) -> list[ToyBackend]:
    """acc takes Relu, and pairs of Relus whole; its neg_relu check refuses every match."""
    acc = acc_type("acc", ops=("Relu",))
    acc.patterns = (Pattern("relu_relu", Op("Relu", Op("Relu", Var("x")))),
                    Pattern("neg_relu", Op("Relu", Op("Neg", Var("x"))),
                            check=lambda m, target: Support.no("scratchpad too small")))
    return [acc, ToyBackend("cpu", ops=("Relu", "Neg"))]


def test_nodes_moved_for_one_reason_are_one_line_with_their_names_folded() -> None:
    part = partition_graph(negs_then_relus(12), backends(), fallback="cpu", min_ratio=0)
    text = part.report()
    assert "not on the preferred backend (acc): 12 node(s)\n" in text
    assert "  12 nodes (Neg) -> cpu: acc does not implement Neg\n" in text
    assert "    neg0, neg1, neg2, neg3, neg4 and 7 more" in text
    assert "neg7" not in text.split("not on the preferred backend")[1]
    groups = part.to_dict()["not_preferred_groups"]
    assert groups == [{"backend": "cpu", "preferred": "acc", "reason": "acc does not implement Neg",
                       "count": 12, "ops": {"Neg": 12}, "nodes": [f"neg{i}" for i in range(12)]}]
    # The per-node list stays, for tools.
    assert len(part.to_dict()["not_preferred"]) == 12


def test_a_lone_node_keeps_its_one_line() -> None:
    part = partition_graph(negs_then_relus(1), backends(), fallback="cpu", min_ratio=0)
    assert "  neg0 (Neg) -> cpu: acc does not implement Neg" in part.report()


def test_the_reports_name_each_pattern_and_how_often_it_matched_and_was_placed() -> None:
    # relu_relu fits at r2, r3 and r4; r1+r2 and r3+r4 land whole (r2+r3 overlaps them).
    part = partition_graph(negs_then_relus(2, relus=4), backends(), fallback="cpu", min_ratio=0)
    assert part.to_dict()["composites"] == [
        {"backend": "acc", "pattern": "neg_relu", "matched": 1, "accepted": 0, "placed": 0,
         "refused": {"scratchpad too small": 1}},
        {"backend": "acc", "pattern": "relu_relu", "matched": 3, "accepted": 3, "placed": 2,
         "refused": {}},
    ]
    text = part.report()
    assert "composites (pattern matches, accepted by the pattern's check, placed whole)" in text
    assert "  acc      neg_relu   1        0         0" in text
    assert "  acc      relu_relu  3        3         2" in text
    assert "  acc neg_relu: 1 refused: scratchpad too small" in text
    assert "  none: no selected backend declares a pattern" in partition_graph(
        negs_then_relus(1), [ToyBackend("cpu", ops=("Relu", "Neg"))], fallback="cpu").report()


def test_a_raising_estimate_is_reported_with_its_backend_region_and_error() -> None:
    part = partition_graph(negs_then_relus(2), backends(Blind), fallback="cpu", min_ratio=0)
    acc_region = next(r for r in part.regions if r.backend == "acc")
    assert part.estimate_problems == {acc_region.name: "acc.estimate() raised RuntimeError: no cost model"}
    text = part.report()
    assert ("estimates that failed (those regions are costed as unknown)\n"
            f"  {acc_region.name} (acc): acc.estimate() raised RuntimeError: no cost model") in text
    data = part.to_dict()
    assert data["estimate_problems"] == [{"region": acc_region.name, "backend": "acc",
                                          "problem": "acc.estimate() raised RuntimeError: no cost model"}]
    assert [r["estimate_problem"] for r in data["regions"] if r["backend"] == "acc"] == [
        "acc.estimate() raised RuntimeError: no cost model"]
    assert "unknown" in text and "inf µs" not in text


def test_the_cost_policy_says_when_the_preferred_backend_could_not_estimate() -> None:
    part = partition_graph(negs_then_relus(2), backends(Blind), policy="cost", fallback="cpu")
    reasons = {c.node: c.reason for c in part.assignment.moved()}
    assert reasons["r1"] == "acc.estimate() raised RuntimeError: no cost model: its cost on acc is unknown"
    assert "cheaper" not in part.report()


def test_an_estimate_that_is_not_a_number_of_seconds_is_a_problem_too() -> None:
    class Odd(ToyBackend):
        def estimate(self, subgraph, target):  # noqa: ANN001, ANN201
            return float("nan")

    made = estimate(bind(Odd("odd")), negs_then_relus(1))
    assert math.isinf(made.seconds)
    assert made.problem == "odd.estimate() returned nan, not a finite, non-negative number of seconds"
    assert estimate(bind(ToyBackend()), negs_then_relus(1)).problem == ""
