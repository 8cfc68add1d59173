"""``hetero inspect``, ``hetero compile`` and ``hetero partition``: a model before it runs."""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
import json
from pathlib import Path
from typing import Any

from hetero.cli.common import (
    UsageError,
    add_model_arguments,
    add_placement_arguments,
    backend_options,
    check_writable,
    import_graph,
    load_graph,
    model_source,
    parse_shapes,
    placement,
    prepared,
    quantize_options,
    session,
    stage,
    target_names,
    write_text,
)


def add_parsers(subs: Any) -> None:
    """Register ``inspect``, ``compile`` and ``partition``."""
    inspect = subs.add_parser(
        "inspect", help="op histogram, parameters, FLOPs and unsupported ops of a model"
    )
    add_model_arguments(inspect)
    inspect.add_argument("--json", action="store_true", help="print JSON for tools")
    inspect.set_defaults(func=cmd_inspect)

    comp = subs.add_parser("compile", help="compile a model for a target and save the executable")
    add_model_arguments(comp)
    add_placement_arguments(comp)
    comp.add_argument("--strict", action="store_true",
                      help="a refused node or a failed compile is an error instead of a fallback to llvm_cpu")
    comp.add_argument("-o", "--output", help="where to save the executable (default MODEL.hetero)")
    comp.add_argument("--dump", metavar="DIR", help="write every stage (graph, tensor IR, LLVM IR, assembly)")
    comp.add_argument("--aot", metavar="TRIPLE[:CPU]",
                      help="with --dump, also write each kernel's object file and assembly for this "
                           "target (e.g. aarch64-unknown-linux-gnu:cortex-a76)")
    comp.add_argument("--cache", metavar="DIR",
                      help="compile-cache folder (default $HETERO_CACHE_DIR when set): a part compiled "
                           "before with the same subgraph and options is loaded instead of compiled")
    comp.add_argument("--records", metavar="FILE",
                      help="tuning records (hetero tune -o): each kernel with a record made on this machine "
                           "compiles with the fastest one")
    comp.add_argument("--timings", action="store_true",
                      help="print where the time went: each phase of the import, the core and every "
                           "backend, with its seconds and share")
    comp.set_defaults(func=cmd_compile)

    part = subs.add_parser(
        "partition", help="show how a model splits across backends, before compiling anything"
    )
    add_model_arguments(part)
    add_placement_arguments(part)
    part.add_argument("--format", choices=["text", "json", "dot", "html"], default="text",
                      help="report format: text, JSON for tools, Graphviz DOT, or a self-contained HTML page")
    part.add_argument("--output", metavar="FILE", help="write the report to FILE instead of printing it")
    part.set_defaults(func=cmd_partition)


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print what the model is made of, as imported (optimised and quantised with
    --quantize); a model with unsupported ops still gets its histogram, parameters and
    FLOPs (of its supported part), with the unsupported ops listed and exit code 1."""
    from hetero.core.ir.stats import graph_stats
    from hetero.errors import UnsupportedOpError

    unsupported = None
    source = model_source(args)
    try:
        graph = import_graph(args, source)
    except UnsupportedOpError as exc:
        from hetero.cli.stats import supported_stats

        proto = model_source(args, proto=True)
        stats, unsupported = supported_stats(proto, parse_shapes(args.input_shape), args.max_elements)
        message = str(exc)
        name = proto.graph.name
    else:
        if args.quantize:
            graph = prepared(args, graph if args.no_optimize else load_graph(args, source))
        stats, message, name = graph_stats(graph), None, graph.name
    if args.json:
        report: dict[str, object] = {"model": args.model, "graph": name}
        if unsupported is None:
            report["inputs"] = {v.name: str(v.type) for v in graph.inputs}
            report["outputs"] = {v.name: str(v.type) for v in graph.outputs}
        if stats is not None:
            report.update(nodes=stats.nodes, op_histogram=stats.op_histogram, parameters=stats.parameters,
                          parameter_bytes=stats.parameter_bytes, flops=stats.flops,
                          flops_by_op=stats.flops_by_op)
        report["unsupported"] = message
        report["unsupported_nodes"] = unsupported.nodes if unsupported is not None else {}
        print(json.dumps(report, indent=2))
        return 0 if unsupported is None else 1
    print(f"model       {args.model} (graph {name})")
    if unsupported is None:
        for v in graph.inputs:
            print(f"input       {v.name}: {v.type}")
        for v in graph.outputs:
            print(f"output      {v.name}: {v.type}")
    if stats is not None:
        print(f"nodes       {stats.nodes}")
        print(f"parameters  {stats.parameters:,} ({stats.parameter_bytes / 1e6:.1f} MB)")
        print(f"FLOPs       {stats.flops / 1e9:.3f} G per run"
              + (" (of the supported ops)" if unsupported is not None else ""))
    if unsupported is None:
        print("unsupported none")
    else:
        print(f"unsupported {unsupported.count} node(s) of {len(unsupported.nodes)} op type(s) hetero "
              "does not support:")
        for op, names in unsupported.nodes.items():
            print(f"            {op}: {', '.join(names)}")
    if stats is not None:
        print(f"{'op':<22}{'nodes':>6}{'FLOPs':>12}{'share':>8}")
        for op, count in stats.op_histogram.items():
            flops = stats.flops_by_op.get(op, 0)
            share = flops / stats.flops if stats.flops else 0.0
            shown = "-" if unsupported is not None and op in unsupported.nodes else f"{flops / 1e9:.3f}G"
            print(f"{op:<22}{count:>6}{shown:>12}{share:>8.1%}")
    return 0 if unsupported is None else 1


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile for the targets, save the executable, say what was made."""
    import time

    import hetero
    from hetero.core import timing
    from hetero.core.frontend.light import resolve_model
    from hetero.core.plugin.capabilities import CountsKernels
    from hetero.core.plugin.manager import load_plugins

    if args.aot and not args.dump:
        raise UsageError("--aot writes into the --dump folder: give --dump DIR too")
    output = args.output or f"{Path(resolve_model(args.model)).stem}.hetero"
    if args.dump:
        Path(args.dump).mkdir(parents=True, exist_ok=True)  # made by the compile anyway; -o may point into it
    check_writable(output, "-o/--output")
    with timing.recording() if args.timings else nullcontext() as times:
        start = time.perf_counter()
        options = {**backend_options(args), **({"aot": args.aot} if args.aot else {})}
        # Discovered once per process: done here, it is a phase of its own (importing
        # every backend's package) rather than part of the compile's first step.
        with timing.phase("discover plugins"):
            load_plugins()
        graph = load_graph(args)
        exe = hetero.compile(graph, targets=target_names(args), passes=[], dump=args.dump, cache=args.cache,
                             records=args.records, strict=args.strict, **placement(args),
                             **quantize_options(args, graph), **options)
        seconds = time.perf_counter() - start
        with stage("save"):
            exe.save(output)
    kernels = sum(p.part.kernel_count for p in exe.placements if isinstance(p.part, CountsKernels))
    if exe.partition_report:
        print(exe.partition_report + "\n")
    for fallback in exe.fallbacks:
        print(f"fallback  {fallback}")
    fell = "".join(f"; {f.region} fell back to {f.fallback}" for f in exe.fallbacks)
    print(f"compiled {args.model} for {args.targets} in {seconds:.2f} s: {kernels} kernels{fell}")
    where = os.path.abspath(output)
    size = f"{os.path.getsize(where) / 1e6:.1f} MB"
    print(f"saved     {where} ({size})" + ("" if args.output else "; no -o/--output was given, so it is named "
                                              "after the model, in the current folder")
          + (f"\ndumped    every stage under {args.dump}" if args.dump else ""))
    if times is not None:
        print(f"\ntimings (import, compile and save):\n{times.table()}")
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    """Import, optimise, quantise as asked and partition through the same driver as
    ``hetero.compile``; print the partition report."""
    if args.output:
        check_writable(args.output, "--output")
    graph = load_graph(args)
    driver = session(args, graph)
    graph = driver.prepare(graph)
    part = driver.partition(graph)
    if args.format == "dot":
        from hetero.core.partition.dot import to_dot

        text = to_dot(part)
    elif args.format == "html":
        from hetero.core.partition.html import to_html

        text = to_html(part)
    else:
        text = part.to_json() if args.format == "json" else part.report()
    if args.output:
        write_text(args.output, text if text.endswith("\n") else text + "\n", "--output")
        print(f"wrote the {args.format} report of {graph.name} to {args.output}")
    else:
        print(text, end="" if text.endswith("\n") else "\n")
    return 0
