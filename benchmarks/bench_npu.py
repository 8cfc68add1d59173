"""npu_sim on a light model: per-layer utilisation and simulated latency beside the roofline bound.

Run: ``python benchmarks/bench_npu.py [--model resnet50|squeezenet|...] [--timeline FILE] [--top N]``

The model gets seeded random weights (seed 0), is quantised on four seeded random
inputs and compiled for ``npu_sim`` then ``llvm_cpu`` with the timeline on; one
run on a fifth input is simulated. For each NPU region the script prints the top
layers by simulated cycles with their matrix-unit utilisation, and a summary:
the region's simulated cycles and latency at the declared clock, the partitioner's
estimate of it (npu_sim's analytic cost model) beside the simulated time, the roofline
bound (per layer, the larger of its MACs over the peak and its compulsory bytes (inputs,
weights, outputs once) over the DMA bandwidth, summed) and the ratio simulated / roofline; then the same for all NPU regions together. The
simulated figures do not depend on this machine; the wall times printed beside
them do. ``--timeline`` writes the execution timeline of every NPU region as HTML
(``FILE`` for one region; ``STEM.rN.html`` per region for several).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import hetero
from hetero.core.frontend.light import resolve_model
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.frontend.onnx.loader import read_model
from hetero.plugins.npu_sim.backend import NpuPart
from hetero.plugins.npu_sim.report import (
    NpuReport,
    build_report,
    format_report,
    roofline_cycles,
)


def load(model: str, samples: int) -> tuple[hetero.Graph, list[dict[str, np.ndarray]]]:
    """Light model ``model`` with seeded random weights (seed 0), optimised, and
    ``samples`` + 1 seeded random inputs: the calibration set, then the one to run."""
    graph = hetero.optimize(hetero.load_onnx(randomize_weights(read_model(resolve_model(f"light:{model}")).model,
                                                               seed=0)))
    rng = np.random.default_rng(0)
    shape = graph.inputs[0].shape
    return graph, [{graph.inputs[0].name: rng.standard_normal(shape).astype(np.float32)} for _ in range(samples + 1)]


def step(what: str) -> float:
    """Say what the script is doing now; the time it started."""
    print(f"... {what}", flush=True)
    return time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", help="a light model name (default resnet50)")
    parser.add_argument("--timeline", type=Path, help="write the execution timeline HTML here")
    parser.add_argument("--top", type=int, default=15, help="layers to list per region, by cycles")
    parser.add_argument("--samples", type=int, default=4, help="calibration inputs")
    args = parser.parse_args()

    t = step(f"loading light:{args.model} with random weights (seed 0) and optimising")
    graph, samples = load(args.model, args.samples)
    t = step(f"({time.perf_counter() - t:.1f} s) quantising on {args.samples} random inputs and compiling "
             f"for npu_sim + llvm_cpu")
    exe = hetero.compile(graph, targets=["npu_sim", "llvm_cpu"], quantize=samples[:-1], npu_timeline=True)
    npu = [p for p in exe.placements if isinstance(p.part, NpuPart)]
    instrs = sum(len(p.part.program.instrs) for p in npu)
    t = step(f"({time.perf_counter() - t:.1f} s) simulating one run: {len(npu)} NPU region(s), "
             f"{instrs} instructions, {len(exe.placements) - len(npu)} CPU part(s)")
    exe.run(samples[-1])
    print(f"... ({time.perf_counter() - t:.1f} s) done", flush=True)

    reports: list[NpuReport] = []
    for p in npu:
        part = p.part
        report = build_report(part.program, part.config, part.last_stats, part.work)
        reports.append(report)
        print(f"\nregion {p.region} on npu_sim: {len(part.work)} nodes, {len(part.program.instrs)} instructions")
        print(format_report(report, top=args.top))
    if not reports:
        raise SystemExit(f"{args.model}: the partitioner placed nothing on npu_sim; nothing to report")
    config = npu[0].part.config
    cycles = sum(r.cycles for r in reports)
    macs = sum(r.macs for r in reports)
    issued = sum(r.issued_macs for r in reports)
    dma = sum(r.dma_bytes for r in reports)
    bound = sum(r.roofline_cycles for r in reports)
    compute_bound = roofline_cycles(macs, 0, config)
    layers = [f for r in reports for f in r.layers if f.macs]
    print(f"\n{args.model} on npu_sim ({config.array_rows}x{config.array_cols} @ {config.clock_ghz:g} GHz, "
          f"{config.peak_macs_per_cycle} MACs/cycle, DMA {config.dma_bytes_per_cycle} B/cycle), "
          f"{len(reports)} region(s), run one after another:")
    print(f"  simulated        {cycles:>12} cycles  {config.cycles_to_seconds(cycles) * 1e3:9.3f} ms")
    estimates = {r["name"]: r["est_seconds"] for r in exe.partition["regions"]}
    estimated = sum(estimates[p.region] for p in npu)
    print(f"  estimate {estimated * 1e3:.3f} ms, simulated {config.cycles_to_seconds(cycles) * 1e3:.3f} ms "
          f"(npu_sim's analytic cost model, as the partitioner saw it; estimate / simulated "
          f"{estimated / config.cycles_to_seconds(cycles):.2f})")
    print(f"  roofline bound   {bound:>12} cycles  {config.cycles_to_seconds(bound) * 1e3:9.3f} ms"
          f"  (per layer, MACs at peak or compulsory bytes over DMA; compute alone {compute_bound})")
    print(f"  simulated / roofline {cycles / bound:.2f}; {macs} MACs ({issued} issued by the array), "
          f"{dma / 2**20:.1f} MiB DMA; overall utilisation {macs / (cycles * config.peak_macs_per_cycle):.1%}")
    if layers:
        utils = sorted(f.utilisation for f in layers)
        weighted = sum(f.macs for f in layers) / sum(f.cycles * config.peak_macs_per_cycle for f in layers)
        print(f"  matrix-unit layers: {len(layers)}; utilisation min {utils[0]:.1%}, median "
              f"{utils[len(utils) // 2]:.1%}, max {utils[-1]:.1%}, cycle-weighted {weighted:.1%}")
    if args.timeline:
        pages = exe.timelines()
        for region, page in pages.items():
            path = args.timeline if len(pages) == 1 else args.timeline.with_suffix(f".{region}.html")
            path.write_text(page, encoding="utf-8")
            print(f"timeline of {region}: {path} ({len(page.encode()) / 2**20:.2f} MiB)")


if __name__ == "__main__":
    main()
