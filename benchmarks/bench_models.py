"""hetero (llvm_cpu) against onnxruntime on the nine light models, 1 and 2 threads.

Run: ``python benchmarks/bench_models.py [--repeat N] [--threads 1,2] [MODEL ...]``

Each model gets seeded random weights and one seeded input; hetero and onnxruntime
run the same model on the same input in this process, ``--repeat`` times each after
a warm-up, and the script prints the medians and the ratio hetero / onnxruntime
(below 1 means hetero is faster), the geometric mean of the ratios per thread count,
and hetero's cold compile time per model. Outputs are checked to agree first.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np
import onnx

import hetero
from hetero.core.frontend.light import LIGHT_MODELS, light_model_path
from hetero.core.frontend.onnx import randomize_weights
from timing import median_seconds, ort_session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    ratios: dict[int, list[float]] = {t: [] for t in counts}
    print(f"{'model':<14}{'thr':>4}{'compile s':>11}{'hetero ms':>11}{'ort ms':>9}{'ratio':>8}", flush=True)
    for name in args.models:
        model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
        graph = hetero.load_onnx(model)
        x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
        feeds = {graph.inputs[0].name: x}
        for threads in counts:
            start = time.perf_counter()
            exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads)
            compile_s = time.perf_counter() - start
            session = ort_session(model, threads)
            ours = exe.run(feeds)[graph.outputs[0].name]
            theirs = session.run(None, feeds)[0]
            if not np.allclose(ours, theirs, rtol=1e-3, atol=1e-4):
                sys.exit(f"{name}: hetero and onnxruntime disagree (max |err| "
                         f"{np.abs(ours - theirs).max():.2e}); not timing a wrong answer")
            t_ours = median_seconds(lambda: exe.run(feeds), args.repeat)
            t_ort = median_seconds(lambda: session.run(None, feeds), args.repeat)
            ratio = t_ours / t_ort
            ratios[threads].append(ratio)
            print(f"{name:<14}{threads:>4}{compile_s:>11.2f}{t_ours * 1e3:>11.2f}{t_ort * 1e3:>9.2f}"
                  f"{ratio:>8.2f}", flush=True)
    for threads, values in ratios.items():
        geomean = math.exp(sum(math.log(r) for r in values) / len(values))
        print(f"geometric mean ratio at {threads} thread(s): {geomean:.2f} over {len(values)} models")


if __name__ == "__main__":
    main()
