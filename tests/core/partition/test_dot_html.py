"""to_dot() and to_html(), and `hetero partition --format dot|html --output FILE`.

The DOT is checked by a small tokenizer (balanced braces, statements well formed,
every edge end a defined node) and, where the ``dot`` binary exists, rendered too;
the HTML is parsed with ``html.parser``, which must find every element closed in
order and no external reference, and where Chromium is installed it is opened
headless: the browser's DOM and a screenshot show the page builds and paints.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest
from toyplugin import ToyBackend, plugin_source, run_hetero, write_distribution

import hetero
from hetero import GraphBuilder
from hetero.core.frontend.light import resolve_model
from hetero.core.ir.pattern import Op, Var
from hetero.core.memory import format_bytes
from hetero.core.partition import partition_graph
from hetero.core.partition.dot import FALLBACK_COLOR, PALETTE, TRANSFER_COLOR, to_dot
from hetero.core.partition.html import to_html
from hetero.core.plugin import Pattern, get_backend

_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|(->|[{}\[\];,=])|([A-Za-z_0-9.#]+))', re.DOTALL)


def dot_check(text: str) -> tuple[set[str], list[tuple[str, str, str]]]:
    """Tokenize DOT; check braces balance and edges join defined nodes.

    Returns the defined node ids and the edges as (src, dst, attribute text).
    """
    tokens, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        assert m, f"DOT does not tokenize at {text[pos:pos + 40]!r}"
        tokens.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    depth = 0
    for t in tokens:
        depth += {"{": 1, "}": -1}.get(t, 0)
        assert depth >= 0, "a } closes nothing"
    assert depth == 0, "unbalanced braces"
    assert tokens[:3] == ["digraph", tokens[1], "{"] and tokens[-1] == "}"
    defined = {m.group(1) for m in re.finditer(r"^\s+(\w+) \[label=", text, re.MULTILINE)}
    edges = [(m.group(1), m.group(2), m.group(3) or "")
             for m in re.finditer(r"^\s+(\w+) -> (\w+)(?: \[(.*)\])?;$", text, re.MULTILINE)]
    for src, dst, _ in edges:
        assert src in defined and dst in defined, f"edge {src} -> {dst} names an undefined node"
    return defined, edges


class _Checker(HTMLParser):
    VOID: ClassVar[set[str]] = {"meta", "br", "img", "hr", "link", "input", "rect", "line"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.text: list[str] = []
        self.tags: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)
        self.links += [v for k, v in attrs if k in ("src", "href") and v]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def html_check(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.stack == [], f"unclosed elements {checker.stack}"
    assert page.startswith("<!DOCTYPE html>")
    assert checker.links == [] and "url(" not in page and "<script" not in page
    return checker


def diamond_partition(site):
    site.install("hetero-acc", "1.0", {"acc": plugin_source("acc", ops=("Relu", "Add"))})
    site.load()
    b = GraphBuilder("diamond")
    x = b.input("x", (1, 256))
    a = b.Relu(x, name="A")
    b.output(b.Add(b.Neg(a, name="B"), b.Relu(a, name="C"), name="D"))
    return partition_graph(b.build(), [get_backend("acc"), get_backend("llvm_cpu")], min_ratio=0)


def test_dot_has_a_cluster_per_region_coloured_by_backend_and_red_transfers(site) -> None:
    part = diamond_partition(site)
    text = to_dot(part)
    defined, edges = dot_check(text)
    assert {"n0", "n1", "n2", "n3", "in0", "out0", "legend0", "legend1"} <= defined
    for r in part.regions:
        assert f"subgraph cluster_{r.name} {{" in text
    assert 'label="r0 · acc · 2 node(s) · ' in text
    assert f'legend0 [label="acc", fillcolor="{PALETTE[0]}"];' in text
    assert f'legend1 [label="llvm_cpu (fallback)", fillcolor="{FALLBACK_COLOR}"];' in text
    assert f'n0 [label="A\\nRelu", fillcolor="{PALETTE[0]}"];' in text
    crossing = {(s, d) for s, d, attrs in edges if TRANSFER_COLOR in attrs}
    # x comes from the host to acc, A goes to the CPU's B and B's result back to D on acc,
    # and D's result returns to the host; A -> C stays inside acc.
    assert crossing == {("in0", "n0"), ("n0", "n1"), ("n1", "n3"), ("n3", "out0")}
    assert ("n0", "n2", "") in edges
    assert 'label="A\\n1 KiB"' in text


def test_html_is_well_formed_self_contained_and_says_what_the_report_says(site) -> None:
    part = diamond_partition(site)
    page = to_html(part)
    checker = html_check(page)
    text = " ".join(checker.text)
    assert "Partition of diamond" in text
    for heading in ("Regions in execution order", "Coverage", "Regions", "Transfers",
                    "Not on the preferred backend (1 node(s))"):
        assert heading in checker.text
    assert "acc does not implement Neg" in text
    assert checker.tags.count("svg") == 1 and checker.tags.count("rect") == len(part.regions)
    assert f'<td style="background: {PALETTE[0]}">r0</td>' in page
    assert f'<td style="background: {FALLBACK_COLOR}">r1</td>' in page
    assert "<style>" in page and "<link" not in page



def test_html_groups_reasons_folds_long_lists_and_shows_memory_composites_and_failed_estimates() -> None:
    class Blind(ToyBackend):
        def estimate(self, subgraph, target):  # noqa: ANN001, ANN201 - a cost model that fails
            raise RuntimeError("no cost model")

    acc = Blind("acc", ops=("Relu",))
    acc.patterns = (Pattern("relu_relu", Op("Relu", Op("Relu", Var("x")))),)
    b = GraphBuilder("g")
    v = b.input("x", (1, 64))
    for i in range(12):
        v = b.Neg(v, name=f"neg{i}")
    b.output(b.Relu(b.Relu(v, name="r1"), name="r2"))
    part = partition_graph(b.build(), [acc, ToyBackend("cpu", ops=("Relu", "Neg"))], fallback="cpu",
                           min_ratio=0)
    page = to_html(part)
    checker = html_check(page)
    text = " ".join(checker.text)
    for heading in ("Memory", "Composites", "Estimates that failed",
                    "Not on the preferred backend (12 node(s))"):
        assert heading in checker.text
    # The memory table holds the text report's numbers.
    for m in part.to_dict()["memory"]:
        assert (f"<tr><td>{m['space']}</td><td class=\"num\">{m['tensors']}</td><td>"
                f"{format_bytes(m['planned_bytes'])}</td><td>{format_bytes(m['naive_bytes'])}</td><td>"
                f"{format_bytes(m['lower_bound_bytes'])}</td><td>{m['ratio']:.3f}</td></tr>") in page
    assert "<td>acc</td><td>relu_relu</td><td class=\"num\">1</td>" in page
    assert "acc.estimate() raised RuntimeError: no cost model" in text
    # One row for the twelve Negs, their names wrapping in a folded list.
    assert page.count("acc does not implement Neg") == 1
    assert ('<td><details class="names"><summary>neg0, neg1, neg2, neg3, neg4 and 7 more</summary>'
            + ", ".join(f"neg{i}" for i in range(12)) + "</details></td>") in page
    css = page[page.index("<style>"):page.index("</style>")]
    assert re.search(r"\.names \{[^}]*overflow-wrap: anywhere", css)


def resnet50_partition(site):
    site.install("hetero-cr", "1.0", {"cr": plugin_source("conv_relu", ops=("Conv", "Relu"))})
    site.load()
    graph = hetero.optimize(hetero.load_onnx(resolve_model("light:resnet50")))
    return graph, partition_graph(graph, [get_backend("conv_relu"), get_backend("llvm_cpu")])


def test_resnet50_dot_and_html_are_written_and_valid(site, tmp_path: Path) -> None:
    graph, part = resnet50_partition(site)
    dot_path, html_path = tmp_path / "resnet50.dot", tmp_path / "resnet50.html"
    dot_path.write_text(to_dot(part), encoding="utf-8")
    html_path.write_text(to_html(part), encoding="utf-8")

    defined, edges = dot_check(dot_path.read_text(encoding="utf-8"))
    assert {f"n{i}" for i in range(len(graph.nodes))} <= defined
    assert len([e for e in edges if TRANSFER_COLOR in e[2]]) >= len(part.transfers)
    if shutil.which("dot"):
        subprocess.run(["dot", "-Tsvg", str(dot_path), "-o", str(tmp_path / "r.svg")], check=True)

    checker = html_check(html_path.read_text(encoding="utf-8"))
    assert checker.tags.count("rect") == len(part.regions)
    text = " ".join(checker.text)
    assert all(r.name in checker.text for r in part.regions)
    assert "conv_relu does not implement Add" in text


@pytest.fixture(scope="module")
def cli_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("site")
    write_distribution(path, "hetero-cr", "1.0", {"cr": "dot_html_cli_plugin"},
                       {"dot_html_cli_plugin": plugin_source("conv_relu", ops=("Conv", "Relu"))})
    return path


def hetero_partition(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_hetero(site, "partition", "light:squeezenet", "--targets", "conv_relu", *args)


def test_cli_writes_dot_to_a_file_and_prints_html(cli_site: Path, tmp_path: Path) -> None:
    out = tmp_path / "squeezenet.dot"
    done = hetero_partition(cli_site, "--format", "dot", "--output", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"wrote the dot report of squeezenet_old to {out}\n"
    defined, _ = dot_check(out.read_text(encoding="utf-8"))
    assert {f"n{i}" for i in range(67)} <= defined
    page = hetero_partition(cli_site, "--format", "html")
    assert page.returncode == 0, page.stderr
    assert "conv_relu does not implement Concat" in " ".join(html_check(page.stdout).text)


def test_cli_output_to_an_unwritable_place_is_a_clear_error(cli_site: Path, tmp_path: Path) -> None:
    done = hetero_partition(cli_site, "--format", "html", "--output", str(tmp_path / "no" / "p.html"))
    assert done.returncode == 2
    # One line, naming the flag and the missing folder (checked before partitioning).
    assert done.stderr == (f"hetero partition: error: --output {tmp_path / 'no' / 'p.html'}: "
                           f"the folder {tmp_path / 'no'} does not exist\n")


def _chromium() -> str | None:
    return next((path for name in ("chromium", "chromium-browser", "google-chrome")
                 if (path := shutil.which(name))), None)


def _headless(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    # Headless Chromium can hang on a broken display setup; the bound only ends such a
    # hang, and is far above what a loaded machine needs for one page.
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", *args],
                          capture_output=True, text=True, timeout=900, check=True)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


#: Run in the page once it has laid out: what a person would see wrong, as JSON in the DOM.
_LAYOUT_CHECK = """<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const visible = (el) => {
    const box = el.getBoundingClientRect(), style = getComputedStyle(el);
    return box.width > 0 && box.height > 0 && style.display !== "none" && style.visibility !== "hidden";
  };
  const result = {width: width, pageWidth: document.documentElement.scrollWidth, clipped: [],
                  offPage: [], tables: {}, regionCells: []};
  for (const el of document.body.querySelectorAll("*")) {
    const style = getComputedStyle(el);
    if (["hidden", "clip"].includes(style.overflowX) && el.scrollWidth > el.clientWidth + 1)
      result.clipped.push(el.tagName + ":" + el.textContent.slice(0, 40));
    if (el.getBoundingClientRect().right > width + 1)
      result.offPage.push(el.tagName + ":" + el.textContent.slice(0, 40));
  }
  for (const h2 of document.querySelectorAll("h2")) {
    let next = h2.nextElementSibling;
    while (next && next.tagName === "P") next = next.nextElementSibling;
    if (next && next.tagName === "TABLE") {
      result.tables[h2.textContent] = {rows: next.rows.length, visible: visible(next)};
      if (h2.textContent === "Regions")
        for (const row of Array.from(next.rows).slice(1))
          result.regionCells.push([row.cells[0].textContent, visible(row.cells[0])]);
    }
  }
  const out = document.createElement("pre");
  out.id = "layout-check";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


