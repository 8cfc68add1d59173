"""hetero (llvm_cpu) against onnxruntime on the nine light models, 1 and 2 threads.

Run: ``python benchmarks/bench_models.py [--repeat N] [--threads 1,2] [--openvino]
[--memory] [--layout nchw] [--records FILE] [MODEL ...]``

Each model gets seeded random weights and one seeded input; hetero and onnxruntime
run the same model on the same input in this process, ``--repeat`` times each, in
three blocks of back-to-back runs per runtime taken in turn, each block after a
warm-up run and once the other runtime's threads have stopped spinning
(``timing.blockwise_medians``), and the script prints the medians and the ratio hetero / onnxruntime
(below 1 means hetero is faster), the geometric mean of the ratios per thread count,
and hetero's cold compile time per model. Outputs are checked to agree first. The
first line names the machine (CPU model, LLVM's name for it, vector width, caches):
ratios from different machines are not comparable.

``--records FILE`` (``hetero tune -o FILE``) adds a second hetero compile that applies the
tuned schedules in FILE (``hetero.compile(records=...)``; kernels without a record keep
their default schedule) and prints its time and ratio beside the untuned one, timed in
the same process on the same input (its blocks in turn with the others'), and a
geometric mean of each.

``--openvino`` adds OpenVINO's CPU plugin as a third column where the ``openvino``
package is installed (an optional benchmark dependency: ``pip install openvino``).
``--memory`` adds each runtime's resident memory, measured in a child process of its
own per runtime (one process's figures say nothing about which library used them),
above the child's RSS once the model is loaded and before the session is built: after
the session is built and two runs (*steady*: weights, code, arena, threads), and the
highest it reached on the way (*peak*: compiling included, except what hetero compiles
in forked worker processes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
import subprocess
import sys
import time

import numpy as np
import onnx

import hetero
from hetero.core.frontend.light import LIGHT_MODELS, light_model_path
from hetero.core.frontend.onnx import randomize_weights
from hetero.plugins.llvm_cpu.host import host
from timing import blockwise_medians, ort_session


def _load(name: str) -> tuple[onnx.ModelProto, hetero.Graph, dict[str, np.ndarray]]:
    model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
    graph = hetero.load_onnx(model)
    x = np.random.default_rng(0).standard_normal(graph.inputs[0].shape).astype(np.float32)
    return model, graph, {graph.inputs[0].name: x}


def _openvino_runner(model: onnx.ModelProto, threads: int):  # noqa: ANN202 - openvino's types are optional
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU",
                                  {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)[compiled.outputs[0]]


def _have_openvino() -> bool:
    import importlib.util

    return importlib.util.find_spec("openvino") is not None


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _memory_child(runtime: str, name: str, threads: int, options: dict[str, str]) -> None:
    """In a child process: one runtime's steady and peak RSS on ``name``, as JSON."""
    model, graph, feeds = _load(name)
    base = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    if runtime == "hetero":
        exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads, **options)
        run = lambda: exe.run(feeds)  # noqa: E731
    elif runtime == "onnxruntime":
        session = ort_session(model, threads)
        run = lambda: session.run(None, feeds)  # noqa: E731
    else:
        infer = _openvino_runner(model, threads)
        run = lambda: infer(feeds)  # noqa: E731
    run()
    run()
    print(json.dumps({"steady_mib": (_status_kib("VmRSS") - base) / 1024,
                      "peak_mib": (_status_kib("VmHWM") - base) / 1024}))


