"""npu_sim's per-layer report, its HTML timeline, and their place in Executable.report()."""

from __future__ import annotations

import time
from html.parser import HTMLParser
from typing import ClassVar

import pytest
from plugins.npu_sim.npu_programs import int8_inputs, int8_net

import hetero
from hetero.core.ir.graph import Graph
from hetero.errors import HeteroError, OptionError, PluginError
from hetero.plugins.npu_sim.backend import NpuPart, NpuSimBackend
from hetero.plugins.npu_sim.cycles import TimelineEntry
from hetero.plugins.npu_sim.report import build_report, format_report, layer_work, roofline_cycles
from hetero.plugins.npu_sim.timeline import merge_entries
from hetero.core.plugin.target import bind

TINY = {"npu_preset": "tiny-64k"}


@pytest.fixture(scope="module")
def timed() -> tuple[Graph, NpuPart]:
    graph = int8_net(8, 16, 30, seed=3)
    part = bind(NpuSimBackend(), {**TINY, "npu_timeline": True}).compile(graph)
    part.run(int8_inputs(graph))
    return graph, part


def test_report_has_one_row_per_node_consistent_with_the_totals(timed: tuple[Graph, NpuPart]) -> None:
    graph, part = timed
    stats = part.last_stats
    report = build_report(part.program, part.config, stats, part.work)
    by_tag = {f.tag: f for f in report.layers}
    assert set(by_tag) == {n.name for n in graph.nodes}
    assert {t: f.op for t, f in by_tag.items()} == {n.name: n.op for n in graph.nodes}
    # Every instruction belongs to exactly one layer: per-engine busy cycles, MACs and DMA bytes add up.
    for engine, busy in stats.engine_busy.items():
        assert sum(f.busy[engine] for f in report.layers) == busy
    assert sum(f.issued_macs for f in report.layers) == stats.macs > 0
    # Work comes from the graph: the conv's and the matmul's MACs, as their ops count them.
    for node in graph.nodes:
        assert by_tag[node.name].macs == layer_work(node).macs
    assert by_tag["conv"].macs > 0 and by_tag["fc"].macs > 0
    assert report.macs == sum(f.macs for f in report.layers) <= report.issued_macs
    assert sum(f.dma_bytes for f in report.layers) == stats.dma_bytes
    assert sum(f.instrs for f in report.layers) == len(part.program.instrs)
    # Spans lie inside the run; the last one ends with it; together they cover it.
    assert all(0 <= f.start < f.end <= stats.cycles for f in report.layers)
    assert max(f.end for f in report.layers) == stats.cycles
    assert sum(f.cycles for f in report.layers) >= stats.cycles
    for name in ("conv", "fc"):
        util = by_tag[name].utilisation
        assert 0 < util <= 1
        assert util == pytest.approx(by_tag[name].macs / (by_tag[name].cycles * 8 * 8))
    assert by_tag["pool"].macs == 0 and by_tag["pool"].utilisation == 0
    assert report.seconds == pytest.approx(report.cycles / (part.config.clock_ghz * 1e9))
    assert 0 < report.utilisation <= 1
    # The model's roofline: per layer, MACs at peak or its compulsory bytes over DMA.
    assert report.roofline_cycles == sum(
        roofline_cycles(w.macs, w.bytes, part.config) for w in map(layer_work, graph.nodes))
    assert report.roofline_cycles <= report.cycles


def test_report_text_names_every_node_and_the_sram_use(timed: tuple[Graph, NpuPart]) -> None:
    graph, part = timed
    text = part.report()
    stats = part.last_stats
    rows = {line.split()[0]: line.split() for line in text.splitlines()[4:]}
    assert set(rows) == {n.name for n in graph.nodes}
    assert rows["conv"][1] == "QConv"
    assert f"{stats.cycles} cycles = {stats.cycles / 1e3:.3f} µs" in text  # tiny-64k runs at 1 GHz
    assert "SRAM high-water: inp" in text and "/ 16 KiB" in text
    top = format_report(build_report(part.program, part.config, stats, part.work), top=2)
    assert "top 2 of 4 layers by cycles" in top


