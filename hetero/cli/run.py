"""``hetero run`` and ``hetero compare``: a model run, and checked against a reference."""

from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hetero.cli.common import (
    UsageError,
    add_input_arguments,
    add_model_arguments,
    add_placement_arguments,
    backend_options,
    check_writable,
    import_graph,
    load_graph,
    make_inputs,
    model_source,
    optimized,
    parse_shapes,
    parse_values,
    placement,
    quantize_options,
    session,
    stage,
    target_names,
    write_text,
)
from hetero.core import progress
from hetero.errors import DataDependentError

#: Cosine similarity a quantised model's outputs need with the float model's (--compare).
QUANTIZED_MIN_COSINE = 0.99


def add_parsers(subs: Any) -> None:
    """Register ``run``, ``compare`` and ``trust``."""
    run = subs.add_parser(
        "run", help="compile (or load) and run a model, optionally comparing with onnxruntime"
    )
    add_model_arguments(run)
    add_placement_arguments(run, extra="; or 'reference' for the numpy reference executor")
    run.add_argument("--strict", action="store_true",
                     help="a refused node or a failed compile is an error instead of a fallback to llvm_cpu")
    add_input_arguments(run)
    run.add_argument("--repeat", type=int, default=1, help="runs to time (the median is reported)")
    run.add_argument("--report", action="store_true", help="print the per-kernel time report")
    run.add_argument("--timeline", metavar="FILE.html",
                     help="write the execution timeline of the parts that draw one (npu_sim), one "
                          "page per region (FILE.rN.html when there are several)")
    run.add_argument("--compare", choices=["onnxruntime"],
                     help="run the same model and inputs with this reference and compare")
    run.add_argument("--source", metavar="MODEL",
                     help="with a saved .hetero: the model it was compiled from (.onnx or light:NAME, "
                          "with --random-weights as at compile time), for --compare")
    run.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance of --compare")
    run.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance of --compare")
    run.add_argument("--json", action="store_true", help="print JSON for tools")
    run.set_defaults(func=cmd_run)

    compare = subs.add_parser(
        "compare", help="run every region on its backend and on the reference; name the first "
                        "region beyond tolerance"
    )
    add_model_arguments(compare)
    add_placement_arguments(compare)
    add_input_arguments(compare)
    compare.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    compare.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default 1e-4)")
    compare.add_argument("--nodes", action="store_true",
                         help="show every node whose output the backend exposes, not only the "
                              "first beyond tolerance per region")
    compare.add_argument("--json", action="store_true", help="print JSON for tools")
    compare.set_defaults(func=cmd_compare)

    trust = subs.add_parser(
        "trust", help="sign a saved .hetero with your key so that run and hetero.load take it",
        description="A saved executable holds native code: hetero runs only those signed with "
                    "your key. Sign one made by an older hetero or by someone whose code you are "
                    "willing to run with your rights.")
    trust.add_argument("executable", metavar="FILE.hetero", nargs="+", help="the executables to sign")
    trust.set_defaults(func=cmd_trust)


class LightWeightsWarning(UserWarning):
    """A light model runs on the constant weights it ships with."""


def warn_light_weights(args: argparse.Namespace, model: str) -> None:
    """Warn when ``model`` is a light model run on its shipped, constant weights."""
    if model.startswith("light:") and args.random_weights is None:
        warnings.warn(f"{model} ships constant placeholder weights, so its outputs prove nothing; "
                      "give --random-weights SEED for real numbers", LightWeightsWarning, stacklevel=2)