def _memory(runtime: str, name: str, threads: int, options: dict[str, str]) -> str:
    """``steady MiB/peak MiB`` of ``runtime`` on ``name``, from a child process."""
    done = subprocess.run([sys.executable, __file__, "--memory-child", runtime, "--threads", str(threads),
                           *(["--layout", options["layout"]] if "layout" in options else []), name],
                          capture_output=True, text=True, cwd=Path(__file__).parent)
    if done.returncode != 0:
        return "failed"
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return f"{figures['steady_mib']:.0f}/{figures['peak_mib']:.0f}"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(r) for r in values) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(LIGHT_MODELS))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--openvino", action="store_true", help="add OpenVINO's CPU plugin where installed")
    parser.add_argument("--memory", action="store_true", help="add each runtime's peak RSS of a run")
    parser.add_argument("--layout", choices=("blocked", "nchw"), help="llvm_cpu's layout option")
    parser.add_argument("--records", metavar="FILE", help="tuning records (hetero tune -o): add a tuned column")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    options = {"layout": args.layout} if args.layout else {}
    counts = [int(t) for t in args.threads.split(",")]
    if args.memory_child:
        _memory_child(args.memory_child, args.models[0], counts[0], options)
        return
    openvino = args.openvino and _have_openvino()
    if args.openvino and not openvino:
        print("openvino is not installed (pip install openvino): its column is left out")
    import onnxruntime

    print(f"machine: {host().describe()}")
    print(f"onnxruntime {onnxruntime.__version__}, hetero {hetero.__version__}, "
          f"{os.cpu_count()} CPUs visible; medians of {args.repeat} runs")
    ratios: dict[int, list[float]] = {t: [] for t in counts}
    tuned_ratios: dict[int, list[float]] = {t: [] for t in counts}
    header = f"{'model':<14}{'thr':>4}{'compile s':>11}{'hetero ms':>11}{'ort ms':>9}{'ratio':>8}"
    if args.records:
        header += f"{'tuned ms':>10}{'tuned/ort':>11}"
    if openvino:
        header += f"{'ov ms':>9}{'ov/ort':>8}"
    if args.memory:
        header += f"{'hetero MiB':>13}{'ort MiB':>11}" + (f"{'ov MiB':>11}" if openvino else "")
    print(header, flush=True)
    for name in args.models:
        model, graph, feeds = _load(name)
        for threads in counts:
            start = time.perf_counter()
            exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads, **options)
            compile_s = time.perf_counter() - start
            session = ort_session(model, threads)
            ours = exe.run(feeds)[graph.outputs[0].name]
            theirs = session.run(None, feeds)[0]
            if not np.allclose(ours, theirs, rtol=1e-3, atol=1e-4):
                sys.exit(f"{name}: hetero and onnxruntime disagree (max |err| "
                         f"{np.abs(ours - theirs).max():.2e}); not timing a wrong answer")
            tuned = None
            if args.records:
                tuned = hetero.compile(graph, targets=["llvm_cpu"], num_threads=threads, records=args.records,
                                       **options)
                if not np.allclose(tuned.run(feeds)[graph.outputs[0].name], theirs, rtol=1e-3, atol=1e-4):
                    sys.exit(f"{name}: the tuned compile and onnxruntime disagree; not timing a wrong answer")
            runs = [lambda: exe.run(feeds), lambda: session.run(None, feeds)]
            if tuned is not None:
                runs.append(lambda: tuned.run(feeds))
            if openvino:
                infer = _openvino_runner(model, threads)
                runs.append(lambda: infer(feeds))
            # In blocks, in turn, each after the others' threads went quiet (timing.py).
            medians = blockwise_medians(runs, args.repeat)
            t_ours, t_ort = medians[:2]
            t_tuned = medians[2] if tuned is not None else None
            t_ov = medians[-1] if openvino else None
            ratio = t_ours / t_ort
            ratios[threads].append(ratio)
            line = (f"{name:<14}{threads:>4}{compile_s:>11.2f}{t_ours * 1e3:>11.2f}{t_ort * 1e3:>9.2f}"
                    f"{ratio:>8.2f}")
            if t_tuned is not None:
                tuned_ratios[threads].append(t_tuned / t_ort)
                line += f"{t_tuned * 1e3:>10.2f}{t_tuned / t_ort:>11.2f}"
            if t_ov is not None:
                line += f"{t_ov * 1e3:>9.2f}{t_ov / t_ort:>8.2f}"
            if args.memory:
                line += f"{_memory('hetero', name, threads, options):>13}{_memory('onnxruntime', name, threads, {}):>11}"
                if openvino:
                    line += f"{_memory('openvino', name, threads, {}):>11}"
            print(line, flush=True)
    for threads, values in ratios.items():
        print(f"geometric mean ratio at {threads} thread(s): {_geomean(values):.2f} over {len(values)} models; "
              f"worst {max(values):.2f}")
        if args.records:
            tuned = tuned_ratios[threads]
            print(f"  tuned with {args.records}: {_geomean(tuned):.2f}; worst {max(tuned):.2f}")
    if args.memory:
        print("MiB columns: steady / peak resident memory above the process with the model loaded "
              "(steady: after the session is built and two runs; peak: the most on the way)")


if __name__ == "__main__":
    main()
