"""``hetero tune``: search schedules for a model's kernels and append the measurements to records.

::

    hetero tune light:squeezenet --targets llvm_cpu --budget 200 -o records.jsonl
    hetero tune light:squeezenet --budget 200 --executor local:2 -o records.jsonl
    hetero tune light:squeezenet --budget 200 --executor dask://10.0.0.5:8786 -o records.jsonl
    hetero compile light:squeezenet --records records.jsonl

``--cost-model`` ranks each trial's candidates by a model learned from the trials
measured so far (LightGBM, from the ``tune`` extra; ``auto``, the default, uses it where
it is installed), and ``--transfer FILE`` teaches it first from earlier records (by
default those already in ``-o``'s file, when it has some): kernels measured before start
ranked, new ones by what their backend's other kernels showed.

``--executor`` says where candidates are built and measured: local processes, or the
workers of a Dask cluster (:mod:`hetero.core.schedule.tune.executors`); with the same
seed and as many candidates at once, both measure the same points.

Progress goes to stderr. In a log (stderr not a terminal) it is one line per trial:
task i of N, trial, best GFLOP/s, elapsed, estimated remaining. On a terminal the status
line shows the same, redrawn in place, and only the lines per task (its default, its
search, its confirmation) are printed above it, since a line per trial would scroll
the status line away. At the end an HTML page plots best-so-far against trials per task
(``-o``'s name with ``.html``).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

from hetero.cli.common import (
    add_model_arguments, add_placement_arguments, check_writable, load_graph, session, write_text,
)
from hetero.cli.terminal import TerminalProgress
from hetero.core import progress


def add_parser(subs: argparse._SubParsersAction) -> None:
    """Register ``hetero tune``."""
    tune = subs.add_parser("tune", help="search faster schedules for a model's kernels; write tuning records")
    add_model_arguments(tune)
    add_placement_arguments(tune)
    tune.add_argument("--budget", default="64",
                      help="trials to measure (200) or seconds to search (60s), shared among the tasks by "
                           "occurrences x default time (default 64 trials)")
    tune.add_argument("-o", "--output", required=True, metavar="RECORDS",
                      help="JSON-lines records file to append to (hetero compile --records reads it)")
    tune.add_argument("--seed", type=int, default=0, help="seed of the search and of the measured inputs")
    tune.add_argument("--repeats", type=int, default=5, help="timed runs per candidate; the median counts")
    tune.add_argument("--timeout", type=float, default=60.0,
                      help="seconds a candidate may take to build and run before it is failed")
    tune.add_argument("--confirm", type=int, default=3, metavar="ROUNDS",
                      help="after each task's search, measure its default and fastest schedules this many "
                           "more times in turn; the lowest median is kept (outside the budget; 0: none)")
    tune.add_argument("--executor", default="local", metavar="SPEC",
                      help="where candidates are measured: local (one process, the default), local:N (N "
                           "processes, N candidates at once) or dask://HOST:PORT (the workers of a Dask "
                           "cluster, one candidate per worker thread at once; pip install 'hetero[tune]')")
    tune.add_argument("--cost-model", default="auto", choices=("auto", "lightgbm", "none"),
                      help="rank each trial's candidates with a learned model: lightgbm (pip install "
                           "'hetero[tune]'), none (random and climbing draws only), or auto (lightgbm where "
                           "installed; the default)")
    tune.add_argument("--transfer", action="append", default=None, metavar="RECORDS",
                      help="earlier records the cost model learns from before the search (repeatable; default: "
                           "the records already in -o's file)")
    tune.add_argument("--transfer-any-machine", action="store_true",
                      help="let the cost model learn from records made on other machines too")
    tune.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    """Tune the model's tasks within the budget; write the records and the HTML report."""
    from hetero.core.schedule.tune.executors import executor_factory
    from hetero.core.schedule.tune.report import html_report
    from hetero.core.schedule.tune.tuner import Budget, extract_tasks, measuring_machines, tune

    budget = Budget.parse(args.budget)
    check_writable(args.output, "-o/--output")
    status = progress.reporter()
    log = status.note if isinstance(status, TerminalProgress) else _print
    with executor_factory(args.executor) as executor:  # first: a wrong address fails before any work
        graph = load_graph(args)
        tasks = extract_tasks(graph, session(args, graph))
        machines = measuring_machines(tasks, executor)
        where = "; ".join(f"{name} on {m.get('model', '')} ({m.get('name', '')})" for name, m in machines.items())
        log(f"{len(tasks)} tasks, {where or 'no tunable backend'}; budget {args.budget}; measured on "
            f"{executor.where}")
        model = _cost_model(args, tasks, log)
        results = tune(tasks, budget, args.output, seed=args.seed, executor=executor, repeats=args.repeats,
                       timeout_s=args.timeout, confirm_rounds=args.confirm, model=model, log=log,
                       trial_log=None if isinstance(status, TerminalProgress) else log)
    page = str(Path(args.output).with_suffix(".html"))
    write_text(page, html_report(results, f"hetero tune {args.model}"), "-o/--output")
    for r in results:
        chosen, default = r.chosen, r.median_seconds(r.trials[0].point) if r.trials else None
        gain = f"{default / chosen[1]:.2f}x" if chosen and default else "-"
        print(f"{r.task.label}: x{r.task.occurrences}, default {_ms(default)}, chosen "
              f"{_ms(chosen[1] if chosen else None)} ({gain}, {len(r.trials) - 1} trials, medians)")
    print(f"records  {args.output}\nplot     {page}")
    return 0


def _cost_model(args: argparse.Namespace, tasks: list, log: Callable[[str], None]) -> object:
    """The cost model ``--cost-model`` names, taught from ``--transfer``'s records (or the
    output's earlier ones); None for none, or for auto without LightGBM (said in the log)."""
    from hetero.core.schedule.tune.model import make_cost_model
    from hetero.core.schedule.tune.records import load_records

    name = args.cost_model
    if name == "auto":
        name = "lightgbm" if importlib.util.find_spec("lightgbm") is not None else "none"
        if name == "none":
            log("cost model: none (LightGBM is not installed: pip install 'hetero[tune]'); random and climbing "
                "draws only")
            return None
    model = make_cost_model(name, {b for b, _ in tasks}, seed=args.seed)
    log(f"cost model: {name}")
    if model is None:
        return None
    sources = args.transfer if args.transfer is not None else [args.output] if Path(args.output).exists() else []
    for source in sources:
        used = model.pretrain(load_records(source), tasks, any_machine=args.transfer_any_machine)
        log(f"cost model: learned from {used.used} earlier schedules in {source} (records skipped: {used.other_task} "
            f"of kernels not in this model, {used.other_machine} from other machines, {used.stale} that no "
            "longer apply)")
    return model


def _print(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _ms(seconds: float | None) -> str:
    return "failed" if seconds is None else f"{seconds * 1e3:.3f} ms"