def cmd_run(args: argparse.Namespace) -> int:
    """Compile (or load) and run; with --compare, check against onnxruntime."""
    import time

    import hetero

    if args.model.endswith(".hetero"):
        return run_saved(args)
    if args.source:
        raise UsageError("--source names the model a saved .hetero was compiled from; "
                         f"{args.model} is a model already")
    if args.timeline:
        check_writable(args.timeline, "--timeline")
    warn_light_weights(args, args.model)
    report: dict[str, object] = {"model": args.model}
    model = model_source(args, proto=bool(args.compare))
    start = time.perf_counter()
    try:
        graph = import_graph(args, model)
    except DataDependentError as exc:
        if exc.split is None or args.targets == "reference":
            raise
        return _run_staged(args, model, exc.split.inputs, report)
    report["import_s"] = time.perf_counter() - start
    report["nodes"] = len(graph.nodes)
    if not args.no_optimize:
        start = time.perf_counter()
        graph = optimized(args, graph)
        report["optimize_s"] = time.perf_counter() - start
    report["optimized_nodes"] = len(graph.nodes)
    inputs = make_inputs(graph, args)
    exe = None
    if args.targets == "reference":
        report["executor"] = "the reference executor (numpy)"
        if args.timeline:
            raise UsageError("--timeline: the reference executor draws no timeline; give --targets npu_sim")

        def run_once() -> dict:
            return hetero.run_reference(graph, inputs)
    else:
        start = time.perf_counter()
        exe = hetero.compile(graph, targets=target_names(args), passes=[], strict=args.strict,
                             **placement(args), **quantize_options(args, graph), **backend_options(args))
        if args.timeline:
            _record_timelines(exe)
        report["compile_s"] = time.perf_counter() - start
        report["executor"] = args.targets

        def run_once() -> dict:
            return exe.run(inputs)
    outputs = _timed_runs(run_once, args.repeat, report)
    ok = True
    if args.compare:
        ok, report["compare"] = _compare_onnxruntime(model, inputs, outputs, args, args.quantize)
    _finish(args, report, outputs, exe)
    return 0 if ok else 1


def _run_staged(args: argparse.Namespace, model: Any, declared: list, report: dict[str, object]) -> int:
    """``hetero run`` of a model whose shapes or control flow depend on data: compiled in
    stages by ``hetero.compile`` itself (its inputs fixed as the command line says)."""
    import time

    import hetero
    from hetero.core.runtime.executable import Interface

    start = time.perf_counter()
    interface = Interface(list(declared), []).as_graph()
    exe = hetero.compile(model, targets=target_names(args), passes=[] if args.no_optimize else None,
                         strict=args.strict, input_shapes=parse_shapes(args.input_shape) or None,
                         input_values=parse_values(args.input_value) or None, **placement(args),
                         **quantize_options(args, interface), **backend_options(args))
    report["compile_s"] = time.perf_counter() - start
    report["executor"] = f"{args.targets}, in stages (data-dependent shapes or control flow)"
    inputs = make_inputs(interface, args)
    outputs = _timed_runs(lambda: exe.run(inputs), args.repeat, report)
    ok = True
    if args.compare:
        ok, report["compare"] = _compare_onnxruntime(model, inputs, outputs, args, args.quantize)
    _finish(args, report, outputs, exe, partition=False)
    return 0 if ok else 1


def run_saved(args: argparse.Namespace) -> int:
    """Run an executable saved by ``hetero compile``: no import, no compile. --repeat,
    --json, --report and --timeline work as for a model; --compare needs --source (the
    model it was compiled from); options that shape a compile are refused by name."""
    import time

    import hetero

    given = [flag for flag, dest, default in _COMPILE_OPTIONS if getattr(args, dest) != default]
    if args.random_weights is not None and not args.source:
        given.append("--random-weights")
    if given:
        raise UsageError(f"{', '.join(given)}: {args.model} is compiled already, so "
                         f"{'this option does' if len(given) == 1 else 'these options do'} nothing; "
                         "give them to hetero compile, or run the model itself")
    if args.compare and not args.source:
        raise UsageError(f"--compare runs the model {args.model} was compiled from: name it with "
                         "--source MODEL (and --random-weights SEED if it was compiled with them)")
    if args.source and not args.compare:
        raise UsageError("--source is the model to --compare with: give --compare onnxruntime too")
    if args.timeline:
        check_writable(args.timeline, "--timeline")
    report: dict[str, object] = {"model": args.model}
    start = time.perf_counter()
    with stage("load"):
        exe = hetero.load(args.model)
    report["load_s"] = time.perf_counter() - start
    report["executor"] = ",".join(dict.fromkeys(p.backend for p in exe.placements)) or "no backend"
    if args.timeline:
        _record_timelines(exe)
    inputs = make_inputs(exe.interface.as_graph(), args)
    outputs = _timed_runs(lambda: exe.run(inputs), args.repeat, report)
    ok = True
    if args.compare:
        warn_light_weights(args, args.source)
        source = model_source(argparse.Namespace(**{**vars(args), "model": args.source}), proto=True)
        ok, report["compare"] = _compare_onnxruntime(source, inputs, outputs, args,
                                                     _quantized_from_float(exe, source))
    _finish(args, report, outputs, exe, partition=False)
    return 0 if ok else 1