@pytest.mark.skipif(_chromium() is None, reason="no Chromium here (Debian: apt-get install chromium; "
                                                  ".ci/run installs it)")
def test_the_html_report_lays_out_whole_in_a_browser(site, tmp_path: Path) -> None:
    """As a person opens it at a laptop's width: nothing runs off the page or is clipped,
    and every region row and the memory table are there to see."""
    browser = _chromium()
    _, part = resnet50_partition(site)
    page = tmp_path / "checked.html"
    page.write_text(to_html(part).replace("</body>", _LAYOUT_CHECK + "\n</body>"), encoding="utf-8")
    dom = _headless(browser, "--window-size=1280,1600", "--dump-dom", page.as_uri()).stdout
    found = json.loads(html.unescape(dom.split('<pre id="layout-check">')[1].split("</pre>")[0]))
    assert found["pageWidth"] <= found["width"], f"the page is wider than the window: {found['offPage'][:5]}"
    assert found["offPage"] == [] and found["clipped"] == []
    assert [name for name, _ in found["regionCells"]] == [r.name for r in part.regions]
    assert all(shown for _, shown in found["regionCells"])
    for title in ("Regions", "Memory", "Coverage"):
        assert found["tables"][title]["visible"] and found["tables"][title]["rows"] > 1, title


@pytest.mark.skipif(_chromium() is None, reason="no Chromium here (Debian: apt-get install chromium; "
                                                  ".ci/run installs it)")
def test_resnet50_html_opens_in_headless_chromium(site, tmp_path: Path) -> None:
    browser = _chromium()
    _, part = resnet50_partition(site)
    page = tmp_path / "resnet50.html"
    page.write_text(to_html(part), encoding="utf-8")
    # The DOM the browser built holds every region and the SVG sketch.
    dom = _headless(browser, "--dump-dom", page.as_uri()).stdout
    assert dom.count("<rect") == len(part.regions)
    assert all(f">{r.name}</td>" in dom for r in part.regions)
    # And it paints: the screenshot has the window's size and far more detail than a
    # blank page's (PNG compresses a white page to almost nothing).
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>", encoding="utf-8")
    shots = {}
    for name, url in (("page", page.as_uri()), ("blank", blank.as_uri())):
        shots[name] = tmp_path / f"{name}.png"
        _headless(browser, f"--screenshot={shots[name]}", "--window-size=1280,1600",
                  "--hide-scrollbars", url)
        assert _png_size(shots[name]) == (1280, 1600)
    assert shots["page"].stat().st_size > 10 * shots["blank"].stat().st_size
