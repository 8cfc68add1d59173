"""The partition report as one self-contained HTML page.

:func:`to_html` says what the text report says (coverage, regions, transfers, the
memory plan, the composite patterns matched, failed estimates, and why nodes left
their preferred backend, grouped by reason) with the regions coloured by backend,
and adds an inline SVG sketch: one lane per backend, the regions left to right in
execution order, each as wide as its share of the nodes. Long lists of names wrap
inside their column, and a list longer than :data:`~hetero.core.partition.report.SHOWN_NAMES`
shows its first names with the rest folded into a ``<details>`` element. The page has
its CSS inline and loads nothing: it opens from a file, offline, without JavaScript.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from hetero.core.memory.hierarchy import format_bytes
from hetero.core.partition.dot import backend_colors
from hetero.core.partition.report import SHOWN_NAMES, describe, format_us

if TYPE_CHECKING:
    from hetero.core.partition.partition import Partition

_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #666;
          vertical-align: middle; margin-right: 0.3em; }
.names { max-width: 40em; font-size: 0.85em; color: #444; overflow-wrap: anywhere;
         word-break: break-word; white-space: normal; }
details.names summary { cursor: pointer; }
"""

_LANE = 28
_WIDTH = 960
_LABEL = 110


def to_html(part: Partition) -> str:
    """The partition report as a complete HTML document (a string)."""
    data = describe(part)
    colors = backend_colors(part)
    title = f"Partition of {data['graph']}"
    body = [
        f"<h1>{escape(title)}</h1>",
        (f"<p>{len(part.graph.nodes)} nodes in {len(part.regions)} region(s) over "
         f"{escape(', '.join(data['targets']))}; policy {escape(data['policy'])}, fallback "
         f"{escape(data['fallback'] or 'none')}. Estimated {format_us(data['est_compute_seconds'])} compute + "
         f"{format_us(data['est_transfer_seconds'])} transfers.</p>"),
        "<p>" + " ".join(f"{_swatch(colors[b])}{escape(b)}" for b in colors) + "</p>",
        "<h2>Regions in execution order</h2>",
        _sketch(part, colors),
        "<h2>Coverage</h2>",
        "<p>Nodes each backend takes, out of the nodes of the op, and where they were placed.</p>",
        _coverage(data),
        "<h2>Regions</h2>",
        _regions(data, colors),
        "<h2>Transfers</h2>",
        _transfers(data),
        "<h2>Memory</h2>",
        "<p>One arena of intermediates per memory space.</p>",
        _memory(data),
        "<h2>Composites</h2>",
        "<p>Pattern matches, accepted by the pattern's check, and placed whole.</p>",
        _composites(data),
        *_estimate_problems(data),
        f"<h2>Not on the preferred backend ({len(data['not_preferred'])} node(s))</h2>",
        _moved(data),
    ]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        *body,
        "</body>",
        "</html>",
    ]) + "\n"


def _sketch(part: Partition, colors: dict[str, str]) -> str:
    """Lanes per backend, regions left to right in execution order, width by node count."""
    lanes = {b: i for i, b in enumerate(colors)}
    total = max(sum(len(r.nodes) for r in part.regions), 1)
    scale = (_WIDTH - _LABEL) / total
    height = _LANE * len(lanes) + 24
    parts = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
              f'viewBox="0 0 {_WIDTH} {height}" role="img" aria-label="regions by backend">')]
    for backend, lane in lanes.items():
        y = lane * _LANE
        parts.append(f'<text x="4" y="{y + 18}" font-size="12">{escape(backend)}</text>')
        parts.append(f'<line x1="{_LABEL}" y1="{y + _LANE}" x2="{_WIDTH}" y2="{y + _LANE}" '
                     'stroke="#ddd"/>')
    x = float(_LABEL)
    for r in part.regions:
        w = len(r.nodes) * scale
        y = lanes[r.backend] * _LANE + 3
        tip = (f"{r.name} on {r.backend}: {len(r.nodes)} node(s), "
               f"{format_us(part.estimates[r.name])}, {len(part.transfers_in(r))} transfer(s) in")
        parts.append(f'<g><title>{escape(tip)}</title><rect x="{x:.1f}" y="{y}" '
                     f'width="{max(w, 1.0):.1f}" height="{_LANE - 6}" fill="{colors[r.backend]}" '
                     'stroke="#333" stroke-width="0.5"/></g>')
        if w >= 22:
            parts.append(f'<text x="{x + 3:.1f}" y="{y + 15}" font-size="10">{escape(r.name)}</text>')
        x += w
    parts.append(f'<text x="{_LABEL}" y="{height - 6}" font-size="10" fill="#666">'
                 "execution order, left to right; width proportional to node count</text>")
    parts.append("</svg>")
    return "\n".join(parts)


