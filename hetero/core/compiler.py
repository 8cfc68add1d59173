"""``hetero.compile`` and the :class:`Session` that drives it: from a model to an executable.

The :class:`Session` is the one driver (ARCHITECTURE.md rule 5): it binds each target
to the user's options once (:mod:`hetero.core.plugin.target`), chooses the fallback
by declaration (the first target, then the first installed backend, that declares it
takes every canonical op; or the one the user names), and owns every decision between
an optimised graph and an executable: quantisation and the lowering of quantised units
for integer backends (:mod:`hetero.core.quant.flow`), the partition across the targets
(:func:`~hetero.core.partition.partition_graph`) with the keep-whole rule, the compile
of every region's subgraph (through the compile cache) and the fallback of a region
whose backend fails. ``hetero.compile``, every CLI command, the conformance suite and
the ONNX backend adapter go through it.

``compile_model`` adds the import (ONNX path, ModelProto or Graph), the lookup of
the whole model in the compile cache before any pass runs (and its store after a
compile), the graph passes, and the executables that compile later: per input shape
for dynamic dimensions, in stages for data-dependent shapes and control flow.

Failure is contained (ARCHITECTURE.md rule 6): a node no target takes lands on the
fallback, and a backend that raises while compiling a region has that region
compiled by the fallback, with a :class:`CompileFallbackWarning` and the error in
the report: the executable's partition (its report, its placements) shows the
region on the fallback, its nodes moved there for the error, never on the backend
that failed. ``strict=True`` turns either into an error.
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx

from hetero.core import progress, timing
from hetero.core.frontend import load_onnx
from hetero.core.ir.graph import Graph
from hetero.core.partition import DEFAULT_MIN_RATIO, Partition, choose_fallback, partition_graph
from hetero.core.partition.transfers import plan_transfers
from hetero.core.passes.pipeline import optimize
from hetero.core.plugin.backend import Backend, CompiledPart
from hetero.core.plugin.manager import PluginSet, load_plugins
from hetero.core.plugin.target import Target, bind, route_options
from hetero.core.quant.calibrate import Calibration
from hetero.core.quant.flow import prepare_for_targets
from hetero.core.runtime.cache import CACHE_ENV, CacheWarning, CompileCache, GraphArrays, model_key, open_cache
from hetero.core.runtime.executable import (
    CompileFallback,
    Executable,
    Interface,
    Placement,
)
from hetero.core.runtime.specialize import SpecializingExecutable
from hetero.core.schedule.tune.records import TUNED_OPTION, best_traces, load_records
from hetero.core.staging import StagedExecutable
from hetero.errors import (
    CacheError, DataDependentError, DynamicInputError, InputError, Keyword, OperandInputError, OptionError, PluginError,
    UnsupportedOpError,
)

class CompileFallbackWarning(UserWarning):
    """A backend raised while compiling a region; the fallback compiled it instead."""


class Session:
    """One compile's targets, bound once, and every decision from a graph to an executable.

    ``targets`` are backend names in order of preference. ``fallback`` names the
    backend that takes what the targets refuse or fail to compile; by default the
    first target that declares it takes every canonical op, else the first such
    installed backend (bundled ones first), else none: then every node must have a
    taker among the targets. ``options`` are the backends' compile options, each
    routed to the targets that declare it (:func:`~hetero.core.plugin.target.route_options`:
    one no target declares is an :class:`~hetero.errors.OptionError`). ``policy``,
    ``overrides`` and ``min_ratio`` go to the partitioner; ``strict``, ``quantize``
    and ``calibration_method`` are as in :func:`compile_model`; ``cache`` names a
    compile-cache folder; ``records`` and ``records_any_machine`` give the targets their
    tuned schedules, as in :func:`compile_model`.

    >>> session = Session(["my_npu"], options={"my_npu_sram_kib": 64})   # doctest: +SKIP
    >>> part = session.partition(session.prepare(graph))               # doctest: +SKIP
    >>> exe = session.compile(graph)                                    # doctest: +SKIP
    """

    def __init__(
        self,
        targets: Sequence[str] | str,
        *,
        fallback: str | None = None,
        policy: str = "priority",
        overrides: Mapping[str, str] | None = None,
        strict: bool = False,
        min_ratio: float = DEFAULT_MIN_RATIO,
        quantize: Calibration | Sequence[Mapping[str, Any]] | None = None,
        calibration_method: str = "minmax",
        cache: str | os.PathLike[str] | None = None,
        options: Mapping[str, Any] | None = None,
        records: str | os.PathLike[str] | None = None,
        records_any_machine: bool = False,
    ) -> None:
        names = [targets] if isinstance(targets, str) else list(targets)
        if not names:
            raise OptionError("no targets: name at least one backend (`hetero plugins` lists them)")
        if len(set(names)) != len(names):
            raise OptionError(f"targets {names}: each backend may be named once")
        plugins = load_plugins()
        selected = [plugins.get(name) for name in names]
        chosen = _choose_fallback(fallback, selected, plugins)
        if chosen is not None and chosen.name not in names:
            selected.append(chosen)
        routed = route_options(options or {}, selected, plugins.backends)
        if records is not None:
            _route_records(routed, selected, records, records_any_machine)
        #: Every target, the user's in order, then the fallback when it is not among them.
        self.targets: tuple[Target, ...] = tuple(bind(b, routed[b.name]) for b in selected)
        #: The fallback backend's name, or None when no backend can be one.
        self.fallback: str | None = None if chosen is None else chosen.name
        self.policy = policy
        self.overrides = dict(overrides or {})
        self.strict = strict
        self.min_ratio = min_ratio
        self.quantize = quantize
        self.calibration_method = calibration_method
        self.cache = cache
        self.options = dict(options or {})

    @property
    def names(self) -> list[str]:
        """The target names, in order, the fallback last when it was added."""
        return [t.name for t in self.targets]

    def target(self, name: str) -> Target:
        """The target of backend ``name``."""
        return next(t for t in self.targets if t.name == name)

    def in_float(self) -> Session:
        """This session without quantisation: for the stages of a staged model and the
        bodies of its control flow, which compile in float."""
        twin = copy.copy(self)
        twin.quantize = None
        return twin

    def settings(self, passes: Sequence[str] | None) -> dict[str, Any]:
        """Everything of this session that decides what :meth:`compile` makes of a graph
        optimised by ``passes``, as JSON data for the model cache's key
        (:func:`~hetero.core.runtime.cache.model_key`): every target's backend, version,
        options (set or default) and the machine it compiles for, the fallback and the
        partition settings. A backend whose ``tuning_machine()`` raises is a
        :class:`~hetero.errors.CacheError` naming it."""
        targets = []
        for t in self.targets:
            try:
                machine = t.backend.tuning_machine()
            except Exception as exc:  # noqa: BLE001 - a plugin's failure costs the model cache only
                raise CacheError(f"backend {t.name}: tuning_machine() raised {type(exc).__name__}: {exc}, so "
                                 "the model cache cannot key the machine it compiles for; its parts are "
                                 "still cached one by one") from None
            targets.append({"backend": t.name, "version": t.version, "options": dict(t.options),
                            "machine": machine})
        return {
            "targets": targets,
            "fallback": self.fallback, "policy": self.policy, "overrides": self.overrides,
            "strict": self.strict, "min_ratio": self.min_ratio,
            "passes": None if passes is None else list(passes),
        }

    def prepare(self, graph: Graph) -> Graph:
        """``graph`` quantised as asked, its quantised units lowered to integer ops where a
        target other than the fallback computes in int8 (what :meth:`partition` sees)."""
        return prepare_for_targets(graph, self.targets, self.fallback, self.quantize, self.calibration_method)

    def partition(self, graph: Graph) -> Partition:
        """The partition :meth:`compile` builds: ``graph`` (prepared) across the targets.

        When the first target takes every node under the priority policy without
        overrides, the whole graph stays on it, however small: the user asked for
        that backend, and there is no island to weigh against its transfers.
        """
        with progress.stage("partition"):
            partition = partition_graph(graph, self.targets, policy=self.policy, overrides=self.overrides,
                                        fallback=self.fallback, min_ratio=self.min_ratio)
            annotation = partition.assignment.annotation
            first = annotation.names[0]
            whole = all(annotation.takes(n.name, first) for n in graph.nodes)
            if self.policy == "priority" and not self.overrides and whole and partition.assignment.moved():
                partition = partition_graph(graph, self.targets, policy=self.policy, fallback=self.fallback,
                                            min_ratio=0.0)
        if self.strict:
            _refuse_fallbacks(partition, self.overrides)
        return partition

    def compile(self, graph: Graph, dump: str | os.PathLike[str] | None = None) -> Executable:
        """``graph`` (optimised) prepared, partitioned and compiled, region by region.

        ``dump`` names a folder for every stage: the graph and the partition report
        here, each backend's own stages under a folder of its name (per region when
        there are several).
        """
        graph = self.prepare(graph)
        partition = self.partition(graph)
        folder = Path(dump) if dump is not None else None
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "graph.txt").write_text(str(graph) + "\n")
            (folder / "partition.txt").write_text(partition.report() + "\n")
        store = open_cache(self.cache)
        placements: list[Placement] = []
        fallbacks: list[CompileFallback] = []
        units = partition.units()
        for index, (name, backend_name, subgraph) in enumerate(units, 1):
            progress.step("compile", index, len(units), f"region {name} on {backend_name}")
            target = self.target(backend_name)
            where = None if folder is None else folder / target.name
            if where is not None and len(partition.regions) > 1:
                where = where / name
            try:
                part, key = _compile(target, subgraph, store, where)
            except Exception as exc:
                target, (part, key), fallback = self._recover(exc, target, name, subgraph, partition, store,
                                                              folder)
                fallbacks.append(fallback)
            placements.append(Placement(target.name, target.version, part, name,
                                        output_types=tuple(Interface.of(subgraph).outputs), cache_key=key))
        progress.end("compile")
        if fallbacks:
            # What runs, not what was planned: no report names a backend that failed as its region's.
            partition = partition.compiled_on(
                {f.region: (f.fallback, f"{f.backend} failed to compile region {f.region}: {f.error}")
                 for f in fallbacks}, self.targets)
        plan = plan_transfers([(p.backend, p.part.inputs, p.part.outputs) for p in placements],
                              [v.name for v in graph.outputs], partition.assignment.home)
        for placement, into, back in zip(placements, plan.into, plan.home):
            placement.transfers_in, placement.transfers_out = into, back
        # An output that is a constant (a folded Shape, say) is computed by no region.
        constants = {v.name: v.data for v in graph.outputs if v.data is not None}
        return Executable(graph.name, Interface.of(graph), placements, constants,
                          partition=json.loads(partition.to_json()),
                          partition_report=partition.report(), fallbacks=fallbacks)

    def _recover(
        self, exc: Exception, target: Target, region: str, subgraph: Graph, partition: Partition,
        store: CompileCache | None, folder: Path | None,
    ) -> tuple[Target, tuple[CompiledPart, str | None], CompileFallback]:
        """The fallback's compile of a region ``target`` failed on, or the error that says
        why there is none (strict, the region was the fallback's, an override pins it)."""
        error = f"{type(exc).__name__}: {exc}"
        graph = partition.graph.name
        inside = {n.name for n in subgraph.nodes}
        pins = sorted({str(p) for n, p in partition.assignment.pins.items() if n in inside})
        if self.strict or self.fallback is None or target.name == self.fallback or pins:
            why = ("" if target.name == self.fallback else
                   f"; {', '.join(pins)} pins its nodes there, so it cannot fall back" if pins else
                   "; no installed backend declares that it takes every op, so there is no fallback"
                   if self.fallback is None else f"; without {{strict}} it falls back to {self.fallback}")
            raise PluginError(
                f"backend {target.name} failed to compile region {region} of {graph} "
                f"({len(subgraph.nodes)} node(s), first {subgraph.nodes[0].name}): {error}{why}",
                strict=Keyword("strict", "True")) from exc
        fallback = self.target(self.fallback)
        warnings.warn(f"backend {target.name} failed to compile region {region} of {graph}: {error}; "
                      f"{fallback.name} compiles it instead", CompileFallbackWarning, stacklevel=3)
        where = None if folder is None else folder / fallback.name / region
        compiled = _compile(fallback, subgraph, store, where)
        return fallback, compiled, CompileFallback(region, target.name, fallback.name, error)


def _route_records(routed: dict[str, dict[str, Any]], selected: Sequence[Backend],
                   records: str | os.PathLike[str], any_machine: bool) -> None:
    """Give each selected backend that takes tuned schedules the best trace per task in
    ``records``, made on this machine unless ``any_machine``; a backend's own
    :data:`~hetero.core.schedule.tune.records.TUNED_OPTION`, when the user set it, wins."""
    stored = load_records(records)
    for backend in selected:
        if any(o.name == TUNED_OPTION for o in backend.options):
            machine = None if any_machine else backend.tuning_machine()
            routed[backend.name].setdefault(TUNED_OPTION, best_traces(stored, backend.name, machine))


def _choose_fallback(named: str | None, selected: Sequence[Backend], plugins: PluginSet) -> Backend | None:
    """The fallback backend: ``named``, or by declaration among the targets, then among the
    installed backends in discovery order (bundled first); None when none declares it."""
    if named is not None:
        backend = plugins.get(named)
        if not backend.takes_every_op:
            raise OptionError(f"fallback {named!r}: backend {named} does not declare that it takes every "
                              "canonical op (takes_every_op), so the nodes no target takes could not all "
                              f"land on it; name one that does ({_complete(plugins) or 'none is installed'})")
        return backend
    found = choose_fallback([*selected, *plugins.backends.values()])
    return None if found is None else plugins.get(found)


def _complete(plugins: PluginSet) -> str:
    return ", ".join(name for name, b in plugins.backends.items() if b.takes_every_op)


def compile_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    targets: Sequence[str] = (),
    *,
    fallback: str | None = None,
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
    records: str | os.PathLike[str] | None = None,
    records_any_machine: bool = False,
    **options: Any,
) -> Executable | SpecializingExecutable | StagedExecutable:
    """Compile ``model`` for ``targets`` (in order of preference) and return an executable.

    ``targets`` default to the fallback alone. ``fallback`` names the backend that
    takes what the targets refuse or fail to compile; by default the first target,
    then the first installed backend, that declares it takes every canonical op.
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
    target computes in int8, the quantised units it takes become integer ops before
    partitioning; a model that arrives quantised (QDQ) gets the same.

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
    region when there are several). Other keyword options go to the backends that
    declare them (``hetero plugins NAME`` lists a backend's options); one that no
    target declares is an :class:`~hetero.errors.OptionError` naming the nearest
    option there is. ``cache`` names a compile-cache folder (by default
    ``$HETERO_CACHE_DIR`` when set): a model compiled before with the same graph,
    passes, targets, options and versions on this machine is loaded whole from it,
    running no pass and compiling nothing; otherwise each part compiled before with the
    same subgraph, backend version and options is loaded instead of compiled
    (:mod:`hetero.core.runtime.cache`). A dump or ``quantize`` compiles past the
    model entries (parts still come from the cache, except with a dump).

    ``records`` names a tuning-records file (``hetero tune -o``): each kernel whose task
    has a record made on this machine (any machine with ``records_any_machine=True``)
    compiles with the fastest recorded schedule, the others with their defaults. It
    reaches each backend as its ``tuned_schedules`` target option, so the compile
    cache keys on the schedules chosen.

    >>> exe = hetero.compile("resnet50.onnx", targets=["my_npu"])    # doctest: +SKIP
    >>> outputs = exe.run({"data": x})                               # doctest: +SKIP
    >>> print(exe.report())                                          # doctest: +SKIP
    """
    cached = cache is not None or bool(os.environ.get(CACHE_ENV))
    arrays = _hash_early(model) if cached and dump is None and quantize is None else None
    if not targets:
        default = _choose_fallback(fallback, [], load_plugins())
        if default is None:
            raise OptionError("no targets given and no installed backend declares that it takes every op; "
                              "name the targets")
        targets = [default.name]
    session = Session(targets, fallback=fallback, policy=policy, overrides=overrides, strict=strict,
                      min_ratio=min_ratio, quantize=quantize, calibration_method=calibration_method,
                      cache=cache, options=options, records=records, records_any_machine=records_any_machine)
    return _compile_model(session, model, input_shapes, input_values, max_specializations, passes, dump, arrays)


