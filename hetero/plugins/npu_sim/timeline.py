"""An npu_sim run's execution timeline as one self-contained HTML page.

:func:`to_html` draws an inline SVG with one lane per engine (load, compute,
store): each instruction is a rect from its start to its end cycle, coloured by
the layer (graph node) it belongs to, with a hover ``<title>`` giving its
assembly text. A large program (ResNet-50 has ~10^5 instructions) would make a
page of tens of MB, so :func:`merge_entries` first joins consecutive instructions
of one engine and one layer whose gap is under a pixel: the drawing is exact at
the resolution it is drawn at, and the page stays small. An axis shows cycles and
µs at the declared clock; below it, a table gives the per-layer figures of the
:class:`~hetero.plugins.npu_sim.report.NpuReport`. Nothing is loaded and no
script runs: the page opens from a file, offline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from hetero.plugin import format_bytes
from hetero.plugins.npu_sim.cycles import TimelineEntry
from hetero.plugins.npu_sim.isa import Engine
from hetero.plugins.npu_sim.report import UNTAGGED, NpuReport

_CSS = """
body { font-family: Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border: 1px solid #666;
          vertical-align: middle; margin-right: 0.3em; }
.scroll { overflow-x: auto; }
"""

_LANE = 34
_LABEL = 80
_AXIS = 40


@dataclass(frozen=True)
class Span:
    """One drawn rect: ``count`` consecutive instructions of ``engine`` for layer ``tag``."""

    engine: str
    tag: str
    start: int
    end: int
    count: int
    busy: int
    first: str
    last: str


def merge_entries(entries: Sequence[TimelineEntry], max_gap: int) -> list[Span]:
    """Join each engine's consecutive entries of one tag while the idle gap between them is under ``max_gap`` cycles."""
    spans: list[Span] = []
    open_: dict[str, Span] = {}
    for e in entries:
        tag = e.tag or UNTAGGED
        cur = open_.get(e.engine)
        if cur is not None and cur.tag == tag and e.start - cur.end < max_gap:
            open_[e.engine] = Span(e.engine, tag, cur.start, max(cur.end, e.end), cur.count + 1,
                                   cur.busy + e.end - e.start, cur.first, e.text)
            continue
        if cur is not None:
            spans.append(cur)
        open_[e.engine] = Span(e.engine, tag, e.start, e.end, 1, e.end - e.start, e.text, e.text)
    spans.extend(open_.values())
    return sorted(spans, key=lambda s: (s.engine, s.start))


def layer_colors(tags: Sequence[str]) -> dict[str, str]:
    """A colour per layer, in first-seen order: hues a golden angle apart, so neighbours differ."""
    colors: dict[str, str] = {}
    for tag in tags:
        if tag not in colors:
            colors[tag] = "#bbbbbb" if tag == UNTAGGED else f"hsl({len(colors) * 137.508 % 360:.1f}, 65%, 55%)"
    return colors


