"""The small-region threshold (``min_ratio``) swept on light models split across npu_sim and llvm_cpu.

Run: ``python benchmarks/bench_threshold.py [--models squeezenet,inception_v1,...] [--ratios 0,1,4,...]``

The partitioner returns to the fallback every region whose estimated compute is
below ``min_ratio`` times the estimated time of its transfers. Which default is
right is a question about real costs, so this script measures them: each model
(seeded random weights, quantised on two random inputs) is compiled for npu_sim
then llvm_cpu at each ratio and run, and its end-to-end latency is modelled from
what each part costs on its device:

- a CPU region: the median wall time of its kernels on this machine (3 runs);
- an NPU region: its simulated cycles at the declared clock;
- a transfer: the partition's estimate from the declared memory hierarchies (host to
  device copies are not real here: the simulator shares the host's memory).

Ratios that give the same partition give the same executable, so each distinct
partition is measured once (CPU parts: the median of 7 runs) and its figures
repeated for every ratio that yields it; the ``part`` column numbers the distinct
partitions of a model. It prints, per model and ratio, the regions, nodes on the NPU
and the latency, and at the end each ratio's geometric-mean latency relative to ratio
0 (keep every region). The simulated device times do not depend on this machine; the
CPU times do, and they are noisy (2 shared cores): differences of a few percent
between distinct partitions are within that noise.
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

import hetero
from hetero.core.frontend.light import resolve_model
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.frontend.onnx.loader import read_model
from hetero.core.quant.flow import quantize_model

DEFAULT_MODELS = "squeezenet,inception_v1,shufflenet,densenet121"
DEFAULT_RATIOS = "0,1,4,16,64,256,1024"
CPU_RUNS = 7


def modelled_latency(exe: hetero.Executable, inputs: dict[str, np.ndarray]) -> tuple[float, float, float, float]:
    """(total, CPU, NPU, transfer) seconds of one run, each part costed on its own device."""
    cpu_runs = []
    for _ in range(CPU_RUNS):
        exe.run(inputs)
        cpu_runs.append(sum(sum(s for _, s in p.part.last_profile)
                            for p in exe.placements if p.backend == "llvm_cpu"))
    cpu = statistics.median(cpu_runs)
    npu = sum(p.part.last_stats.seconds for p in exe.placements if p.backend == "npu_sim")
    moved = sum(t["est_seconds"] for t in exe.partition.get("transfers", []))
    return cpu + npu + moved, cpu, npu, moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS, help=f"light models (default {DEFAULT_MODELS})")
    parser.add_argument("--ratios", default=DEFAULT_RATIOS, help=f"min_ratio values (default {DEFAULT_RATIOS})")
    args = parser.parse_args()
    ratios = [float(r) for r in args.ratios.split(",")]
    latencies: dict[float, list[float]] = {r: [] for r in ratios}
    print(f"{'model':<14}{'ratio':>8}{'part':>6}{'regions':>9}{'on npu':>8}{'latency ms':>12}{'cpu':>9}"
          f"{'npu':>9}{'moves':>8}")
    for name in args.models.split(","):
        print(f"... {name}: random weights, quantising on 2 random inputs", flush=True)
        graph = hetero.optimize(hetero.load_onnx(randomize_weights(
            read_model(resolve_model(f"light:{name}")).model, seed=0)))
        rng = np.random.default_rng(0)
        feeds = [{v.name: rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs}
                 for _ in range(3)]
        quantised = quantize_model(graph, feeds[:2])
        measured: dict[tuple, tuple[int, tuple[float, float, float, float]]] = {}
        for ratio in ratios:
            exe = hetero.compile(quantised, targets=["npu_sim", "llvm_cpu"], passes=[], min_ratio=ratio)
            regions = exe.partition["regions"]
            key = tuple((r["backend"], tuple(r["nodes"])) for r in regions)
            if key not in measured:
                measured[key] = (len(measured) + 1, modelled_latency(exe, feeds[2]))
            index, (total, cpu, npu, moved) = measured[key]
            latencies[ratio].append(total)
            on_npu = sum(len(r["nodes"]) for r in regions if r["backend"] == "npu_sim")
            print(f"{name:<14}{ratio:>8g}{index:>6}{len(regions):>9}{on_npu:>8}{total * 1e3:>12.3f}"
                  f"{cpu * 1e3:>9.3f}{npu * 1e3:>9.3f}{moved * 1e3:>8.3f}", flush=True)
    base = latencies[ratios[0]]
    print(f"\ngeometric mean of latency relative to min_ratio={ratios[0]:g}, over {len(base)} model(s)")
    for ratio in ratios:
        rel = math.exp(statistics.fmean(math.log(t / b) for t, b in zip(latencies[ratio], base)))
        print(f"  min_ratio {ratio:>7g}: {rel:.3f}")


if __name__ == "__main__":
    main()
