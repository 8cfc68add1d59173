"""The end of ``hetero tune``: an HTML page with one SVG plot per task of best-so-far
GFLOP/s against trials (drawn here: no plotting dependency), and a table of default
against the chosen schedule's medians."""

from __future__ import annotations

import html
from collections.abc import Sequence

from hetero.core.schedule.tune.search import TaskResult
from hetero.core.schedule.tune.tuner import gflops

#: Plot size in pixels, and the margin for the axes' labels.
WIDTH, HEIGHT, MARGIN = 480, 220, 40


def svg_plot(result: TaskResult) -> str:
    """Best-so-far GFLOP/s (y) against trial number (x, the default at 0) as SVG."""
    curve = [gflops(s, result.task) or 0.0 for s in result.best_so_far()]
    top = max(curve, default=0.0) or 1.0
    span = max(len(curve) - 1, 1)

    def x(i: int) -> float:
        return MARGIN + (WIDTH - 2 * MARGIN) * i / span

    def y(v: float) -> float:
        return HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * v / top

    points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(curve))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}">'
            f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>'
            f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>'
            f'<text x="{WIDTH / 2}" y="{HEIGHT - 8}" text-anchor="middle" font-size="12">trials ({span})</text>'
            f'<text x="4" y="{MARGIN - 8}" font-size="12">{top:.1f} GFLOP/s</text>'
            f'<polyline fill="none" stroke="steelblue" stroke-width="2" points="{points}"/></svg>')


def html_report(results: Sequence[TaskResult], title: str) -> str:
    """The page: per task its label, default and chosen medians, and its plot."""
    rows = []
    for r in results:
        chosen = r.chosen
        default = r.median_seconds(r.trials[0].point) if r.trials else None
        gain = f"{default / chosen[1]:.2f}x" if chosen and default else "-"
        rows.append(f"<h2>{html.escape(r.task.label)}</h2><p>x{r.task.occurrences}; default "
                    f"{_ms(default)}, chosen {_ms(chosen[1] if chosen else None)} ({gain}; medians) after "
                    f"{len(r.trials) - 1} trials</p>{svg_plot(r)}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1>{''.join(rows)}</body></html>\n")


def _ms(seconds: float | None) -> str:
    return "failed" if seconds is None else f"{seconds * 1e3:.3f} ms"