#: Options that shape a compile, which a saved executable cannot honour: (flag, dest, default).
_COMPILE_OPTIONS = (
    ("--targets", "targets", "llvm_cpu"), ("--policy", "policy", "priority"), ("--override", "override", []),
    ("--strict", "strict", False), ("--quantize", "quantize", False),
    ("--calibrate", "calibrate", 8), ("--calibration-data", "calibration_data", None),
    ("--calibration-method", "calibration_method", "minmax"), ("--no-optimize", "no_optimize", False),
    ("--input-shape", "input_shape", []), ("--input-value", "input_value", []), ("--max-elements", "max_elements", None),
    ("--option", "option", []),
)


def _timed_runs(run_once: Callable[[], dict], repeat: int, report: dict[str, object]) -> dict:
    """Run ``repeat`` times (at least once); the median time goes into ``report``."""
    import statistics
    import time

    import hetero

    if repeat < 1:
        raise UsageError(f"--repeat {repeat}: run at least once")
    times = []
    for i in range(repeat):
        progress.step("run", i + 1, repeat)
        start = time.perf_counter()
        outputs = run_once()
        times.append(time.perf_counter() - start)
    progress.end("run")
    report["run_s"] = statistics.median(times)
    report["outputs"] = {name: str(hetero.TensorType.of(a)) for name, a in outputs.items()}
    return outputs


def _finish(args: argparse.Namespace, report: dict[str, object], outputs: dict, exe: Any,
            partition: bool = True) -> None:
    """Write the timelines, then print the report (JSON or text)."""
    if args.timeline:
        report["timelines"] = _write_timelines(exe, args.timeline)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if partition and exe is not None and exe.partition_report:
        print(exe.partition_report + "\n")
    _print_run(report, outputs)
    if args.report and exe is not None:
        print(exe.report())
    for region, path in report.get("timelines", {}).items():  # type: ignore[attr-defined]
        print(f"timeline  region {region}: {path}")


def _record_timelines(exe: Any) -> None:
    """Make the parts of an executable (compiled or loaded) that can draw a timeline record one."""
    from hetero.core.plugin.capabilities import RecordsTimeline

    recorders = [p.part for p in exe.placements if isinstance(p.part, RecordsTimeline)]
    if not recorders:
        raise UsageError("--timeline: no part of this executable draws a timeline (npu_sim does)")
    for part in recorders:
        part.record_timeline = True


def _write_timelines(exe: Any, path: str) -> dict[str, str]:
    """Write each region's timeline page: ``path`` itself, or ``STEM.rN.html`` for several."""
    pages = exe.timelines() if exe is not None else {}
    if not pages:
        raise UsageError("--timeline: no part of this executable draws a timeline (npu_sim does)")
    target = Path(path)
    written = {}
    for region, page in pages.items():
        out = target if len(pages) == 1 else target.with_name(f"{target.stem}.{region}{target.suffix}")
        write_text(str(out), page, "--timeline")
        written[region] = str(out)
    return written


def _quantized_from_float(exe: Any, source: Any) -> bool:
    """Whether ``exe`` computes int8 where its source model is float (compiled with --quantize)."""
    from hetero.core.ir.ops.qint import INTEGER_OPS

    quantised = set(INTEGER_OPS) | {"QuantizeLinear", "DequantizeLinear"}
    ops = set((exe.partition or {}).get("coverage", {}))
    return bool(ops & quantised) and not any(n.op_type in quantised for n in source.graph.node)


