"""llvm_cpu compile time: cold compiles in fresh processes, and loads from the compile cache.

Run: ``python benchmarks/bench_compile.py [--repeat N] [--jobs 1,2] [--timings] [--all | MODEL ...]``
(default model: resnet50; ``--all``: the nine light models onnx ships).

Each model gets seeded random weights and is imported before the clock starts; what is
timed is ``hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)``, the figure
``benchmarks/bench_models.py`` prints beside its ratios. A cold compile must not reuse
anything an earlier compile left in the process (the JIT keeps every kernel it built),
so each one runs in a process of its own, ``--repeat`` times, and the script prints
their median, fastest and slowest. ``--jobs`` sets ``HETERO_COMPILE_JOBS`` in those
processes (how many processes compile kernels; by default the host's cores), so
``--jobs 1,2`` compares a serial compile with a parallel one.

The cached load: one more process compiles the model into a fresh compile-cache
folder, then ``--repeat`` processes each compile it again from that folder (the same
import, so the same cache key): the median of that time, and whether any of them
compiled a kernel (read from :mod:`hetero.core.timing`: a load runs no lowering) are
printed, then where a cached load's time goes: the median of each phase over those
processes (plugin discovery, the model key, mapping the entries, checking their seals,
loading machine code; "other" is what no phase covers). ``--timings`` adds the phase
tables of the first cold compile and the first cached load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

#: The phase every compiled kernel passes through (hetero.core.timing): a cached
#: load that records it compiled something.
LOWER_PHASE = "lower"


def main() -> None:
    from hetero.core.frontend.light import LIGHT_MODELS
    from hetero.plugins.llvm_cpu.host import host

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50"])
    parser.add_argument("--all", action="store_true", help="every light model")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per figure (default 3)")
    parser.add_argument("--jobs", default="", help="HETERO_COMPILE_JOBS values to compare, e.g. 1,2 "
                                                   "(default: the host's default)")
    parser.add_argument("--timings", action="store_true", help="print the first cold compile's phases")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    models = list(LIGHT_MODELS) if args.all else args.models
    jobs = [j for j in args.jobs.split(",") if j] or [""]
    print(f"CPU: {host().describe()}")
    print(f"{'model':<14}{'jobs':>5}{'cold s':>9}{'min':>7}{'max':>7}{'cached s':>10}{'compiled':>10}", flush=True)
    for name in models:
        for job in jobs:
            cold = [_run(name, "", job) for _ in range(args.repeat)]
            with tempfile.TemporaryDirectory() as folder:
                _run(name, folder, job)
                cached = [_run(name, folder, job) for _ in range(args.repeat)]
            seconds = [c["seconds"] for c in cold]
            compiled = any(c["compiled"] for c in cached)
            print(f"{name:<14}{job or 'host':>5}{statistics.median(seconds):>9.2f}{min(seconds):>7.2f}"
                  f"{max(seconds):>7.2f}{statistics.median(c['seconds'] for c in cached):>10.3f}"
                  f"{'yes' if compiled else 'no':>10}", flush=True)
            print(f"  cached load, median s per phase: {_phase_medians(cached)}", flush=True)
            if args.timings:
                print(cold[0]["table"], flush=True)
                print(cached[0]["table"], flush=True)


def _phase_medians(runs: list[dict[str, Any]]) -> str:
    """Each phase's median seconds over ``runs`` (0 where a run lacks it), and the rest."""
    names = list(dict.fromkeys(name for run in runs for name in run["phases"]))
    medians = {name: statistics.median(run["phases"].get(name, 0.0) for run in runs) for name in names}
    medians["other"] = statistics.median(run["seconds"] - sum(run["phases"].values()) for run in runs)
    return ", ".join(f"{name} {seconds:.3f}" for name, seconds in medians.items())


def _run(name: str, cache: str, jobs: str) -> dict[str, Any]:
    """One compile of ``name`` in a fresh process (through the cache folder ``cache``
    when not empty); its result as :func:`_child` prints it."""
    env = dict(os.environ)
    if jobs:
        env["HETERO_COMPILE_JOBS"] = jobs
    done = subprocess.run([sys.executable, __file__, "--child", name, cache or "-"], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{name}: the compile process failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def _child(name: str, cache: str) -> None:
    """Import ``name``, then time its compile (through ``cache`` unless it is "-"), and
    print one JSON line: the seconds, whether a kernel was compiled, the phase table."""
    import onnx

    import hetero
    from hetero.core import timing
    from hetero.core.frontend.light import light_model_path
    from hetero.core.frontend.onnx import randomize_weights

    graph = hetero.load_onnx(randomize_weights(onnx.load(light_model_path(name)), seed=0))
    with timing.recording() as times:
        start = time.perf_counter()
        hetero.compile(graph, targets=["llvm_cpu"], num_threads=1, cache=None if cache == "-" else cache)
        seconds = time.perf_counter() - start
    compiled = any(phase == LOWER_PHASE for _, phase in times.seconds)
    phases = {phase if owner == timing.CORE else f"{owner} {phase}": spent
              for (owner, phase), spent in times.seconds.items()}
    print(json.dumps({"seconds": seconds, "compiled": compiled, "phases": phases, "table": times.table()}))


if __name__ == "__main__":
    main()