def _coverage(data: dict[str, Any]) -> str:
    names = data["targets"]
    rows = [["op", "nodes", *names, "placed"]]
    for op, row in data["coverage"].items():
        placed = ", ".join(f"{b} {n}" for b, n in row["placed"].items())
        rows.append([op, row["nodes"], *(f"{row['supported'][b]}/{row['nodes']}" for b in names),
                     placed])
    return _table(rows)


def _regions(data: dict[str, Any], colors: dict[str, str]) -> str:
    lines = ["<table>", _head(["region", "backend", "nodes", "estimate", "inputs", "outputs",
                              "transfers in", "transfers out", "node names"])]
    for r in data["regions"]:
        color = colors[r["backend"]]
        cells = [
            f'<td style="background: {color}">{escape(r["name"])}</td>',
            f"<td>{_swatch(color)}{escape(r['backend'])}</td>",
            f'<td class="num">{len(r["nodes"])}</td>',
            f'<td class="num">{format_us(r["est_seconds"])}</td>',
            _names(r["inputs"]),
            _names(r["outputs"]),
            _names(r["transfers_in"]),
            _names(r["transfers_out"]),
            _names(r["nodes"]),
        ]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _transfers(data: dict[str, Any]) -> str:
    if not data["transfers"]:
        return "<p>none</p>"
    rows = [["value", "from", "to", "bytes", "estimate"]]
    rows += [[t["value"], f"{t['from']} ({t['src_region'] or 'input'})",
              f"{t['to']} ({t['dst_region'] or 'output'})", format_bytes(t["nbytes"]),
              format_us(t["est_seconds"])] for t in data["transfers"]]
    return _table(rows)


def _memory(data: dict[str, Any]) -> str:
    if not data["memory"]:
        return "<p>none</p>"
    rows = [["space", "tensors", "planned", "naive sum", "lower bound", "planned/lower"]]
    rows += [[m["space"], m["tensors"], format_bytes(m["planned_bytes"]), format_bytes(m["naive_bytes"]),
              format_bytes(m["lower_bound_bytes"]), f"{m['ratio']:.3f}"] for m in data["memory"]]
    return _table(rows)


def _composites(data: dict[str, Any]) -> str:
    if not data["composites"]:
        return "<p>none: no selected backend declares a pattern</p>"
    rows = [["backend", "pattern", "matched", "accepted", "placed", "refused"]]
    rows += [[c["backend"], c["pattern"], c["matched"], c["accepted"], c["placed"],
              "; ".join(f"{n}: {why}" for why, n in c["refused"].items()) or "-"]
             for c in data["composites"]]
    return _table(rows)


def _estimate_problems(data: dict[str, Any]) -> list[str]:
    if not data["estimate_problems"]:
        return []
    rows = [["region", "backend", "problem"]]
    rows += [[e["region"], e["backend"], e["problem"]] for e in data["estimate_problems"]]
    return ["<h2>Estimates that failed</h2>",
            "<p>Those regions are costed as unknown.</p>", _table(rows)]


def _moved(data: dict[str, Any]) -> str:
    if not data["not_preferred"]:
        return "<p>none: every node is on its preferred backend</p>"
    lines = ["<table>", _head(["nodes", "ops", "placed on", "preferred", "reason", "node names"])]
    for g in data["not_preferred_groups"]:
        cells = [_cell(g["count"]), _cell(", ".join(g["ops"])), _cell(g["backend"]),
                 _cell(g["preferred"]), _cell(g["reason"]), _names(g["nodes"])]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _names(names: list[str]) -> str:
    """A cell of names that wraps in its column; past SHOWN_NAMES the rest fold away."""
    if not names:
        return '<td class="names">-</td>'
    if len(names) <= SHOWN_NAMES:
        return f'<td><div class="names">{escape(", ".join(names))}</div></td>'
    head = escape(", ".join(names[:SHOWN_NAMES]))
    return (f'<td><details class="names"><summary>{head} and {len(names) - SHOWN_NAMES} more'
            f'</summary>{escape(", ".join(names))}</details></td>')


def _table(rows: list[list[Any]]) -> str:
    lines = ["<table>", _head(rows[0])]
    lines += ["<tr>" + "".join(_cell(c) for c in row) + "</tr>" for row in rows[1:]]
    lines.append("</table>")
    return "\n".join(lines)


def _head(cells: list[Any]) -> str:
    return "<tr>" + "".join(f"<th>{escape(str(c))}</th>" for c in cells) + "</tr>"


def _cell(value: Any) -> str:
    if isinstance(value, int):
        return f'<td class="num">{value}</td>'
    return f"<td>{escape(str(value))}</td>"


def _swatch(color: str) -> str:
    return f'<span class="swatch" style="background: {color}"></span>'