def _compile_model(
    session: Session,
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    input_shapes: Mapping[str, Sequence[int]] | Sequence[Mapping[str, Sequence[int]]] | None,
    input_values: Mapping[str, Any] | None,
    max_specializations: int | None,
    passes: Sequence[str] | None,
    dump: str | os.PathLike[str] | None,
    arrays: GraphArrays | None = None,
) -> Executable | SpecializingExecutable | StagedExecutable:
    """:func:`compile_model` with its session made (and the model's arrays being hashed,
    when it is a graph and a cache is named)."""
    if isinstance(model, Graph):
        graph = model
    else:
        ahead = None if input_shapes is None or isinstance(input_shapes, Mapping) else list(input_shapes)

        def later(stage: onnx.ModelProto | Graph) -> Any:
            # A stage: same targets and settings, no dump of its own. Only the prefix (the
            # one stage given as a Graph) takes the model's inputs, so only it is calibrated
            # on the samples; tails and bodies compile in float.
            own = session if isinstance(stage, Graph) else session.in_float()
            return _compile_model(own, stage, None, None, max_specializations, passes, None)

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
                return _compile_model(session, bound, None, None, max_specializations, passes, dump)

            exe = SpecializingExecutable(_model_name(model), exc, build, max_specializations)
            for shapes in ahead or ():
                exe.prepare(shapes)
            return exe
    store = open_cache(session.cache) if dump is None and session.quantize is None else None
    key = None if store is None else _model_key(session, graph, passes, arrays)
    if key is not None:
        with timing.phase("model cache load"):
            exe = store.load_model(key)
        if exe is not None:
            return exe
    with progress.stage("optimise"):
        graph = optimize(graph, passes)
    exe = session.compile(graph, dump)
    keys = [p.cache_key for p in exe.placements]
    if key is not None and all(keys):
        with timing.phase("model cache store"):
            store.put_model(key, exe, keys)
    return exe


