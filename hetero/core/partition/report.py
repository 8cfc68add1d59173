"""The partition report: a text form for people and a dict (JSON) form for tools.

Both say the same things in a stable order: the ops × backends coverage, every region
(backend, nodes, estimated time, transfers in and out), every transfer, the memory
plan of each space, and every node that did not land on its preferred backend, with
the reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hetero.core.memory.hierarchy import format_bytes

if TYPE_CHECKING:
    from hetero.core.partition.partition import Partition


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
        "not_preferred": [
            {"node": c.node, "op": c.op, "backend": c.backend, "preferred": c.preferred,
             "reason": c.reason}
            for c in assignment.moved()
        ],
    }


def format_report(part: Partition) -> str:
    """The report as text, one section per concern."""
    data = describe(part)
    names = data["targets"]
    lines = [
        (f"partition of {data['graph']}: {len(part.graph.nodes)} nodes in {len(part.regions)} "
         f"region(s) over {', '.join(names)}; policy {data['policy']}, fallback {data['fallback']}"),
        (f"estimated {_us(data['est_compute_seconds'])} compute + "
         f"{_us(data['est_transfer_seconds'])} transfers"),
        "",
        "coverage (nodes each backend takes / nodes of the op)",
    ]
    rows = [["op", "nodes", *names, "placed"]]
    for op, row in data["coverage"].items():
        placed = ", ".join(f"{b} {n}" for b, n in row["placed"].items())
        rows.append([op, str(row["nodes"]), *(f"{row['supported'][b]}/{row['nodes']}" for b in names),
                     placed])
    lines += _table(rows)
    lines += ["", "regions (in execution order)"]
    rows = [["region", "backend", "nodes", "estimate", "in", "out"]]
    for r in part.regions:
        rows.append([r.name, r.backend, str(len(r.nodes)), _us(part.estimates[r.name]),
                     _moves(part.transfers_in(r)), _moves(part.transfers_out(r))])
    lines += _table(rows)
    lines += ["", "transfers"]
    if part.transfers:
        rows = [["value", "from", "to", "bytes", "estimate"]]
        rows += [[t.value, f"{t.src_backend} ({t.src_region or 'input'})",
                  f"{t.dst_backend} ({t.dst_region or 'output'})", format_bytes(t.nbytes),
                  _us(t.est_seconds)] for t in part.transfers]
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
    moved = data["not_preferred"]
    lines += ["", f"not on the preferred backend ({names[0]}): {len(moved)} node(s)"]
    lines += [f"  {m['node']} ({m['op']}) -> {m['backend']}: {m['reason']}" for m in moved]
    return "\n".join(lines)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"


def _moves(transfers: list[Any]) -> str:
    if not transfers:
        return "-"
    total = sum(t.nbytes for t in transfers)
    return f"{len(transfers)} ({format_bytes(total)}, {_us(sum(t.est_seconds for t in transfers))})"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
