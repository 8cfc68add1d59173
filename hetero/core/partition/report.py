"""The partition report: a text form for people and a dict (JSON) form for tools.

Both say the same things in a stable order: the ops × backends coverage, every region
(backend, nodes, estimated time, transfers in and out), every transfer, the memory
plan of each space, the composite patterns matched and how often, every estimate a
backend could not make, and every node that did not land on its preferred backend,
with the reason. The text groups the nodes that share a reason ("67 nodes -> cpu:
my_npu computes int8 only: quantise the model first") and folds their names after
:data:`SHOWN_NAMES`; the dict keeps every node as well as the groups.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hetero.core.memory.hierarchy import format_bytes
from hetero.core.plugin.compat import MIGRATION_GUIDE, adaptations_of
from hetero.core.plugin.target import plain_value

if TYPE_CHECKING:
    from hetero.core.partition.assign import Choice
    from hetero.core.partition.partition import Partition

#: How many node names a folded list shows before "and N more".
SHOWN_NAMES = 5


def coverage(part: Partition) -> dict[str, dict[str, Any]]:
    """Per op (sorted): node count, nodes each backend takes, and where they were placed."""
    annotation = part.assignment.annotation
    table: dict[str, dict[str, Any]] = {}
    for node in part.graph.nodes:
        row = table.setdefault(node.op, {
            "nodes": 0, "supported": dict.fromkeys(annotation.names, 0), "placed": {},
        })
        row["nodes"] += 1
        for b in annotation.names:
            row["supported"][b] += annotation.takes(node.name, b)
        placed = part.assignment.backend_of(node.name)
        row["placed"][placed] = row["placed"].get(placed, 0) + 1
    for row in table.values():
        row["placed"] = dict(sorted(row["placed"].items()))
    return dict(sorted(table.items()))


def composites(part: Partition) -> list[dict[str, Any]]:
    """Per backend pattern (targets' order, then pattern name): how many times it matched,
    how many matches its check accepted, how many landed whole in the partition, and
    the reasons of the refused ones with their counts."""
    annotation = part.assignment.annotation
    placed = part.assignment.composites()
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for b in annotation.backends:
        for pattern in b.patterns:
            rows.setdefault((b.name, pattern.name), {
                "backend": b.name, "pattern": pattern.name, "matched": 0, "accepted": 0,
                "placed": 0, "refused": {}})
    for c in annotation.composites:
        row = rows[(c.backend, c.pattern)]
        row["matched"] += 1
        if c.support.ok:
            row["accepted"] += 1
        else:
            row["refused"][c.support.reason] = row["refused"].get(c.support.reason, 0) + 1
    for c in placed:
        rows[(c.backend, c.pattern)]["placed"] += 1
    order = {name: i for i, name in enumerate(annotation.names)}
    return sorted(rows.values(), key=lambda r: (order[r["backend"]], r["pattern"]))


def reason_groups(moved: Iterable[Choice]) -> list[dict[str, Any]]:
    """The ``moved`` choices grouped by (backend, reason): largest group first, then in
    the order each group first appears; each with its ops (most frequent first) and
    nodes in graph order."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for c in moved:
        group = groups.setdefault((c.backend, c.reason), {
            "backend": c.backend, "preferred": c.preferred, "reason": c.reason, "count": 0,
            "ops": {}, "nodes": []})
        group["count"] += 1
        group["ops"][c.op] = group["ops"].get(c.op, 0) + 1
        group["nodes"].append(c.node)
    for group in groups.values():
        group["ops"] = dict(sorted(group["ops"].items(), key=lambda kv: (-kv[1], kv[0])))
    return sorted(groups.values(), key=lambda g: -g["count"])


def fold(names: Sequence[str], shown: int = SHOWN_NAMES) -> str:
    """``names`` joined by commas, the ones after the first ``shown`` folded into
    "and N more"."""
    if len(names) <= shown:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def describe(part: Partition) -> dict[str, Any]:
    """The whole report as JSON-ready data."""
    assignment = part.assignment

    def transfer(t: Any) -> dict[str, Any]:
        return {"value": t.value, "from": t.src_backend, "to": t.dst_backend, "nbytes": t.nbytes,
                "est_seconds": t.est_seconds, "src_region": t.src_region, "dst_region": t.dst_region}

    return {
        "graph": part.graph.name,
        "targets": list(assignment.annotation.names),
        "policy": assignment.policy,
        "fallback": assignment.fallback,
        "devices": [
            {"backend": t.name, "options": {k: plain_value(t.options[k]) for k in sorted(t.given)},
             "peak_gflops": t.peak_gflops,
             "memory": [{"level": m.name, "capacity_bytes": m.capacity_bytes, "bandwidth_gbps": m.bandwidth_gbps}
                        for m in t.memory.levels],
             "adapted": [str(change) for change in adaptations_of(t.backend)]}
            for t in assignment.annotation.backends
        ],
        "est_compute_seconds": sum(part.estimates.values()),
        "est_transfer_seconds": sum(t.est_seconds for t in part.transfers),
        "coverage": coverage(part),
        "regions": [
            {
                "name": r.name,
                "backend": r.backend,
                "nodes": list(r.node_names),
                "inputs": [v.name for v in part.inputs(r)],
                "outputs": [v.name for v in part.outputs(r)],
                "est_seconds": part.estimates[r.name],
                "estimate_problem": part.estimate_problems.get(r.name),
                "transfers_in": [t.value for t in part.transfers_in(r)],
                "transfers_out": [t.value for t in part.transfers_out(r)],
            }
            for r in part.regions
        ],
        "transfers": [transfer(t) for t in part.transfers],
        "memory": [
            {"space": space, "planned_bytes": plan.arena_bytes, "naive_bytes": plan.naive_bytes,
             "lower_bound_bytes": plan.lower_bound_bytes, "ratio": plan.ratio,
             "tensors": len(plan.allocations)}
            for space, plan in part.memory.items()
        ],
        "composites": composites(part),
        "estimate_problems": [
            {"region": r.name, "backend": r.backend, "problem": part.estimate_problems[r.name]}
            for r in part.regions if r.name in part.estimate_problems
        ],
        "not_preferred": [
            {"node": c.node, "op": c.op, "backend": c.backend, "preferred": c.preferred,
             "reason": c.reason}
            for c in assignment.moved()
        ],
        "not_preferred_groups": reason_groups(assignment.moved()),
    }


def format_report(part: Partition) -> str:
    """The report as text, one section per concern."""
    data = describe(part)
    names = data["targets"]
    lines = [
        (f"partition of {data['graph']}: {len(part.graph.nodes)} nodes in {len(part.regions)} "
         f"region(s) over {', '.join(names)}; policy {data['policy']}, fallback {data['fallback'] or 'none'}"),
        (f"estimated {format_us(data['est_compute_seconds'])} compute + "
         f"{format_us(data['est_transfer_seconds'])} transfers"),
        "",
        "devices (as each target's options declare them)",
    ]
    for d in data["devices"]:
        given = ", ".join(f"{k}={v!r}" for k, v in d["options"].items())
        levels = " > ".join(f"{m['level']} {format_bytes(m['capacity_bytes'])}" for m in d["memory"])
        lines.append(f"  {d['backend']}: {levels}; peak {d['peak_gflops']:.4g} GFLOP/s"
                     + (f" ({given})" if given else ""))
        if d["adapted"]:
            lines.append(f"    runs adapted from plugin API 1 hooks; to update: {'; '.join(d['adapted'])} "
                         f"(see {MIGRATION_GUIDE})")
    lines += ["", "coverage (nodes each backend takes / nodes of the op)"]
    rows = [["op", "nodes", *names, "placed"]]
    for op, row in data["coverage"].items():
        placed = ", ".join(f"{b} {n}" for b, n in row["placed"].items())
        rows.append([op, str(row["nodes"]), *(f"{row['supported'][b]}/{row['nodes']}" for b in names),
                     placed])
    lines += _table(rows)
    lines += ["", "regions (in execution order)"]
    rows = [["region", "backend", "nodes", "estimate", "in", "out"]]
    for r in part.regions:
        rows.append([r.name, r.backend, str(len(r.nodes)), format_us(part.estimates[r.name]),
                     _moves(part.transfers_in(r)), _moves(part.transfers_out(r))])
    lines += _table(rows)
    lines += ["", "transfers"]
    if part.transfers:
        rows = [["value", "from", "to", "bytes", "estimate"]]
        rows += [[t.value, f"{t.src_backend} ({t.src_region or 'input'})",
                  f"{t.dst_backend} ({t.dst_region or 'output'})", format_bytes(t.nbytes),
                  format_us(t.est_seconds)] for t in part.transfers]
        lines += _table(rows)
    else:
        lines.append("  none")
    lines += ["", "memory (one arena of intermediates per space)"]
    if data["memory"]:
        rows = [["space", "tensors", "planned", "naive sum", "lower bound", "planned/lower"]]
        rows += [[m["space"], str(m["tensors"]), format_bytes(m["planned_bytes"]),
                  format_bytes(m["naive_bytes"]), format_bytes(m["lower_bound_bytes"]),
                  f"{m['ratio']:.3f}"] for m in data["memory"]]
        lines += _table(rows)
    else:
        lines.append("  none")
    lines += ["", "composites (pattern matches, accepted by the pattern's check, placed whole)"]
    if data["composites"]:
        rows = [["backend", "pattern", "matched", "accepted", "placed"]]
        rows += [[c["backend"], c["pattern"], str(c["matched"]), str(c["accepted"]), str(c["placed"])]
                 for c in data["composites"]]
        lines += _table(rows)
        lines += [f"  {c['backend']} {c['pattern']}: {n} refused: {why}"
                  for c in data["composites"] for why, n in c["refused"].items()]
    else:
        lines.append("  none: no selected backend declares a pattern")
    if data["estimate_problems"]:
        lines += ["", "estimates that failed (those regions are costed as unknown)"]
        lines += [f"  {e['region']} ({e['backend']}): {e['problem']}" for e in data["estimate_problems"]]
    moved = data["not_preferred"]
    lines += ["", f"not on the preferred backend ({names[0]}): {len(moved)} node(s)"]
    lines += _groups(data["not_preferred_groups"])
    return "\n".join(lines)


def _groups(groups: list[dict[str, Any]]) -> list[str]:
    """One line per group of one node; a count line and a folded names line otherwise."""
    lines = []
    for g in groups:
        if g["count"] == 1:
            lines.append(f"  {g['nodes'][0]} ({next(iter(g['ops']))}) -> {g['backend']}: {g['reason']}")
            continue
        ops = ", ".join(g["ops"])
        lines.append(f"  {g['count']} nodes ({ops}) -> {g['backend']}: {g['reason']}")
        lines.append(f"    {fold(g['nodes'])}")
    return lines


def format_us(seconds: float) -> str:
    """Seconds in µs to three digits; "unknown" for an estimate a backend could not make."""
    return f"{seconds * 1e6:.3g} µs" if math.isfinite(seconds) else "unknown"


def _moves(transfers: list[Any]) -> str:
    if not transfers:
        return "-"
    total = sum(t.nbytes for t in transfers)
    return f"{len(transfers)} ({format_bytes(total)}, {format_us(sum(t.est_seconds for t in transfers))})"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