def _hash_early(model: str | os.PathLike[str] | onnx.ModelProto | Graph) -> GraphArrays | None:
    """A graph given whole, its arrays being hashed for the model cache's key while the
    plugins load; None for a model still to import, or arrays that cannot be keyed."""
    if not isinstance(model, Graph):
        return None
    try:
        return GraphArrays(model)
    except CacheError:
        return None  # the part cache says why, when it meets the same arrays


def _model_key(session: Session, graph: Graph, passes: Sequence[str] | None,
               arrays: GraphArrays | None) -> str | None:
    """The model cache's key of compiling ``graph`` (imported, not yet optimised) in
    ``session``; None when a setting cannot be keyed (the part cache says which)."""
    with timing.phase("model cache key"):
        try:
            settings = session.settings(passes)
        except CacheError as exc:
            warnings.warn(str(exc), CacheWarning, stacklevel=4)
            return None
        try:
            return model_key(graph, settings, arrays)
        except CacheError:
            return None  # an option that is not JSON: the part cache warns, naming it


def _model_name(model: str | os.PathLike[str] | onnx.ModelProto) -> str:
    if isinstance(model, onnx.ModelProto):
        return model.graph.name or "<ModelProto>"
    return Path(model).stem


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


def _compile(target: Target, subgraph: Graph, store: CompileCache | None,
             dump_dir: Path | None) -> tuple[CompiledPart, str | None]:
    """One region's compile, through the cache unless its stages are to be dumped, and
    the key of the cache entry that holds it (None without one)."""
    if dump_dir is not None:
        # A dump asks for every stage, and only a real compile writes them.
        return target.dumping_to(dump_dir).compile(subgraph), None
    if store is None:
        return target.compile(subgraph), None
    return store.compile_keyed(subgraph, target)
