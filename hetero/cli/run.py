"""``hetero run`` and ``hetero compare``: a model run, and checked against a reference."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hetero.cli.common import (
    UsageError,
    add_model_arguments,
    add_placement_arguments,
    add_quantize_arguments,
    load,
    make_inputs,
    placement,
    prepared,
    quantize_options,
)

#: Cosine similarity a quantised model's outputs need with the float model's (--compare).
QUANTIZED_MIN_COSINE = 0.99


def add_parsers(subs: Any) -> None:
    """Register ``run`` and ``compare``."""
    run = subs.add_parser(
        "run", help="compile (or load) and run a model, optionally comparing with onnxruntime"
    )
    add_model_arguments(run)
    add_placement_arguments(run, extra="; or 'reference' for the numpy reference executor")
    run.add_argument("--strict", action="store_true",
                     help="a refused node or a failed compile is an error instead of a fallback to llvm_cpu")
    add_quantize_arguments(run)
    run.add_argument("--repeat", type=int, default=1, help="runs to time (the median is reported)")
    run.add_argument("--report", action="store_true", help="print the per-kernel time report")
    run.add_argument("--timeline", metavar="FILE.html",
                     help="write the execution timeline of the parts that draw one (npu_sim), one "
                          "page per region (FILE.rN.html when there are several)")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="an input array (default: seeded standard-normal data)")
    run.add_argument("--seed", type=int, default=0, help="seed of generated inputs")
    run.add_argument("--random-weights", type=int, metavar="SEED",
                     help="replace the model's weights by seeded random ones first")
    run.add_argument("--no-optimize", action="store_true", help="skip the graph passes")
    run.add_argument("--compare", choices=["onnxruntime"],
                     help="run the same model and inputs with this reference and compare")
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
    add_quantize_arguments(compare)
    compare.add_argument("--rtol", type=float, default=1e-3, help="relative tolerance (default 1e-3)")
    compare.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default 1e-4)")
    compare.add_argument("--random-weights", type=int, metavar="SEED",
                         help="replace the model's weights by seeded random ones first")
    compare.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                         help="an input array (default: seeded standard-normal data)")
    compare.add_argument("--seed", type=int, default=0, help="seed of generated inputs")
    compare.add_argument("--nodes", action="store_true",
                         help="show every node whose output the backend exposes, not only the "
                              "first beyond tolerance per region")
    compare.add_argument("--json", action="store_true", help="print JSON for tools")
    compare.set_defaults(func=cmd_compare)


def cmd_run(args: argparse.Namespace) -> int:
    """Compile (or load) and run; with --compare, check against onnxruntime."""
    import statistics
    import time

    import hetero

    if args.model.endswith(".hetero"):
        return run_saved(args)
    from hetero.core.frontend.light import resolve_model
    from hetero.core.frontend.onnx import randomize_weights
    from hetero.core.frontend.onnx.loader import read_model

    report: dict[str, object] = {"model": args.model}
    model = None
    if args.random_weights is not None or args.compare:
        model = read_model(resolve_model(args.model)).model
        if args.random_weights is not None:
            model = randomize_weights(model, args.random_weights)
    start = time.perf_counter()
    graph = load(args, model)
    report["import_s"] = time.perf_counter() - start
    report["nodes"] = len(graph.nodes)
    if not args.no_optimize:
        start = time.perf_counter()
        graph = hetero.optimize(graph)
        report["optimize_s"] = time.perf_counter() - start
    report["optimized_nodes"] = len(graph.nodes)
    inputs = make_inputs(graph, args)
    if args.targets == "reference":
        report["executor"] = "the reference executor (numpy)"

        def run_once() -> dict:
            return hetero.run_reference(graph, inputs)
    else:
        start = time.perf_counter()
        timeline = {"npu_timeline": True} if args.timeline else {}
        exe = hetero.compile(graph, targets=args.targets.split(","), passes=[], strict=args.strict,
                             **placement(args), **quantize_options(args, graph), **timeline)
        report["compile_s"] = time.perf_counter() - start
        report["executor"] = args.targets

        def run_once() -> dict:
            return exe.run(inputs)
    times = []
    for _ in range(max(args.repeat, 1)):
        start = time.perf_counter()
        outputs = run_once()
        times.append(time.perf_counter() - start)
    report["run_s"] = statistics.median(times)
    report["outputs"] = {name: str(hetero.TensorType.of(a)) for name, a in outputs.items()}
    ok = True
    if args.compare:
        ok, report["compare"] = _compare_onnxruntime(model, inputs, outputs, args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        if args.targets != "reference" and exe.partition_report:
            print(exe.partition_report + "\n")
        _print_run(report, outputs)
        if args.report and args.targets != "reference":
            print(exe.report())
    if args.timeline:
        _write_timelines(exe if args.targets != "reference" else None, args.timeline)
    return 0 if ok else 1


def _write_timelines(exe: object, path: str) -> None:
    """Write each region's timeline page: ``path`` itself, or ``STEM.rN.html`` for several."""
    pages = exe.timelines() if exe is not None else {}  # type: ignore[attr-defined]
    if not pages:
        raise UsageError("--timeline: no part of this executable draws a timeline (npu_sim does)")
    target = Path(path)
    for region, page in pages.items():
        out = target if len(pages) == 1 else target.with_name(f"{target.stem}.{region}{target.suffix}")
        try:
            out.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--timeline {out}: cannot write it: {exc.strerror}") from None
        print(f"timeline  region {region}: {out}")


