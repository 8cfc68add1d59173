"""Partitioning a long chain costs work near-linear in its length (counted, not timed).

Merging regions, returning islands, listing transfers, planning memory and writing
the report each once did work quadratic in the nodes (a search of everything
downstream per contraction, a relabelling of every node, a scan of the whole graph
per region, of every placed tensor per placement). 4x the nodes must cost under 6x
the executed lines (quadratic code measured 13x to 15x here).
"""

from __future__ import annotations

from toyplugin import ToyBackend
from workcount import growth

from hetero import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.partition import partition_graph

#: Allowed growth of the work for 4x the nodes: linear is 4, n log n a little more.
MAX_GROWTH = 6.0


def chain(n: int, island_every: int = 0) -> Graph:
    """``n`` nodes: Relu, then Add(previous, the one before), alternating (a residual
    chain); every ``island_every``-th node a Neg, which the accelerator refuses."""
    b = GraphBuilder("chain")
    v = b.Relu(b.input("x", (1, 16)), name="r0")
    prev = v
    for i in range(1, n):
        if island_every and i % island_every == 0:
            v = b.Neg(v, name=f"n{i}")
        elif i % 2:
            v = b.Add(v, prev, name=f"a{i}")
        else:
            prev = v
            v = b.Relu(v, name=f"r{i}")
    b.output(v)
    return b.build()


def backends() -> list[ToyBackend]:
    return [ToyBackend("acc", ops=("Relu", "Add")), ToyBackend("cpu", ops=("Relu", "Add", "Neg"))]


def test_a_chain_on_one_backend_partitions_in_near_linear_work() -> None:
    graphs = {n: chain(n) for n in (500, 2000)}
    ratio = growth(lambda n: partition_graph(graphs[n], backends(), policy="cost", fallback="cpu"), 500)
    assert ratio < MAX_GROWTH, ratio


def test_a_chain_of_many_regions_partitions_and_reports_in_near_linear_work() -> None:
    # One region per run of six nodes: per-region work must not scan the whole graph.
    graphs = {n: chain(n, island_every=7) for n in (300, 1200)}

    def run(n: int) -> None:
        part = partition_graph(graphs[n], backends(), fallback="cpu", min_ratio=0)
        assert len(part.regions) > n // 10
        part.report()

    ratio = growth(run, 300)
    assert ratio < MAX_GROWTH, ratio
