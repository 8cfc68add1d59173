"""Tuning npu_sim's convolution tilings on ResNet-50 int8: simulated cycles, analytic vs tuned.

Run: ``python benchmarks/bench_npu_tune.py [--model resnet50] [--trials-per-task 15] [--top 10]
[--only LAYER,...] [--timeout S] [--cost-model none|lightgbm]``

The model is built as ``bench_npu.py`` builds it (seeded random weights, seed 0; quantised
on four seeded random inputs) for ``npu_sim`` then ``llvm_cpu``. Its npu_sim tuning tasks
(one per distinct convolution tiling problem) are tuned by ``hetero.core.schedule.tune``
with a budget of ``--trials-per-task`` times the number of tasks, shared by weight
(occurrences x the analytic tiling's cycles); each trial simulates one layer (a candidate
whose simulation runs past ``--timeout`` seconds of this host's time, a tiling of tiny
tiles and many instructions, is a failed trial), and the records go to a temporary file. The model is then compiled without and with those
records and one run on a fifth input is simulated: the script prints the NPU regions'
total simulated cycles both ways and their ratio, checks the outputs are bit-identical,
and lists the tasks with the most cycles (analytic vs tuned, per run and x occurrences).
Simulated cycles do not depend on this machine; the seconds printed beside them do.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import hetero
from hetero.core.compiler import Session
from hetero.core.schedule.tune.model import make_cost_model
from hetero.core.schedule.tune.search import TaskResult
from hetero.core.schedule.tune.tuner import Budget, extract_tasks, tune
from hetero.plugins.npu_sim.backend import NpuPart
from bench_npu import load, step

TARGETS = ["npu_sim", "llvm_cpu"]


def npu_cycles(exe: hetero.Executable, sample: dict) -> tuple[int, dict]:
    """Simulated cycles of every NPU region of one run of ``exe`` on ``sample``, and its outputs."""
    outputs = exe.run(sample)
    parts = [p.part for p in exe.placements if isinstance(p.part, NpuPart)]
    return sum(p.last_stats.cycles for p in parts), outputs


def task_rows(results: list[TaskResult], clock_hz: float, top: int) -> list[str]:
    """The ``top`` tasks by the analytic tiling's cycles x occurrences, analytic vs tuned."""
    rows = []
    ranked = sorted(results, key=lambda r: -(r.default_seconds or 0.0) * r.task.occurrences)
    for r in ranked[:top]:
        default = round((r.default_seconds or 0.0) * clock_hz)
        chosen = r.chosen
        tuned = round(chosen[1] * clock_hz) if chosen else default
        d = r.task.default_trace.instructions[0].decisions
        best = chosen and r.trials[[t.point for t in r.trials].index(chosen[0])].trace.instructions[0].decisions
        rows.append(f"  {r.task.label:<44} x{r.task.occurrences:<2} {default:>9} -> {tuned:>9} cycles "
                    f"({default / tuned:5.2f}x; {len(r.trials) - 1:>2} trials)  {_tiling(d)} -> {_tiling(best or d)}")
    return rows


def _tiling(d: dict) -> str:
    return f"{d['toh']}x{d['tow']}x{d['oct']}/ck{d['ck']}{'m' if d['multi'] else 'r'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", help="a light model name (default resnet50)")
    parser.add_argument("--trials-per-task", type=int, default=15, help="budget per task, on average")
    parser.add_argument("--top", type=int, default=10, help="tasks to list")
    parser.add_argument("--samples", type=int, default=4, help="calibration inputs")
    parser.add_argument("--seed", type=int, default=0, help="the search's seed")
    parser.add_argument("--only", help="tune only the tasks whose layer names (comma-separated) lead their labels")
    parser.add_argument("--cost-model", default="none", choices=("none", "lightgbm"),
                        help="rank each trial's candidates with a learned cost model (default none: random order)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds a candidate's simulation may take before it counts as failed")
    args = parser.parse_args()

    t = step(f"loading light:{args.model} with random weights (seed 0) and optimising")
    graph, samples = load(args.model, args.samples)
    calibration = samples[:-1]
    t = step(f"({time.perf_counter() - t:.1f} s) extracting npu_sim tuning tasks")
    tasks = [(b, task) for b, task in extract_tasks(graph, Session(TARGETS, quantize=calibration))
             if b.name == "npu_sim" and (not args.only or task.label.split()[0] in args.only.split(","))]
    layers = sum(task.occurrences for _, task in tasks)
    budget = Budget(trials=args.trials_per_task * len(tasks))
    t0 = step(f"({time.perf_counter() - t:.1f} s) tuning {len(tasks)} tasks ({layers} layers), budget "
              f"{budget.trials} trials ({args.trials_per_task} per task on average, shared by weight), seed {args.seed}")
    with tempfile.TemporaryDirectory() as folder:
        records = Path(folder) / "npu_sim.jsonl"
        # Simulated cycles are exact: one run per trial, no confirmation rounds.
        model = make_cost_model(args.cost_model, list({b.name: b for b, _ in tasks}.values()), seed=args.seed)
        results = tune(tasks, budget, records, seed=args.seed, repeats=1, confirm_rounds=0, timeout_s=args.timeout,
                       model=model)
        tuning_s = time.perf_counter() - t0
        t = step(f"({tuning_s:.1f} s) compiling without and with the records, simulating one run each")
        default = hetero.compile(graph, targets=TARGETS, quantize=calibration)
        tuned = hetero.compile(graph, targets=TARGETS, quantize=calibration, records=records)
        base, base_out = npu_cycles(default, samples[-1])
        best, best_out = npu_cycles(tuned, samples[-1])
    print(f"... ({time.perf_counter() - t:.1f} s) done", flush=True)
    same = all(np.array_equal(base_out[k], best_out[k]) for k in base_out)
    config = next(p.part.config for p in default.placements if isinstance(p.part, NpuPart))
    clock = config.clock_ghz * 1e9
    trials = sum(len(r.trials) - 1 for r in results)
    print(f"\n{args.model} int8 on npu_sim ({config.array_rows}x{config.array_cols} @ {config.clock_ghz:g} GHz), "
          f"{len(tasks)} tiling tasks over {layers} layers; {trials} trials in {tuning_s:.0f} s (this host)")
    print(f"  NPU regions, analytic tilings {base:>12} cycles  {base / clock * 1e3:8.3f} ms")
    print(f"  NPU regions, tuned tilings    {best:>12} cycles  {best / clock * 1e3:8.3f} ms")
    print(f"  analytic / tuned {base / best:.4f} ({(base - best) / base:+.2%} of the cycles saved); outputs "
          f"{'bit-identical' if same else 'DIFFER'}")
    improved = sum(1 for r in results if r.chosen and r.default_seconds and r.chosen[1] < r.default_seconds)
    failed = [t for r in results for t in r.trials[1:] if t.seconds is None]
    print(f"  tasks the search improved: {improved} of {len(results)}; failed trials: {len(failed)} of {trials}"
          + (f" (first: {failed[0].error})" if failed else ""))
    print(f"\ntop {args.top} tasks by analytic cycles x occurrences (tiling toh x tow x oct / ck, m: one GEMM "
          "per tap, r: per row):")
    print("\n".join(task_rows(results, clock, args.top)))
    if not same:
        raise SystemExit("the tuned compile's outputs differ from the analytic one's")


if __name__ == "__main__":
    main()