def _compare_onnxruntime(model: Any, inputs: dict, outputs: dict, args: argparse.Namespace,
                         quantized: bool) -> tuple[bool, dict]:
    """Run ``model`` in onnxruntime on ``inputs`` and judge ``outputs`` against it (by cosine
    when ``quantized``: an int8 model of a float one)."""
    import numpy as np

    try:
        import onnxruntime as ort
    except ImportError:
        raise UsageError("--compare onnxruntime needs onnxruntime: pip install onnxruntime") from None
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3  # errors only: ORT warns about the light models' unused inputs
    session = ort.InferenceSession(model.SerializeToString(), options,  # type: ignore[attr-defined]
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    from hetero.core.frontend.onnx.bind import value_array

    feeds = {k: v for k, v in inputs.items() if k in wanted}
    declared = {info.name: info for info in model.graph.input}  # type: ignore[attr-defined]
    for name, value in (parse_values(args.input_value) or {}).items():
        feeds[name] = value_array(declared[name], value, "the model")  # bound: no input of ours
    expected = dict(zip(names, session.run(None, feeds)))
    result: dict[str, object] = {"reference": f"onnxruntime {ort.__version__}", "rtol": args.rtol,
                                 "atol": args.atol, "outputs": {}}
    if quantized:
        result["min_cosine"] = QUANTIZED_MIN_COSINE
    ok = True
    for name, want in expected.items():
        got = outputs[name].astype(np.float64)
        diff = np.abs(got - want)
        norms = float(np.linalg.norm(got) * np.linalg.norm(want))
        cosine = float(got.ravel() @ want.ravel().astype(np.float64) / norms) if norms else 1.0
        # An int8 model cannot match the float one to float tolerances: it is judged,
        # as quantisation tools judge it, by the cosine similarity of its outputs.
        close = cosine >= QUANTIZED_MIN_COSINE if quantized else bool(
            np.allclose(got, want, rtol=args.rtol, atol=args.atol))
        result["outputs"][name] = {  # type: ignore[index]
            "max_abs_error": float(diff.max(initial=0.0)),
            # Relative to the output's range, not element by element: an element near zero
            # makes an elementwise ratio say nothing (an int8 model's is 1.0 on any zero).
            "max_error_of_range": float(diff.max(initial=0.0) / max(float(np.abs(want).max(initial=0.0)), 1e-30)),
            "cosine": cosine,
            "argmax_agrees": bool(got.argmax() == want.argmax()) if got.size else True,
            "ok": close,
        }
        ok &= close
    result["ok"] = ok
    return ok, result


def _print_run(report: dict, outputs: dict) -> None:
    """The run report as text: the steps' times, the outputs, the comparison."""
    print(f"model     {report['model']}")
    if "load_s" in report:
        print(f"load      {report['load_s']:.3f} s, a saved executable")
    if "import_s" in report:
        print(f"import    {report['import_s']:.3f} s, {report['nodes']} nodes")
    if "optimize_s" in report:
        print(f"optimise  {report['optimize_s']:.3f} s, {report['nodes']} -> {report['optimized_nodes']} nodes")
    if "compile_s" in report:
        print(f"compile   {report['compile_s']:.3f} s for {report['executor']}")
    print(f"run       {report['run_s']:.3f} s on {report['executor']}")
    for name, array in outputs.items():
        flat = array.ravel()
        top = flat.argsort()[::-1][:5] if array.dtype.kind == "f" else []
        print(f"output    {name}: {report['outputs'][name]}" + (f", top-5 indices {list(map(int, top))}" if len(top) else ""))
    compare = report.get("compare")
    if compare:
        for name, r in compare["outputs"].items():
            judged = (f"cosine >= {compare['min_cosine']}, as an int8 model is judged" if "min_cosine" in compare
                      else f"every element within atol {compare['atol']} + rtol {compare['rtol']} x |ref|")
            print(f"compare   {name} vs {compare['reference']}: max |err| {r['max_abs_error']:.2e} "
                  f"({r['max_error_of_range']:.2%} of max |ref|), cosine {r['cosine']:.6f}, "
                  f"argmax {'agrees' if r['argmax_agrees'] else 'DIFFERS'}"
                  f" -> {'OK' if r['ok'] else 'MISMATCH'} (decided by {judged})")


def cmd_compare(args: argparse.Namespace) -> int:
    """Partition, then compare each region on its backend with the reference; exit 1 when
    a region is beyond tolerance."""
    from hetero.core.runtime.compare import (
        compare_regions,
        describe_comparison,
        format_comparison,
    )

    warn_light_weights(args, args.model)
    graph = load_graph(args)
    driver = session(args, graph)
    graph = driver.prepare(graph)
    part = driver.partition(graph)
    results = compare_regions(graph, part, make_inputs(graph, args), rtol=args.rtol, atol=args.atol)
    report = describe_comparison(results, args.rtol, args.atol)
    names = driver.names
    if args.json:
        print(json.dumps({"model": args.model, "targets": names, **report}, indent=2))
    else:
        print(f"model     {args.model}: {len(graph.nodes)} nodes in {len(part.regions)} region(s) "
              f"over {', '.join(names)}")
        print(format_comparison(results, args.rtol, args.atol, nodes=args.nodes))
    return 0 if report["ok"] else 1


def cmd_trust(args: argparse.Namespace) -> int:
    """Sign each named executable with this user's key."""
    from hetero.core.runtime.executable import trust

    for path in args.executable:
        trust(path)
        print(f"signed {path}")
    return 0
