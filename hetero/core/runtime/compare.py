"""Numerics across backends: each region on its backend against the reference.

:func:`compare_regions` runs the whole graph once on the reference executor,
keeping every intermediate, then compiles each region's subgraph with the backend
that owns it and runs it on the reference values of that region's inputs. Every
region therefore sees exactly the inputs it would see if all regions before it were
exact, so an error is charged to the region that makes it, not to the first region
downstream that happens to amplify it::

    part = Session(targets).partition(graph)
    results = compare_regions(graph, part, inputs)
    print(format_comparison(results))
    bad = first_beyond(results)      # None when every region is within tolerance

A region is within tolerance when every output satisfies
``|got - want| <= atol + rtol * |want|`` elementwise (numpy's ``allclose``). The
relative error reported is ``|got - want| / |want|`` over the elements where
``|want| > atol``, since near zero only the absolute error means anything. A
backend that fails to compile or run a region, or returns an output of the wrong
shape, makes that region fail with the error in the result: one broken backend
does not stop the comparison of the others.

Within a region, errors are charged per node where the backend exposes its
intermediates: a compiled part with a ``run_intermediates(inputs)`` method (see
:class:`~hetero.core.plugin.capabilities.RunsIntermediates`) returns every value it
materialises, and each one the reference also computed is compared, labelled with
the node that produced it. The first of them beyond tolerance is where the region
goes wrong (a fused group materialises only its last node's output, so the error
is charged to the group).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hetero.core import progress
from hetero.core.exec.device import run_from_host
from hetero.core.exec.reference import run_reference
from hetero.core.ir.graph import Graph
from hetero.core.plugin.capabilities import RunsIntermediates, device_of
from hetero.errors import PartitionError

if TYPE_CHECKING:
    from hetero.core.partition.partition import Partition


@dataclass(frozen=True)
class OutputComparison:
    """One output of a region: its largest absolute and relative error against the
    reference, whether it is within tolerance, and what went wrong when it could not
    be compared (``problem``, empty otherwise)."""

    value: str
    max_abs_error: float
    max_rel_error: float
    ok: bool
    problem: str = ""
    node: str = ""


@dataclass(frozen=True)
class RegionComparison:
    """A region run on its backend against the reference: one entry per output, or
    the ``error`` its backend raised while compiling or running it; ``intermediates``
    holds one entry per intermediate value the backend exposed, in execution order
    (empty when it exposes none)."""

    region: str
    backend: str
    nodes: int
    outputs: tuple[OutputComparison, ...]
    error: str = ""
    intermediates: tuple[OutputComparison, ...] = ()

    @property
    def first_node_beyond(self) -> OutputComparison | None:
        """The first exposed intermediate, or else output, beyond tolerance."""
        return next((o for o in self.intermediates + self.outputs if not o.ok), None)

    @property
    def ok(self) -> bool:
        """Whether the region ran and every output is within tolerance."""
        return not self.error and all(o.ok for o in self.outputs)

    @property
    def max_abs_error(self) -> float:
        """The largest absolute error over the outputs (infinite when the region failed)."""
        return math.inf if self.error else max((o.max_abs_error for o in self.outputs), default=0.0)

    @property
    def max_rel_error(self) -> float:
        """The largest relative error over the outputs (infinite when the region failed)."""
        return math.inf if self.error else max((o.max_rel_error for o in self.outputs), default=0.0)


def compare_regions(
    graph: Graph,
    partition: Partition,
    inputs: Mapping[str, Any],
    rtol: float = 1e-3,
    atol: float = 1e-4,
) -> list[RegionComparison]:
    """Compare every region of ``partition`` (a partition of ``graph``) with the reference.

    ``inputs`` are the graph inputs by name; each region compiles for its backend's
    target as the partition planned it (its options bound there). Returns one :class:`RegionComparison` per region, in execution order.
    """
    if partition.graph is not graph:
        raise PartitionError(f"the partition is of graph {partition.graph.name}, not of the graph "
                             f"{graph.name} given to compare; partition this graph first")
    reference = {**inputs, **run_reference(graph, inputs, keep=True)}
    backends = {b.name: b for b in partition.assignment.annotation.backends}
    results = []
    for index, region in enumerate(partition.regions, 1):
        progress.step("compare", index, len(partition.regions), f"region {region.name} on {region.backend}")
        sub = partition.subgraph(region)
        feed = {v.name: reference[v.name] for v in sub.inputs}
        try:
            part = backends[region.backend].compile(sub)
            run = part.run_intermediates if isinstance(part, RunsIntermediates) else part.run
            got = run_from_host(run, device_of(part), feed)
        except Exception as exc:  # noqa: BLE001 - a plugin's failure is reported as that region's result
            results.append(RegionComparison(region.name, region.backend, len(region.nodes), (),
                                            f"{type(exc).__name__}: {exc}"))
            continue
        produced = {v.name: n.name for n in sub.nodes for v in n.outputs}
        last = {v.name for v in sub.outputs} | set(feed)
        inner = tuple(_compare(name, got[name], reference[name], rtol, atol, produced[name])
                      for name in produced if name in got and name not in last and name in reference)
        outputs = tuple(_compare(v.name, got.get(v.name), reference[v.name], rtol, atol,
                                 produced.get(v.name, "")) for v in sub.outputs)
        results.append(RegionComparison(region.name, region.backend, len(region.nodes), outputs,
                                        intermediates=inner))
    progress.end("compare")
    return results


def first_beyond(results: Sequence[RegionComparison]) -> RegionComparison | None:
    """The first region, in execution order, that failed or is beyond tolerance."""
    return next((r for r in results if not r.ok), None)


def describe_comparison(results: Sequence[RegionComparison], rtol: float, atol: float) -> dict[str, Any]:
    """The comparison as JSON-ready data; infinite errors become None."""
    bad = first_beyond(results)
    node = bad.first_node_beyond if bad else None
    return {
        "rtol": rtol,
        "atol": atol,
        "ok": bad is None,
        "first_beyond_tolerance": bad.region if bad else None,
        "first_node_beyond_tolerance": node.node if node and node.node else None,
        "regions": [
            {
                "region": r.region, "backend": r.backend, "nodes": r.nodes, "ok": r.ok,
                "max_abs_error": _finite(r.max_abs_error), "max_rel_error": _finite(r.max_rel_error),
                "error": r.error or None,
                "outputs": [_describe(o) for o in r.outputs],
                "intermediates": [_describe(o) for o in r.intermediates],
            }
            for r in results
        ],
    }


def _describe(o: OutputComparison) -> dict[str, Any]:
    return {"value": o.value, "node": o.node or None, "max_abs_error": _finite(o.max_abs_error),
            "max_rel_error": _finite(o.max_rel_error), "ok": o.ok, "problem": o.problem or None}


def format_comparison(results: Sequence[RegionComparison], rtol: float, atol: float,
                      nodes: bool = False) -> str:
    """The comparison as a table, and a last line naming the first region beyond tolerance.

    Per-node rows are shown for every exposed intermediate with ``nodes``, otherwise
    only for the first one beyond tolerance in each region.
    """
    rows = [["region", "backend", "nodes", "max abs err", "max rel err", "result"]]
    for r in results:
        rows.append([r.region, r.backend, str(r.nodes), f"{r.max_abs_error:.3g}",
                     f"{r.max_rel_error:.3g}", "ok" if r.ok else "BEYOND"])
        for o in r.outputs:
            note = f" ({o.problem})" if o.problem else ""
            rows.append([f"  {o.value}", "", "", f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}",
                         ("ok" if o.ok else "BEYOND") + note])
        first = r.first_node_beyond
        for o in r.intermediates:
            if nodes or o is first:
                rows.append([f"  node {o.node} -> {o.value}", "", "", f"{o.max_abs_error:.3g}",
                             f"{o.max_rel_error:.3g}", "ok" if o.ok else "BEYOND (first in region)"
                             if o is first else "BEYOND"])
        if r.error:
            rows.append(["", "", "", "", "", f"failed: {r.error}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"per-region comparison with the reference (rtol {rtol:g}, atol {atol:g})"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    bad = first_beyond(results)
    if bad is None:
        lines.append(f"all {len(results)} region(s) within tolerance")
    else:
        node = bad.first_node_beyond
        where = f", first at node {node.node} ({node.value})" if node and node.node else ""
        lines.append(f"first region beyond tolerance: {bad.region} on {bad.backend} "
                     f"(max abs err {bad.max_abs_error:.3g}, max rel err {bad.max_rel_error:.3g}){where}")
    return "\n".join(lines)


def _compare(name: str, got: Any, want: np.ndarray, rtol: float, atol: float,
             node: str = "") -> OutputComparison:
    if got is None:
        return OutputComparison(name, math.inf, math.inf, False, "the backend did not return it", node)
    got = np.asarray(got)
    if got.shape != want.shape:
        return OutputComparison(name, math.inf, math.inf, False,
                                f"shape {list(got.shape)}, the reference has {list(want.shape)}", node)
    if got.size == 0:
        return OutputComparison(name, 0.0, 0.0, True, node=node)
    g, w = got.astype(np.float64), want.astype(np.float64)
    # Equal values (infinities included) have no error; a NaN on one side only has infinite error.
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), math.inf, diff)
        # Near zero a relative error says nothing (Relu's zeros would give 1/tiny), so
        # it is taken where |want| exceeds atol; below that the absolute error judges.
        scale = np.abs(w)
        rel = np.where(scale > atol, diff / np.where(scale > atol, scale, 1.0), 0.0)
        rel = np.where(same, 0.0, np.where(np.isnan(rel) | np.isinf(diff), math.inf, rel))
        ok = bool(np.all(same | (diff <= atol + rtol * np.abs(w))))
    return OutputComparison(name, float(diff.max()), float(rel.max()), ok, node=node)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
