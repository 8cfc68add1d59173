"""The partition report as one self-contained HTML page.

:func:`to_html` says what the text report says (coverage, regions, transfers, and
why nodes left their preferred backend) with the regions coloured by backend, and
adds an inline SVG sketch: one lane per backend, the regions left to right in
execution order, each as wide as its share of the nodes. The page has its CSS
inline and loads nothing: it opens from a file, offline, without JavaScript.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

from hetero.core.memory.hierarchy import format_bytes
from hetero.core.partition.dot import backend_colors
from hetero.core.partition.report import describe

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
.nodes { max-width: 40em; font-size: 0.85em; color: #444; }
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
         f"{escape(data['fallback'])}. Estimated {_us(data['est_compute_seconds'])} compute + "
         f"{_us(data['est_transfer_seconds'])} transfers.</p>"),
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
               f"{_us(part.estimates[r.name])}, {len(part.transfers_in(r))} transfer(s) in")
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
            f'<td class="num">{_us(r["est_seconds"])}</td>',
            _cell(", ".join(r["inputs"])),
            _cell(", ".join(r["outputs"])),
            _cell(", ".join(r["transfers_in"]) or "-"),
            _cell(", ".join(r["transfers_out"]) or "-"),
            f'<td class="nodes">{escape(", ".join(r["nodes"]))}</td>',
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
              _us(t["est_seconds"])] for t in data["transfers"]]
    return _table(rows)


def _moved(data: dict[str, Any]) -> str:
    if not data["not_preferred"]:
        return "<p>none: every node is on its preferred backend</p>"
    rows = [["node", "op", "placed on", "preferred", "reason"]]
    rows += [[m["node"], m["op"], m["backend"], m["preferred"], m["reason"]]
             for m in data["not_preferred"]]
    return _table(rows)


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


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs"
