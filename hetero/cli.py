"""The ``hetero`` command.

Each subcommand is one ``_cmd_*`` function registered in :func:`build_parser`. A
:class:`hetero.errors.HeteroError` ends the command with its message and exit code
2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from hetero.errors import HeteroError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hetero", description="Compile ONNX models across heterogeneous backends."
    )
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plugins = subs.add_parser(
        "plugins", help="list the installed backend plugins, and the broken or disabled ones"
    )
    plugins.add_argument("backend", nargs="?", help="show this backend in detail")
    plugins.add_argument("--json", action="store_true", help="print JSON for tools")
    plugins.set_defaults(func=_cmd_plugins)

    inspect = subs.add_parser(
        "inspect", help="op histogram, parameters, FLOPs and unsupported ops of a model"
    )
    _add_model_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print JSON for tools")
    inspect.set_defaults(func=_cmd_inspect)

    comp = subs.add_parser("compile", help="compile a model for a target and save the executable")
    _add_model_arguments(comp)
    _add_placement_arguments(comp)
    comp.add_argument("--strict", action="store_true",
                      help="a refused node or a failed compile is an error instead of a fallback to llvm_cpu")
    _add_quantize_arguments(comp)
    comp.add_argument("-o", "--output", help="where to save the executable (default MODEL.hetero)")
    comp.add_argument("--dump", metavar="DIR", help="write every stage (graph, tensor IR, LLVM IR, assembly)")
    comp.add_argument("--aot", metavar="TRIPLE[:CPU]",
                      help="with --dump, also write each kernel's object file and assembly for this "
                           "target (e.g. aarch64-unknown-linux-gnu:cortex-a76)")
    comp.set_defaults(func=_cmd_compile)

    run = subs.add_parser(
        "run", help="compile (or load) and run a model, optionally comparing with onnxruntime"
    )
    _add_model_arguments(run)
    _add_placement_arguments(run, extra="; or 'reference' for the numpy reference executor")
    run.add_argument("--strict", action="store_true",
                     help="a refused node or a failed compile is an error instead of a fallback to llvm_cpu")
    _add_quantize_arguments(run)
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
    run.set_defaults(func=_cmd_run)

    part = subs.add_parser(
        "partition", help="show how a model splits across backends, before compiling anything"
    )
    _add_model_arguments(part)
    _add_placement_arguments(part)
    _add_quantize_arguments(part)
    part.add_argument("--format", choices=["text", "json", "dot", "html"], default="text",
                      help="report format: text, JSON for tools, Graphviz DOT, or a self-contained HTML page")
    part.add_argument("--output", metavar="FILE", help="write the report to FILE instead of printing it")
    part.set_defaults(func=_cmd_partition)

    compare = subs.add_parser(
        "compare", help="run every region on its backend and on the reference; name the first "
                        "region beyond tolerance"
    )
    _add_model_arguments(compare)
    _add_placement_arguments(compare)
    _add_quantize_arguments(compare)
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
    compare.set_defaults(func=_cmd_compare)

    conformance = subs.add_parser(
        "conformance", help="run the conformance suite against an installed backend (needs pytest)"
    )
    conformance.add_argument("backend", help="the backend to check, e.g. llvm_cpu")
    conformance.add_argument("--known-failures", metavar="FILE",
                             help="test names expected to fail, one a line ('#' comments)")
    conformance.add_argument("--json", metavar="FILE", help="write the op x dtype matrix as JSON")
    conformance.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    conformance.add_argument("--max-examples", type=int, metavar="N",
                             help="cases drawn per op and dtype (default 5)")
    conformance.add_argument("--ops", metavar="OP,OP", help="check only these ops op by op")
    conformance.set_defaults(func=_cmd_conformance)
    return parser


def _add_placement_arguments(parser: argparse.ArgumentParser, extra: str = "") -> None:
    parser.add_argument("--targets", default="llvm_cpu",
                        help=f"comma-separated backends in priority order; llvm_cpu is the fallback{extra}")
    parser.add_argument("--policy", choices=["priority", "cost"], default="priority",
                        help="first target that takes a node, or least estimated time (default priority)")
    parser.add_argument("--override", action="append", default=[], metavar="NODE_OR_OP=BACKEND",
                        help="pin a node (by name) or every node of an op type to a backend")


def _add_quantize_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quantize", action="store_true",
                        help="post-training int8 quantisation after the graph passes (npu_sim computes int8 only)")
    parser.add_argument("--calibrate", type=int, default=8, metavar="N",
                        help="with --quantize: calibrate on N seeded standard-normal inputs (default 8)")
    parser.add_argument("--calibration-data", metavar="FILE.npz",
                        help="with --quantize: calibrate on these inputs instead (one array per input "
                             "name, samples along the first axis)")
    parser.add_argument("--calibration-method", choices=["minmax", "percentile"], default="minmax",
                        help="with --quantize: how tensor ranges are taken (default minmax)")


def _quantize_options(args: argparse.Namespace, graph: object) -> dict[str, object]:
    """``hetero.compile``'s quantize= and calibration_method=, from the command line."""
    import numpy as np

    if not args.quantize:
        if args.calibration_data:
            raise UsageError("--calibration-data calibrates a quantisation: give --quantize too")
        return {}
    inputs = graph.inputs  # type: ignore[attr-defined]
    if args.calibration_data:
        try:
            with np.load(args.calibration_data) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError) as exc:
            raise UsageError(f"--calibration-data {args.calibration_data}: cannot read it: {exc}") from None
        missing = [v.name for v in inputs if v.name not in arrays]
        if missing:
            raise UsageError(f"--calibration-data {args.calibration_data} holds no array for input(s) "
                             f"{', '.join(missing)}; it has {', '.join(arrays) or 'none'}")
        count = min(len(arrays[v.name]) for v in inputs)
        samples = [{v.name: arrays[v.name][i] for v in inputs} for i in range(count)]
    else:
        if args.calibrate < 1:
            raise UsageError(f"--calibrate {args.calibrate}: calibrate on at least one input")
        # Seeds away from --seed, so the run's own input is not among the calibration samples.
        rng = np.random.default_rng(10_000 + getattr(args, "seed", 0))
        samples = [{v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in inputs}
                   for _ in range(args.calibrate)]
    return {"quantize": samples, "calibration_method": args.calibration_method}


