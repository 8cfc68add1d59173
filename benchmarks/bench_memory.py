"""Memory plans per light model: naive sum, lower bound, planned arena and their ratio.

Run: ``python benchmarks/bench_memory.py [--fused] [--alignment BYTES] [MODEL ...]``

For each of the nine real-architecture models onnx ships, optimised with the default
pipeline (and with epilogues fused under ``--fused``), prints the sum of all its
intermediate tensors (what a runtime without reuse would allocate), the lower bound
(the most bytes live at one step), the arena the planner found, the ratio of the
planned arena to the lower bound, the heuristic that found it and the planning time.
"""

from __future__ import annotations

import argparse
import time

import hetero
from hetero.core.frontend.light import LIGHT_MODELS, light_model_path
from hetero.core.memory import plan_memory
from hetero.core.passes.fuse import fuse_epilogues

_MIB = 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--fused", action="store_true", help="fuse epilogues before planning")
    parser.add_argument("--alignment", type=int, default=64)
    args = parser.parse_args()
    header = (f"{'model':<14}{'tensors':>8}{'naive MiB':>11}{'bound MiB':>11}{'planned MiB':>13}"
              f"{'planned/bound':>15}{'ms':>7}  heuristic")
    print(header)
    print("-" * len(header))
    worst = 1.0
    for name in args.models:
        graph = hetero.optimize(hetero.load_onnx(light_model_path(name)))
        if args.fused:
            graph = fuse_epilogues(graph)
        start = time.perf_counter()
        plan = plan_memory(graph, alignment=args.alignment)
        ms = (time.perf_counter() - start) * 1e3
        worst = max(worst, plan.ratio)
        print(f"{name:<14}{len(plan.allocations):>8}{plan.naive_bytes / _MIB:>11.2f}"
              f"{plan.lower_bound_bytes / _MIB:>11.2f}{plan.arena_bytes / _MIB:>13.2f}"
              f"{plan.ratio:>15.3f}{ms:>7.1f}  {plan.strategy}", flush=True)
    print(f"worst planned / lower bound: {worst:.3f}")


if __name__ == "__main__":
    main()
