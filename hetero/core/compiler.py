"""``hetero.compile``: from a model to an :class:`~hetero.core.runtime.executable.Executable`.

The steps: import (ONNX path, ModelProto or Graph), optimise, quantise when asked
and lower quantised units for integer backends (:mod:`hetero.core.quant.flow`),
partition the graph across the targets (:func:`~hetero.core.partition.partition_graph`;
``llvm_cpu`` is the fallback and is appended when absent), compile every region's subgraph with its
backend (through the compile cache), and wrap the compiled parts, in region order,
with the transfers between them.

Failure is contained (ARCHITECTURE.md rule 6): a node no target takes lands on the
fallback, and a backend that raises while compiling a region has that region
compiled by the fallback, with a :class:`CompileFallbackWarning` and the error in
the report. ``strict=True`` turns either into an error.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from hetero.core.frontend import load_onnx
from hetero.core.ir.graph import Graph
from hetero.core.partition import DEFAULT_MIN_RATIO, Partition, partition_graph
from hetero.core.passes.pipeline import optimize
from hetero.core import progress
from hetero.core.plugin.backend import Backend, CompiledPart
from hetero.core.plugin.manager import get_backend
from hetero.core.quant.calibrate import Calibration
from hetero.core.quant.flow import prepare_for_targets
from hetero.core.runtime.cache import CompileCache, open_cache
from hetero.core.runtime.executable import (
    CompileFallback,
    Executable,
    Interface,
    Placement,
)
from hetero.core.runtime.transfers import plan_transfers
from hetero.core.runtime.specialize import SpecializingExecutable
from hetero.core.staging import StagedExecutable
from hetero.errors import (
    DataDependentError, DynamicInputError, InputError, Keyword, OperandInputError, PluginError, UnsupportedOpError,
)

#: The backend that takes every op, and whatever the targets refuse or fail to compile.
FALLBACK = "llvm_cpu"


class CompileFallbackWarning(UserWarning):
    """A backend raised while compiling a region; the fallback compiled it instead."""


def compile_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    targets: Sequence[str] = ("llvm_cpu",),
    *,
    policy: str = "priority",
    overrides: Mapping[str, str] | None = None,
    strict: bool = False,
    min_ratio: float = DEFAULT_MIN_RATIO,
    input_shapes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, Sequence[int]]] | None = None,
    input_values: Mapping[str, Any] | None = None,
    max_specializations: int | None = None,
    passes: Sequence[str] | None = None,
    dump: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    quantize: Calibration | Sequence[Mapping[str, Any]] | None = None,
    calibration_method: str = "minmax",
    **options: Any,
) -> Executable | SpecializingExecutable | StagedExecutable:
    """Compile ``model`` for ``targets`` (in order of preference) and return an executable.

    ``policy`` (``"priority"`` or ``"cost"``), ``overrides`` (node name or op type →
    backend) and ``min_ratio`` go to the partitioner. When the first target takes
    every node under the priority policy without overrides, the whole graph stays on
    it, however small: the user asked for that backend, and there is no island to
    weigh against its transfers. ``strict=True`` makes a node its preferred target
    refuses an :class:`~hetero.errors.UnsupportedOpError` and a region its backend
    fails to compile a :class:`~hetero.errors.PluginError`, instead of falling back.

    ``quantize`` asks for post-training int8 quantisation after the passes: a list of
    sample inputs to calibrate on (with ``calibration_method``, ``"minmax"`` or
    ``"percentile"``) or a ready :class:`~hetero.core.quant.Calibration`. Where a
    target computes in int8 (npu_sim), the quantised units it takes become integer
    ops before partitioning; a model that arrives quantised (QDQ) gets the same.

    ``input_values`` binds inputs to values (``{"axes": [1]}``), compiled in as
    constants. A model with dynamic dimensions that ``input_shapes`` leaves open, or
    that computes an operand hetero compiles as a constant (axes, pads, a shape, ``k``)
    from inputs left unbound, gets a
    :class:`~hetero.core.runtime.specialize.SpecializingExecutable`: it compiles at the
    first run with each distinct input shape and operand value, at most
    ``max_specializations`` of them (8 by default; past that a run is a
    :class:`~hetero.errors.SpecializationLimitError`). ``input_shapes`` given as a list
    of mappings compiles each of those shapes ahead of time (a batch-1 and a batch-8
    build in one executable).

    A model whose shapes or control flow depend on data (NonZero, NonMaxSuppression,
    Unique, Compress; a Loop that stops on a computed flag; an If on a computed
    condition; a ``k`` computed from data) gets a
    :class:`~hetero.core.staging.StagedExecutable`: the part before such nodes is
    compiled now, the nodes run on the host (control flow with its bodies compiled),
    and what follows is compiled at the first run for the shapes they produce,
    specialised as above.

    ``passes`` replaces the default optimisation pipeline (``[]`` runs none);
    ``dump`` names a folder that receives every stage (the graph after passes and the
    partition report here, each backend's own stages under a folder of its name, per
    region when there are several). Other keyword options go to the backends, which
    ignore what is not theirs. ``cache`` names a compile-cache folder (by default
    ``$HETERO_CACHE_DIR`` when set): a part compiled before with the same subgraph,
    backend version and options is loaded from it instead of compiled.

    >>> exe = hetero.compile("resnet50.onnx", targets=["npu_sim"])   # doctest: +SKIP
    >>> outputs = exe.run({"data": x})                               # doctest: +SKIP
    >>> print(exe.report())                                          # doctest: +SKIP
    """
    if isinstance(model, Graph):
        graph = model
    else:
        ahead = None if input_shapes is None or isinstance(input_shapes, Mapping) else list(input_shapes)
        settings = dict(policy=policy, overrides=overrides, strict=strict, min_ratio=min_ratio,
                        passes=passes, dump=dump, cache=cache, quantize=quantize,
                        calibration_method=calibration_method, **options)

        def later(stage: onnx.ModelProto | Graph) -> Any:
            # A stage: same targets and settings, no dump of its own. Only the prefix (the
            # one stage given as a Graph) takes the model's inputs, so only it is calibrated
            # on the samples; tails and bodies compile in float.
            quantized = quantize if isinstance(stage, Graph) else None
            return compile_model(stage, targets, max_specializations=max_specializations,
                                 **{**settings, "dump": None, "quantize": quantized})

        def staged(cut: DataDependentError) -> StagedExecutable:
            if cut.split is None:  # raised outside an import (never by load_onnx itself)
                raise cut
            return StagedExecutable(cut.split, later)

        try:
            graph = load_onnx(model, None if ahead is not None else input_shapes, input_values=input_values)
            if ahead is not None:
                raise InputError(f"{{shapes}} gives several shapes, but model {_model_name(model)} "
                                 "has none dynamic; give one mapping", shapes=Keyword("input_shapes"))
        except DataDependentError as exc:
            return staged(exc)
        except (DynamicInputError, OperandInputError) as exc:
            fixed = dict(input_shapes) if isinstance(input_shapes, Mapping) else {}

            def build(shapes: Mapping[str, Sequence[int]], values: Mapping[str, Any]) -> Any:
                try:
                    bound = load_onnx(model, {**fixed, **shapes} or None,
                                      input_values={**(input_values or {}), **values})
                except DataDependentError as cut:
                    return staged(cut)
                return compile_model(bound, targets, **settings)

            exe = SpecializingExecutable(_model_name(model), exc, build, max_specializations)
            for shapes in ahead or ():
                exe.prepare(shapes)
            return exe
    with progress.stage("optimise"):
        graph = optimize(graph, passes)
    names = [targets] if isinstance(targets, str) else list(targets)
    if FALLBACK not in names:
        names.append(FALLBACK)
    backends = {name: get_backend(name) for name in names}
    graph = prepare_for_targets(graph, list(backends.values()), FALLBACK, quantize, calibration_method)
    with progress.stage("partition"):
        partition = partition_for_targets(graph, list(backends.values()), policy, overrides, min_ratio)
    if strict:
        _refuse_fallbacks(partition, overrides or {})
    folder = Path(dump) if dump is not None else None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "graph.txt").write_text(str(graph) + "\n")
        (folder / "partition.txt").write_text(partition.report() + "\n")
    store = open_cache(cache)
    placements: list[Placement] = []
    fallbacks: list[CompileFallback] = []
    units = _units(graph, partition)
    for index, (name, backend_name, subgraph) in enumerate(units, 1):
        progress.step("compile", index, len(units), f"region {name} on {backend_name}")
        backend = backends[backend_name]
        where = None if folder is None else folder / backend.name
        if where is not None and len(partition.regions) > 1:
            where = where / name
        try:
            part = _compile(backend, subgraph, options, store, where)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            inside = {n.name for n in subgraph.nodes}
            pins = sorted({str(p) for n, p in partition.assignment.pins.items() if n in inside})
            if strict or backend.name == FALLBACK or pins:
                raise PluginError(
                    f"backend {backend.name} failed to compile region {name} of {graph.name} "
                    f"({len(subgraph.nodes)} node(s), first {subgraph.nodes[0].name}): {error}"
                    + ("" if backend.name == FALLBACK else
                       f"; {', '.join(pins)} pins its nodes there, so it cannot fall back" if pins else
                       f"; without {{strict}} it falls back to {FALLBACK}"),
                    strict=Keyword("strict", "True")) from exc
            fallback = backends[FALLBACK]
            warnings.warn(f"backend {backend.name} failed to compile region {name} of "
                          f"{graph.name}: {error}; {fallback.name} compiles it instead",
                          CompileFallbackWarning, stacklevel=2)
            fallbacks.append(CompileFallback(name, backend.name, fallback.name, error))
            backend = fallback
            where = None if folder is None else folder / fallback.name / name
            part = _compile(backend, subgraph, options, store, where)
        placements.append(Placement(backend.name, backend.version, part, name,
                                    output_types=tuple(Interface.of(subgraph).outputs)))
    progress.end("compile")
    plan = plan_transfers([(p.backend, p.part.inputs, p.part.outputs) for p in placements])
    for placement, steps in zip(placements, plan):
        placement.transfers_in = tuple(steps)
    # An output that is a constant (a folded Shape, say) is computed by no region.
    constants = {v.name: v.data for v in graph.outputs if v.data is not None}
    return Executable(graph.name, Interface.of(graph), placements, constants,
                      partition=json.loads(partition.to_json()),
                      partition_report=partition.report(), fallbacks=fallbacks)


def _model_name(model: str | os.PathLike[str] | onnx.ModelProto) -> str:
    if isinstance(model, onnx.ModelProto):
        return model.graph.name or "<ModelProto>"
    return Path(model).stem


def _units(graph: Graph, partition: Partition) -> list[tuple[str, str, Graph]]:
    """What to compile: ``(region name, backend, subgraph)`` in execution order.

    When every region is on one backend (disconnected pieces of a graph make several),
    the graph itself is compiled whole, its interface in its own order, as one unit
    named after all its regions (``r0+r1``).
    """
    regions = partition.regions
    if len({r.backend for r in regions}) == 1:
        return [("+".join(r.name for r in regions), regions[0].backend, graph)]
    return [(r.name, r.backend, partition.subgraph(r)) for r in regions]


def partition_for_targets(graph: Graph, backends: Sequence[Backend], policy: str = "priority",
                          overrides: Mapping[str, str] | None = None,
                          min_ratio: float = DEFAULT_MIN_RATIO) -> Partition:
    """The partition :func:`compile_model` compiles: ``graph`` across ``backends`` with the
    fallback, kept whole on the first target when that target takes every node.

    ``hetero partition`` and ``hetero compare`` show this one, so what they show is what
    ``hetero.compile`` builds.
    """
    partition = partition_graph(graph, backends, policy=policy, overrides=overrides,
                                fallback=FALLBACK, min_ratio=min_ratio)
    annotation = partition.assignment.annotation
    first = annotation.names[0]
    whole = all(annotation.takes(n.name, first) for n in graph.nodes)
    if policy == "priority" and not overrides and whole and partition.assignment.moved():
        partition = partition_graph(graph, backends, policy=policy, fallback=FALLBACK, min_ratio=0.0)
    return partition


def _refuse_fallbacks(partition: Partition, overrides: Mapping[str, str]) -> None:
    """Raise for every node off its preferred backend because that backend refused it."""
    annotation = partition.assignment.annotation
    refused = [c for c in partition.assignment.moved()
               if c.node not in overrides and c.op not in overrides
               and not annotation.takes(c.node, c.preferred)]
    if refused:
        preferred = refused[0].preferred
        listed = "; ".join(f"{c.node} ({c.op}): {annotation.reason(c.node, c.preferred)}"
                           for c in refused[:10])
        more = f" and {len(refused) - 10} more" if len(refused) > 10 else ""
        raise UnsupportedOpError(
            f"backend {preferred} refuses {len(refused)} node(s) of {partition.graph.name}: "
            f"{listed}{more}; {{strict}} forbids placing them elsewhere: drop it to let "
            f"{', '.join(sorted({c.backend for c in refused}))} take them", strict=Keyword("strict", "True")
        )


def _compile(backend: Backend, subgraph: Graph, options: Mapping[str, Any],
             store: CompileCache | None, dump_dir: Path | None) -> CompiledPart:
    """One region's compile, through the cache unless its stages are to be dumped."""
    if dump_dir is not None:
        # A dump asks for every stage, and only a real compile writes them.
        return backend.compile(subgraph, {**options, "dump_dir": str(dump_dir)})
    if store is None:
        return backend.compile(subgraph, dict(options))
    return store.compile(subgraph, backend, dict(options))
