"""``hetero inspect``, ``hetero compile`` and ``hetero partition``: a model before it runs."""

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
    placement,
    prepared,
    quantize_options,
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
    add_quantize_arguments(comp)
    comp.add_argument("-o", "--output", help="where to save the executable (default MODEL.hetero)")
    comp.add_argument("--dump", metavar="DIR", help="write every stage (graph, tensor IR, LLVM IR, assembly)")
    comp.add_argument("--aot", metavar="TRIPLE[:CPU]",
                      help="with --dump, also write each kernel's object file and assembly for this "
                           "target (e.g. aarch64-unknown-linux-gnu:cortex-a76)")
    comp.set_defaults(func=cmd_compile)

    part = subs.add_parser(
        "partition", help="show how a model splits across backends, before compiling anything"
    )
    add_model_arguments(part)
    add_placement_arguments(part)
    add_quantize_arguments(part)
    part.add_argument("--format", choices=["text", "json", "dot", "html"], default="text",
                      help="report format: text, JSON for tools, Graphviz DOT, or a self-contained HTML page")
    part.add_argument("--output", metavar="FILE", help="write the report to FILE instead of printing it")
    part.set_defaults(func=cmd_partition)


def cmd_inspect(args: argparse.Namespace) -> int:
    """Print what the model is made of; unsupported ops are listed, with exit code 1."""
    from hetero.core.ir.stats import graph_stats
    from hetero.errors import UnsupportedOpError

    try:
        graph = load(args)
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


def cmd_compile(args: argparse.Namespace) -> int:
    """Compile for the targets, save the executable, say what was made."""
    import time

    import hetero
    from hetero.core.frontend.light import resolve_model

    path = resolve_model(args.model)
    start = time.perf_counter()
    if args.aot and not args.dump:
        raise UsageError("--aot writes into the --dump folder: give --dump DIR too")
    options = {"aot": args.aot} if args.aot else {}
    graph = load(args)
    exe = hetero.compile(graph, targets=args.targets.split(","), dump=args.dump,
                         strict=args.strict, **placement(args), **quantize_options(args, graph), **options)
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


def cmd_partition(args: argparse.Namespace) -> int:
    """Import, optimise and partition; print the partition report."""
    import hetero
    from hetero.core.partition import partition_graph
    from hetero.core.plugin.manager import get_backend

    names = [t for t in args.targets.split(",") if t]
    if "llvm_cpu" not in names:
        names.append("llvm_cpu")
    backends = [get_backend(n) for n in names]
    graph = prepared(args, hetero.optimize(load(args)), backends)
    part = partition_graph(graph, backends, **placement(args))
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