def to_html(report: NpuReport, entries: Sequence[TimelineEntry], *, title: str = "npu_sim timeline",
            width: int = 1600) -> str:
    """The timeline of a run (its ``report`` and its timeline ``entries``) as a complete HTML document."""
    total = max(report.cycles, 1)
    scale = (width - _LABEL) / total
    spans = merge_entries(entries, max_gap=max(1, math.ceil(1 / scale)))
    colors = layer_colors([e.tag or UNTAGGED for e in entries])
    rows, cols = report.array
    body = [
        f"<h1>{escape(title)}</h1>",
        (f"<p>{rows}×{cols} matrix unit at {report.clock_ghz:g} GHz: {report.cycles} cycles = "
         f"{_us(report.cycles, report.clock_ghz)}; utilisation {report.utilisation:.1%}; "
         f"DMA {escape(format_bytes(report.dma_bytes))}; roofline bound {report.roofline_cycles} cycles "
         f"(simulated / roofline {report.roofline_ratio:.2f}). {len(entries)} instructions drawn as "
         f"{len(spans)} rects (an engine's consecutive instructions of one layer are joined where "
         f"they are less than a pixel apart).</p>"),
        '<div class="scroll">',
        _svg(spans, colors, report, scale, width),
        "</div>",
        "<h2>Layers</h2>",
        _layers(report, colors),
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


def _svg(spans: list[Span], colors: dict[str, str], report: NpuReport, scale: float, width: int) -> str:
    lanes = [e.value for e in Engine]
    height = _LANE * len(lanes) + _AXIS
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="instructions per engine over cycles">')]
    for i, lane in enumerate(lanes):
        y = i * _LANE
        out.append(f'<g class="lane" id="lane-{lane}"><text x="4" y="{y + 21}" font-size="12">{lane}</text>'
                   f'<line x1="{_LABEL}" y1="{y + _LANE}" x2="{width}" y2="{y + _LANE}" stroke="#ddd"/></g>')
    for s in spans:
        y = lanes.index(s.engine) * _LANE + 4
        x = _LABEL + s.start * scale
        w = max((s.end - s.start) * scale, 0.5)
        if s.count == 1:
            tip = f"{s.tag}: {s.first} (cycles {s.start}-{s.end})"
        else:
            tip = (f"{s.tag}: {s.count} instructions, cycles {s.start}-{s.end}, busy {s.busy}; "
                   f"first {s.first}; last {s.last}")
        out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{_LANE - 8}" '
                   f'fill="{colors[s.tag]}"><title>{escape(tip)}</title></rect>')
    out.extend(_axis(report, scale, width, _LANE * len(lanes)))
    out.append("</svg>")
    return "\n".join(out)


def _axis(report: NpuReport, scale: float, width: int, y: int) -> list[str]:
    """Ticks at a 1-2-5 step in cycles, each labelled in cycles and µs."""
    total = max(report.cycles, 1)
    raw = total / 8
    base = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = next((m * base for m in (1, 2, 5, 10) if m * base >= raw), 10 * base)
    out = [f'<line x1="{_LABEL}" y1="{y}" x2="{width}" y2="{y}" stroke="#666"/>']
    tick = 0
    while tick <= total:
        x = _LABEL + tick * scale
        out.append(f'<line x1="{x:.2f}" y1="{y}" x2="{x:.2f}" y2="{y + 5}" stroke="#666"/>')
        out.append(f'<text x="{x + 2:.2f}" y="{y + 17}" font-size="10">{tick}</text>')
        out.append(f'<text x="{x + 2:.2f}" y="{y + 30}" font-size="10" fill="#666">'
                   f'{escape(_us(tick, report.clock_ghz))}</text>')
        tick += step
    return out


def _layers(report: NpuReport, colors: dict[str, str]) -> str:
    heads = ("layer", "op", "start", "cycles", "µs", "load", "compute", "store", "MACs", "utilisation", "DMA")
    lines = ["<table>", "<tr>" + "".join(f"<th>{h}</th>" for h in heads) + "</tr>"]
    for f in report.layers:
        swatch = f'<span class="swatch" style="background: {colors.get(f.tag, "#fff")}"></span>'
        cells = [f"<td>{swatch}{escape(f.tag)}</td>", f"<td>{escape(f.op)}</td>"]
        nums = [f.start, f.cycles, f"{f.cycles / (report.clock_ghz * 1e3):.2f}", f.busy["load"],
                f.busy["compute"], f.busy["store"], f.macs, f"{f.utilisation:.1%}", format_bytes(f.dma_bytes)]
        cells += [f'<td class="num">{escape(str(n))}</td>' for n in nums]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _us(cycles: int, clock_ghz: float) -> str:
    us = cycles / (clock_ghz * 1e3)
    return f"{us:.4g} µs" if us < 1e4 else f"{us / 1e3:.4g} ms"
