"""Import and optimisation time per light model, beside onnxruntime's session creation.

Run: ``python benchmarks/bench_import.py [--repeat N] [MODEL ...]``

For each of the nine real-architecture models onnx ships, prints the median over
``--repeat`` runs of hetero's ONNX import (read, check, upgrade, translate, fold
shapes) and of its default optimisation pipeline, the node counts before and after,
and onnxruntime's session creation (which also reads, checks and optimises the
graph) with the ratio hetero / onnxruntime.
"""

from __future__ import annotations

import argparse
import statistics

import hetero
from hetero.core.frontend.light import LIGHT_MODELS, light_model_path
from timing import median_seconds, ort_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    header = f"{'model':<14}{'nodes':>7}{'→opt':>6}{'import s':>10}{'optimise s':>12}{'ort s':>9}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    ratios = []
    for name in args.models:
        path = str(light_model_path(name))
        graph = hetero.load_onnx(path)
        optimized = hetero.optimize(graph)
        t_import = median_seconds(lambda: hetero.load_onnx(path), args.repeat)
        t_opt = median_seconds(lambda: hetero.optimize(graph), args.repeat)
        t_ort = median_seconds(lambda: ort_session(path, 1), args.repeat)
        ratio = (t_import + t_opt) / t_ort
        ratios.append(ratio)
        print(f"{name:<14}{len(graph.nodes):>7}{len(optimized.nodes):>6}{t_import:>10.3f}"
              f"{t_opt:>12.3f}{t_ort:>9.3f}{ratio:>8.2f}", flush=True)
    print(f"median ratio (import + optimise) / onnxruntime session: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
