"""The partition as a Graphviz picture: one cluster per region, coloured by backend.

:func:`to_dot` writes DOT text (render it with ``dot -Tsvg part.dot -o part.svg``).
Each region is a cluster labelled with its name, backend, node count and estimate;
each node is a box with its name and op; an edge that crosses memory spaces (a
value produced on one backend and read on another, graph inputs and outputs living
in the fallback's memory) is drawn thick and red with the bytes it moves. A legend
cluster maps colours to backends.

:func:`backend_colors` is the palette, shared with the HTML page so that a backend
has the same colour in both pictures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetero.core.memory.hierarchy import format_bytes
from hetero.core.partition.report import format_us

if TYPE_CHECKING:
    from hetero.core.partition.partition import Partition

#: Backend colours in the targets' order: eight hues a colour-blind reader can tell
#: apart (Okabe and Ito's palette, black left out for readability of labels).
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")
#: The fallback is always grey: it is where work goes when no accelerator takes it.
FALLBACK_COLOR = "#BBBBBB"
TRANSFER_COLOR = "#D62728"


def backend_colors(part: Partition) -> dict[str, str]:
    """A colour per selected backend: the palette in the targets' order, the fallback grey.

    The same targets in the same order always get the same colours.
    """
    colors: dict[str, str] = {}
    others = [n for n in part.assignment.annotation.names if n != part.assignment.fallback]
    for i, name in enumerate(others):
        colors[name] = PALETTE[i % len(PALETTE)]
    colors[part.assignment.fallback] = FALLBACK_COLOR
    return colors


def to_dot(part: Partition) -> str:
    """The partition as a Graphviz ``digraph``: clusters by region, transfers in red."""
    colors = backend_colors(part)
    fallback = part.assignment.fallback
    graph = part.graph
    node_id = {id(n): f"n{i}" for i, n in enumerate(graph.nodes)}
    backend_of = {id(n): r.backend for r in part.regions for n in r.nodes}
    estimate = sum(part.estimates.values())
    lines = [
        f"digraph {_quote(graph.name)} {{",
        f"  graph [rankdir=TB, fontname=Helvetica, labelloc=t, label={_quote(_title(part, estimate))}];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10];',
        '  edge [color="#555555", fontname=Helvetica, fontsize=9];',
        "  subgraph cluster_legend {",
        '    label="backends"; style=dashed; color="#888888";',
    ]
    for i, (name, color) in enumerate(colors.items()):
        role = " (fallback)" if name == fallback else ""
        lines.append(f"    legend{i} [label={_quote(name + role)}, fillcolor={_quote(color)}];")
    lines.append("  }")
    for r in part.regions:
        color = colors[r.backend]
        label = f"{r.name} · {r.backend} · {len(r.nodes)} node(s) · {format_us(part.estimates[r.name])}"
        lines += [
            f"  subgraph cluster_{r.name} {{",
            (f"    label={_quote(label)}; style=filled; color={_quote(color)}; "
             f"fillcolor={_quote(color + '33')};"),
        ]
        for n in r.nodes:
            lines.append(f"    {node_id[id(n)]} [label={_quote(n.name + chr(10) + n.op)}, "
                         f"fillcolor={_quote(color)}];")
        lines.append("  }")
    for i, v in enumerate(graph.inputs):
        lines.append(f"  in{i} [label={_quote(v.name + chr(10) + str(v.type))}, shape=ellipse, "
                     'style=filled, fillcolor="#FFFFFF"];')
    for i, v in enumerate(graph.outputs):
        lines.append(f"  out{i} [label={_quote(v.name + chr(10) + str(v.type))}, shape=ellipse, "
                     'style=filled, fillcolor="#FFFFFF"];')
    source = {id(v): (f"in{i}", part.assignment.home) for i, v in enumerate(graph.inputs)}
    for n in graph.nodes:
        for v in n.outputs:
            source[id(v)] = (node_id[id(n)], backend_of[id(n)])
    for n in graph.nodes:
        for v in n.inputs:
            if v is None or v.data is not None:
                continue
            src, src_backend = source[id(v)]
            lines.append(_edge(src, node_id[id(n)], v.name, v.type.nbytes,
                               src_backend != backend_of[id(n)]))
    for i, v in enumerate(graph.outputs):
        src, src_backend = source[id(v)]
        lines.append(_edge(src, f"out{i}", v.name, v.type.nbytes, src_backend != part.assignment.home))
    lines.append("}")
    return "\n".join(lines) + "\n"


def _edge(src: str, dst: str, value: str, nbytes: int, crosses: bool) -> str:
    if not crosses:
        return f"  {src} -> {dst};"
    label = f"{value}\n{format_bytes(nbytes)}"
    return (f"  {src} -> {dst} [color={_quote(TRANSFER_COLOR)}, penwidth=2.5, "
            f"fontcolor={_quote(TRANSFER_COLOR)}, label={_quote(label)}];")


def _title(part: Partition, estimate: float) -> str:
    moved = sum(t.nbytes for t in part.transfers)
    return (f"{part.graph.name}: {len(part.graph.nodes)} nodes in {len(part.regions)} region(s), "
            f"estimated {format_us(estimate)}; {len(part.transfers)} transfer(s) of {format_bytes(moved)}")



def _quote(text: str) -> str:
    """A DOT double-quoted string; newlines become DOT's centred line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'