def run_saved(args: argparse.Namespace) -> int:
    """Run an executable saved by ``hetero compile``: no import, no compile."""
    import hetero

    exe = hetero.load(args.model)
    outputs = exe.run(make_inputs(exe.interface.as_graph(), args))
    for name, array in outputs.items():
        print(f"output    {name}: {hetero.TensorType.of(array)}")
    if args.report:
        print(exe.report())
    return 0


def _compare_onnxruntime(model: object, inputs: dict, outputs: dict, args: argparse.Namespace) -> tuple[bool, dict]:
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
    expected = dict(zip(names, session.run(None, {k: v for k, v in inputs.items() if k in wanted})))
    quantized = getattr(args, "quantize", False)
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
            "max_rel_error": float((diff / np.maximum(np.abs(want), 1e-30)).max(initial=0.0)),
            "cosine": cosine,
            "argmax_agrees": bool(got.argmax() == want.argmax()) if got.size else True,
            "ok": close,
        }
        ok &= close
    result["ok"] = ok
    return ok, result


def _print_run(report: dict, outputs: dict) -> None:
    print(f"model     {report['model']}")
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
            judged = (f"cosine >= {compare['min_cosine']}" if "min_cosine" in compare
                      else f"rtol {compare['rtol']}, atol {compare['atol']}")
            print(f"compare   {name} vs {compare['reference']}: max |err| {r['max_abs_error']:.2e}, "
                  f"max rel err {r['max_rel_error']:.2e}, cosine {r['cosine']:.6f}, "
                  f"argmax {'agrees' if r['argmax_agrees'] else 'DIFFERS'}"
                  f" -> {'OK' if r['ok'] else 'MISMATCH'} ({judged})")


def cmd_compare(args: argparse.Namespace) -> int:
    """Partition, then compare each region on its backend with the reference; exit 1 when
    a region is beyond tolerance."""
    import hetero
    from hetero.core.frontend.light import resolve_model
    from hetero.core.frontend.onnx import randomize_weights
    from hetero.core.frontend.onnx.loader import read_model
    from hetero.core.partition import partition_graph
    from hetero.core.plugin.manager import get_backend
    from hetero.core.runtime.compare import (
        compare_regions,
        describe_comparison,
        format_comparison,
    )

    model = None
    if args.random_weights is not None:
        model = randomize_weights(read_model(resolve_model(args.model)).model, args.random_weights)
    names = [t for t in args.targets.split(",") if t]
    if "llvm_cpu" not in names:
        names.append("llvm_cpu")
    backends = [get_backend(n) for n in names]
    graph = prepared(args, hetero.optimize(load(args, model)), backends)
    part = partition_graph(graph, backends, **placement(args))
    results = compare_regions(graph, part, make_inputs(graph, args), rtol=args.rtol, atol=args.atol)
    report = describe_comparison(results, args.rtol, args.atol)
    if args.json:
        print(json.dumps({"model": args.model, "targets": names, **report}, indent=2))
    else:
        print(f"model     {args.model}: {len(graph.nodes)} nodes in {len(part.regions)} region(s) "
              f"over {', '.join(names)}")
        print(format_comparison(results, args.rtol, args.atol, nodes=args.nodes))
    return 0 if report["ok"] else 1