def _prepared(args: argparse.Namespace, graph: object, backends: list) -> object:
    """``graph`` quantised as asked and lowered for the integer backends among ``backends``,
    as ``hetero.compile`` does before it partitions."""
    from hetero.core.compiler import FALLBACK
    from hetero.core.quant.flow import prepare_for_targets

    options = _quantize_options(args, graph)
    return prepare_for_targets(graph, backends, FALLBACK, options.get("quantize"),  # type: ignore[arg-type]
                               options.get("calibration_method", "minmax"))  # type: ignore[arg-type]


def _placement(args: argparse.Namespace) -> dict[str, object]:
    """The compile/partition keywords the placement arguments ask for."""
    overrides = {}
    for item in args.override:
        key, sep, backend = item.partition("=")
        if not sep or not key or not backend:
            raise UsageError(f"--override {item!r}: write NODE_OR_OP=BACKEND (e.g. Conv=npu_sim)")
        overrides[key] = backend
    return {"policy": args.policy, "overrides": overrides}


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="an .onnx file, or light:NAME for a model onnx ships "
                        "(light:resnet50, light:squeezenet, ...)")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=D,D,...",
                        help="fix a dynamic input shape, e.g. input=1,3,224,224")
    parser.add_argument("--max-elements", type=int, default=None,
                        help="element budget of any one tensor (default 2**30)")


def _cmd_plugins(args: argparse.Namespace) -> int:
    """List backends; broken plugins are reported, not fatal, so the exit code is 0."""
    # Imported here: the other subcommands need not pay for the plugin machinery.
    from hetero.core.plugin.listing import describe_plugins, format_backend, format_plugins
    from hetero.core.plugin.manager import PluginWarning, load_plugins

    # The listing reports broken plugins itself; the warnings would say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        plugins = load_plugins()
    if args.backend and args.json:
        plugins.get(args.backend)  # an unknown name is an error, with a did-you-mean
        described = describe_plugins(plugins)
        print(json.dumps(next(b for b in described["backends"] if b["name"] == args.backend), indent=2))
    elif args.backend:
        print(format_backend(plugins, args.backend))
    elif args.json:
        print(json.dumps(describe_plugins(plugins), indent=2))
    else:
        print(format_plugins(plugins))
    return 0


def _load(args: argparse.Namespace, model: object = None) -> object:
    """Import the model named on the command line (or the given ModelProto)."""
    import hetero
    from hetero.core.frontend.light import resolve_model

    options = {} if args.max_elements is None else {"max_elements": args.max_elements}
    source = model if model is not None else resolve_model(args.model)
    return hetero.load_onnx(source, _parse_shapes(args.input_shape), **options)