class _Checker(HTMLParser):
    VOID: ClassVar[set[str]] = {"meta", "br", "img", "hr", "link", "input", "rect", "line"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.rects = 0
        self.lanes: list[str] = []
        self.links: list[str] = []
        self.titles = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        d = dict(attrs)
        self.links += [v for k, v in attrs if k in ("src", "href") and v]
        self.rects += tag == "rect"
        self.titles += tag == "title"
        if tag == "g" and d.get("class") == "lane":
            self.lanes.append(d["id"])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("rect", "line"):
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def test_timeline_html_is_well_formed_self_contained_with_a_lane_per_engine(timed: tuple[Graph, NpuPart]) -> None:
    _, part = timed
    page = part.timeline_html()
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.stack == []
    assert checker.links == [] and "<script" not in page and "url(" not in page
    assert checker.lanes == ["lane-load", "lane-compute", "lane-store"]
    instrs = len(part.program.instrs)
    assert 0 < checker.rects <= instrs
    assert checker.titles == checker.rects + 1  # one per rect, and the page's
    assert "µs" in page and "conv" in page


def test_merge_joins_same_engine_same_layer_only_across_small_gaps() -> None:
    entries = [TimelineEntry(0, "load", 0, 10, "LOAD a", "l1"), TimelineEntry(1, "compute", 5, 8, "GEMM", "l1"),
               TimelineEntry(2, "load", 10, 20, "LOAD b", "l1"), TimelineEntry(3, "load", 25, 30, "LOAD c", "l1"),
               TimelineEntry(4, "load", 30, 40, "LOAD d", "l2")]
    spans = merge_entries(entries, max_gap=5)
    assert [(s.engine, s.tag, s.start, s.end, s.count, s.busy) for s in spans] == [
        ("compute", "l1", 5, 8, 1, 3), ("load", "l1", 0, 20, 2, 20), ("load", "l1", 25, 30, 1, 5),
        ("load", "l2", 30, 40, 1, 10)]
    assert len(merge_entries(entries, max_gap=6)) == 3


def test_plain_run_records_no_timeline_and_says_how_to_get_one() -> None:
    graph = int8_net(8, 16, 30, seed=3)
    part = bind(NpuSimBackend(), TINY).compile(graph)
    inputs = int8_inputs(graph)
    start = time.perf_counter()
    part.run(inputs)
    plain = time.perf_counter() - start
    assert part.last_stats.timeline == [] and part.last_stats.cycles > 0
    assert "npu_timeline=True" in part.report()
    with pytest.raises(PluginError, match="npu_timeline=True"):
        part.timeline_html()
    assert plain < 2.0


def test_timeline_option_survives_the_artifact_and_is_checked(timed: tuple[Graph, NpuPart]) -> None:
    _, part = timed
    loaded = NpuSimBackend().load_artifact(part.artifact)
    assert loaded.record_timeline and loaded.work == part.work
    with pytest.raises(OptionError, match="option npu_timeline of backend npu_sim takes bool, got 'yes'"):
        bind(NpuSimBackend(), {"npu_timeline": "yes"}).compile(int8_net(8, 16, 30, seed=3))


def test_executable_report_and_timelines_include_the_npu_region() -> None:
    graph = int8_net(8, 16, 30, seed=3)
    exe = hetero.compile(graph, targets=["npu_sim", "llvm_cpu"], passes=[], npu_timeline=True, **TINY)
    with pytest.raises(HeteroError, match="call run"):
        exe.timelines()
    assert "not run yet" in exe.report()
    exe.run(int8_inputs(graph))
    npu = [p for p in exe.placements if p.backend == "npu_sim"]
    assert npu
    text = exe.report()
    for p in npu:
        assert f"region {p.region or '-'} on npu_sim" in text
    assert "utilisation" in text and "conv" in text
    pages = exe.timelines()
    assert set(pages) == {p.region or p.backend for p in npu}
    assert all(page.startswith("<!DOCTYPE html>") for page in pages.values())