def _parse_shapes(items: Sequence[str]) -> dict[str, list[int]] | None:
    shapes = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise UsageError(f"--input-shape {item!r}: write NAME=D,D,... (e.g. input=1,3,224,224)") from None
    return shapes or None


def _cmd_inspect(args: argparse.Namespace) -> int:
    """Print what the model is made of; unsupported ops are listed, with exit code 1."""
    from hetero.core.ir.stats import graph_stats
    from hetero.errors import UnsupportedOpError

    try:
        graph = _load(args)
    except UnsupportedOpError as exc:
        if args.json:
            print(json.dumps({"model": args.model, "unsupported": str(exc)}, indent=2))
        else:
            print(f"unsupported ops: {exc}")
        return 1
    stats = graph_stats(graph)
    if args.json:
        print(json.dumps({
            "model": args.model,
            "graph": graph.name,
            "inputs": {v.name: str(v.type) for v in graph.inputs},
            "outputs": {v.name: str(v.type) for v in graph.outputs},
            "nodes": stats.nodes,
            "op_histogram": stats.op_histogram,
            "parameters": stats.parameters,
            "parameter_bytes": stats.parameter_bytes,
            "flops": stats.flops,
            "flops_by_op": stats.flops_by_op,
            "unsupported": None,
        }, indent=2))
        return 0
    print(f"model       {args.model} (graph {graph.name})")
    for v in graph.inputs:
        print(f"input       {v.name}: {v.type}")
    for v in graph.outputs:
        print(f"output      {v.name}: {v.type}")
    print(f"nodes       {stats.nodes}")
    print(f"parameters  {stats.parameters:,} ({stats.parameter_bytes / 1e6:.1f} MB)")
    print(f"FLOPs       {stats.flops / 1e9:.3f} G per run")
    print("unsupported none")
    print(f"{'op':<22}{'nodes':>6}{'FLOPs':>12}{'share':>8}")
    for op, count in stats.op_histogram.items():
        flops = stats.flops_by_op.get(op, 0)
        share = flops / stats.flops if stats.flops else 0.0
        print(f"{op:<22}{count:>6}{flops / 1e9:>11.3f}G{share:>8.1%}")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    """Compile for the targets, save the executable, say what was made."""
    import time

    import hetero
    from hetero.core.frontend.light import resolve_model

    path = resolve_model(args.model)
    start = time.perf_counter()
    if args.aot and not args.dump:
        raise UsageError("--aot writes into the --dump folder: give --dump DIR too")
    options = {"aot": args.aot} if args.aot else {}
    graph = _load(args)
    exe = hetero.compile(graph, targets=args.targets.split(","), dump=args.dump,
                         strict=args.strict, **_placement(args), **_quantize_options(args, graph), **options)
    seconds = time.perf_counter() - start
    output = args.output or f"{Path(path).stem}.hetero"
    exe.save(output)
    kernels = sum(len(getattr(p.part, "steps", ())) for p in exe.placements)
    if exe.partition_report:
        print(exe.partition_report + "\n")
    for fallback in exe.fallbacks:
        print(f"fallback  {fallback}")
    print(f"compiled {args.model} for {args.targets} in {seconds:.2f} s: {kernels} kernels")
    print(f"saved     {output}" + (f"\ndumped    every stage under {args.dump}" if args.dump else ""))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """Compile (or load) and run; with --compare, check against onnxruntime."""
    import statistics
    import time

    import hetero

    if args.model.endswith(".hetero"):
        return _run_saved(args)
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
    graph = _load(args, model)
    report["import_s"] = time.perf_counter() - start
    report["nodes"] = len(graph.nodes)
    if not args.no_optimize:
        start = time.perf_counter()
        graph = hetero.optimize(graph)
        report["optimize_s"] = time.perf_counter() - start
    report["optimized_nodes"] = len(graph.nodes)
    inputs = _inputs(graph, args)
    if args.targets == "reference":
        report["executor"] = "the reference executor (numpy)"

        def run_once() -> dict:
            return hetero.run_reference(graph, inputs)
    else:
        start = time.perf_counter()
        timeline = {"npu_timeline": True} if args.timeline else {}
        exe = hetero.compile(graph, targets=args.targets.split(","), passes=[], strict=args.strict,
                             **_placement(args), **_quantize_options(args, graph), **timeline)
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


def _cmd_partition(args: argparse.Namespace) -> int:
    """Import, optimise and partition; print the partition report."""
    import hetero
    from hetero.core.partition import partition_graph
    from hetero.core.plugin.manager import get_backend

    names = [t for t in args.targets.split(",") if t]
    if "llvm_cpu" not in names:
        names.append("llvm_cpu")
    backends = [get_backend(n) for n in names]
    graph = _prepared(args, hetero.optimize(_load(args)), backends)
    part = partition_graph(graph, backends, **_placement(args))
    if args.format == "dot":
        from hetero.core.partition.dot import to_dot

        text = to_dot(part)
    elif args.format == "html":
        from hetero.core.partition.html import to_html

        text = to_html(part)
    else:
        text = part.to_json() if args.format == "json" else part.report()
    if args.output:
        try:
            Path(args.output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--output {args.output}: cannot write the report: {exc.strerror}") from None
        print(f"wrote the {args.format} report of {graph.name} to {args.output}")
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
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
    graph = _prepared(args, hetero.optimize(_load(args, model)), backends)
    part = partition_graph(graph, backends, **_placement(args))
    results = compare_regions(graph, part, _inputs(graph, args), rtol=args.rtol, atol=args.atol)
    report = describe_comparison(results, args.rtol, args.atol)
    if args.json:
        print(json.dumps({"model": args.model, "targets": names, **report}, indent=2))
    else:
        print(f"model     {args.model}: {len(graph.nodes)} nodes in {len(part.regions)} region(s) "
              f"over {', '.join(names)}")
        print(format_comparison(results, args.rtol, args.atol, nodes=args.nodes))
    return 0 if report["ok"] else 1


def _run_saved(args: argparse.Namespace) -> int:
    """Run an executable saved by ``hetero compile``: no import, no compile."""
    import hetero

    exe = hetero.load(args.model)
    outputs = exe.run(_inputs(exe.interface.as_graph(), args))
    for name, array in outputs.items():
        print(f"output    {name}: {hetero.TensorType.of(array)}")
    if args.report:
        print(exe.report())
    return 0


def _inputs(graph: object, args: argparse.Namespace) -> dict[str, object]:
    import numpy as np

    given = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep:
            raise UsageError(f"--input {item!r}: write NAME=FILE.npy")
        given[name] = np.load(path)
    rng = np.random.default_rng(args.seed)
    for v in graph.inputs:  # type: ignore[attr-defined]
        if v.name not in given:
            data = rng.standard_normal(v.shape) if v.dtype.kind == "f" else rng.integers(0, 2, v.shape)
            given[v.name] = data.astype(v.dtype)
    return given


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


def _cmd_conformance(args: argparse.Namespace) -> int:
    """Run the suite in this process with pytest; 0 when every check passes, else 1."""
    try:
        import pytest
    except ImportError:
        print("hetero conformance: error: pytest is not installed; "
              "run: pip install 'hetero[test]'", file=sys.stderr)
        return 2
    from hetero.testing.plugin import SUITE

    # -c devnull: the user's pytest configuration (addopts, filterwarnings=error...)
    # is for their tests, not for the suite; the cache would litter the current folder.
    # Rooted at the suite's folder, test ids read suite.py::test_op[Conv-float32].
    # hetero is imported already, so pytest cannot rewrite its asserts (and would warn);
    # the suite's asserts carry their own messages.
    argv = ["-c", os.devnull, "--rootdir", str(SUITE.parent), "-p", "no:cacheprovider",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",
            "-q", "-rfEX", "--hetero-backend", args.backend]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        argv[:0] = ["-p", "hetero.testing.plugin"]  # otherwise its entry point has loaded it
    for option, value in (("--hetero-known-failures", args.known_failures),
                          ("--hetero-report-json", args.json), ("--junitxml", args.junit),
                          ("--hetero-max-examples", args.max_examples),
                          ("--hetero-ops", args.ops)):
        if value is not None:
            argv += [option, str(value)]
    return 0 if pytest.main(argv) == pytest.ExitCode.OK else 1


#: Cosine similarity a quantised model's outputs need with the float model's (--compare).
QUANTIZED_MIN_COSINE = 0.99


class UsageError(HeteroError):
    """A malformed command-line argument."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HeteroError as exc:
        print(f"hetero {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
