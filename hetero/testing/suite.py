"""The conformance checks, collected by :mod:`hetero.testing.plugin` for ``--hetero-backend``.

One test per claim, so that the report says which claim broke:

- ``test_contract_*``: the plugin loads, its backend name is unique, its
  declarations are sound, and every pattern comes with an example it matches.
- ``test_op[OP-DTYPE]``: truthfulness, one matrix cell each (see :mod:`.matrix`).
- ``test_pattern[NAME]``: each pattern's example, compiled whole, against the reference.
- ``test_rejection[OP]``: ``supports`` answers for every canonical op, never raises.
- ``test_artifact[OP]``: compiling twice gives the same artifact, which loads and runs.
- ``test_model[NAME]``: small models split between the backend and the fallback.
- ``test_model_int8[NAME]``: the same models quantised to int8, for a backend that
  computes in integers (it claims hetero's integer ops, e.g. ``QConv``).
- ``test_bad_input[KIND]``: wrong inputs to a compiled executable are InputErrors.

Every compile here calls the backend's ``compile`` directly, for its target under
default options (the models excepted, which go through :func:`hetero.compile` and
fail on any fallback): a claim that fails is a failure, never quietly routed to the
CPU.
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from unittest import mock
from typing import Any, NoReturn

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, seed, settings
from hypothesis.errors import NoSuchExample

import hetero
from hetero.core.exec.device import run_from_host
from hetero.core.exec.reference import run_reference
from hetero.core.ir.graph import Graph
from hetero.core.ir.opdef import op_names
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.core.plugin.backend import Backend, Pattern, Support, validate_backend
from hetero.core.plugin.capabilities import device_of
from hetero.core.plugin.manager import PluginSet, load_plugins
from hetero.core.plugin.target import Target, bind
from hetero.core.quant.flow import lower_for_backends, quantize_model
from hetero.errors import DeviceUnavailableError, HeteroError, InputError, UnknownBackendError
from hetero.testing.cases import (
    OpCase,
    Tolerance,
    case_dtypes,
    compare_outputs,
    edge_case,
    regression_cases,
    example_case,
    op_cases,
)
from hetero.testing.matrix import NOT_RUN_PREFIX, UNSUPPORTED_PREFIX
from hetero.testing.models import MODELS, calibration_inputs, model_inputs
from hetero.testing.plugin import BACKEND_OPTIONS, SEED

#: Generated cases tried per dtype when a backend declines an op's example case.
ACCEPTED_SEARCH = 50

# Composite graphs chain several rounded ops and sums, so no per-op bound applies;
# these are `hetero run --compare`'s defaults, which a wrong kernel misses by far.
_COMPOSITE = {"float32": Tolerance(1e-3, 1e-4), "float16": Tolerance(1e-2, 1e-2)}


def _composite_tolerance(dtype: np.dtype) -> Tolerance:
    if dtype.kind in "biu":
        return Tolerance(0.0, 0.0)
    return _COMPOSITE.get(dtype.name, _COMPOSITE["float16"])


def _run(part: Any, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``part.run`` on host arrays, its results on the host: a part on a device of its own
    gets its inputs copied in and its outputs copied out, as the executable would."""
    return run_from_host(part.run, device_of(part), inputs)


@contextmanager
def _runs_here() -> Iterator[None]:
    """Inside, a run that needs a device this machine lacks skips the check, saying so;
    everything before the run (compiling, assembling, saving) has been checked."""
    try:
        yield
    except DeviceUnavailableError as exc:
        pytest.skip(f"{NOT_RUN_PREFIX} {exc}")


@functools.cache
def _target(backend: Backend) -> Target:
    """The backend bound to the run's options (``--hetero-option``; by default none): what
    every direct check compiles for."""
    return bind(backend, BACKEND_OPTIONS)


def _name(config: pytest.Config) -> str:
    return config.getoption("hetero_backend")


def _selected_ops(config: pytest.Config) -> list[str]:
    chosen = config.getoption("hetero_ops")
    canonical = op_names()
    if chosen is None:
        return canonical
    ops = [op.strip() for op in chosen.split(",") if op.strip()]
    unknown = [op for op in ops if op not in canonical]
    if unknown:
        raise pytest.UsageError(f"--hetero-ops names {unknown}, which are not canonical ops")
    return ops


def _installed(config: pytest.Config) -> Backend | None:
    """The backend under test, or None when it does not load (test_contract_loads says why)."""
    return load_plugins().backends.get(_name(config))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every check over what the backend claims, read at collection time."""
    config = metafunc.config
    backend = _installed(config)
    ops = _selected_ops(config)
    claimed = [op for op in ops if backend is not None and op in backend.supported_ops]
    patterns = list(backend.patterns) if backend is not None else []
    no_ops = "the backend does not load" if backend is None else "the backend claims none of these ops"
    if {"op", "dtype"} <= set(metafunc.fixturenames):
        pairs = [(op, dtype) for op in claimed for dtype in case_dtypes(op)]
        _parametrize(metafunc, "op,dtype", pairs, [f"{op}-{dtype}" for op, dtype in pairs], no_ops)
    elif "claimed_op" in metafunc.fixturenames:
        _parametrize(metafunc, "claimed_op", claimed, claimed, no_ops)
    elif "canonical_op" in metafunc.fixturenames:
        chosen = ops if backend is not None else []
        _parametrize(metafunc, "canonical_op", chosen, chosen, "the backend does not load")
    elif "pattern" in metafunc.fixturenames:
        _parametrize(metafunc, "pattern", patterns, [p.name for p in patterns],
                     "the backend declares no patterns")
    elif "model" in metafunc.fixturenames:
        _parametrize(metafunc, "model", list(MODELS.values()), list(MODELS), "")
    elif "int8_model" in metafunc.fixturenames:
        integer = backend is not None and bool(INTEGER_OPS & set(backend.supported_ops))
        models = list(MODELS) if integer else []
        why = no_ops if backend is None else (
            f"the backend claims none of hetero's integer ops ({', '.join(sorted(INTEGER_OPS))}): "
            "it computes int8 models through the float ops test_model checks")
        _parametrize(metafunc, "int8_model", [MODELS[m] for m in models], models, why)


def _parametrize(metafunc: pytest.Metafunc, names: str, values: list[object], ids: list[str],
                 why_empty: str) -> None:
    """Parametrize; an empty list becomes one skipped ``[none]`` test that says why."""
    if not values:
        arity = names.count(",") + 1
        values = [pytest.param(*[None] * arity, id="none", marks=pytest.mark.skip(reason=why_empty))]
    metafunc.parametrize(names, values, ids=ids or None)


def _fail(message: str) -> NoReturn:
    """Fail the test with ``message`` alone: no traceback, no chained exception."""
    raise pytest.fail.Exception(message, pytrace=False) from None


@pytest.fixture(scope="session")
def plugins() -> PluginSet:
    """This process's plugin discovery."""
    return load_plugins()


@pytest.fixture(scope="session")
def backend(pytestconfig: pytest.Config, plugins: PluginSet) -> Backend:
    """The backend under test; the test fails (not skips) when it cannot be loaded."""
    try:
        return plugins.get(_name(pytestconfig))
    except UnknownBackendError as exc:
        _fail(f"backend {_name(pytestconfig)!r} is not available: {exc}")


@pytest.fixture
def max_examples(pytestconfig: pytest.Config) -> int:
    """Cases drawn per (op, dtype)."""
    return pytestconfig.getoption("hetero_max_examples")


# -- contract ---------------------------------------------------------------------


def test_contract_loads(pytestconfig: pytest.Config, plugins: PluginSet) -> None:
    """The backend comes from a plugin that loads through its entry point."""
    name = _name(pytestconfig)
    if name in plugins.backends:
        return
    traces = "".join(f"\n{r.label}:\n{r.traceback}" for r in plugins.broken if r.traceback)
    try:
        plugins.get(name)
    except UnknownBackendError as exc:
        _fail(f"{exc}{traces}")


def test_contract_unique_name(pytestconfig: pytest.Config, plugins: PluginSet) -> None:
    """Exactly one installed plugin provides the backend's name."""
    name = _name(pytestconfig)
    # The manager refuses a second provider of a name with this sentence as its error.
    clash = f"backend {name!r} is already provided by plugin"
    rivals = [r.label for r in plugins.records if r.error and clash in r.error]
    providers = [r.label for r in plugins.records if name in r.backends]
    assert not rivals, f"backend name {name!r} is also claimed by plugin(s) {rivals}; rename one"
    assert len(providers) == 1, f"backend {name!r} is provided by {providers or 'no plugin'}"


def test_contract_declarations(backend: Backend) -> None:
    """Name, version, device kind, memory hierarchy, throughput, ops and patterns are sound.

    The memory hierarchy checks its own levels when built (positive capacities,
    outermost first, capacity never growing inwards); here it must merely be one.
    """
    problems = validate_backend(backend)
    assert not problems, "\n".join(problems)


def test_contract_pattern(backend: Backend, pattern: Pattern) -> None:
    """The pattern has an example graph, and the pattern accepts a match in it."""
    graph = _pattern_example(backend, pattern)
    refusals = []
    for node in graph.nodes:
        for _, verdict in pattern.match(node, _target(backend)):
            if verdict.ok:
                return
            refusals.append(f"at {node.name}: {verdict.reason}")
    _fail(f"{backend.name}: pattern {pattern.name!r} does not match its own example"
          + (f"; its check refuses every match ({'; '.join(refusals)})" if refusals else ""))


def _pattern_example(backend: Backend, pattern: Pattern) -> Graph:
    if pattern.example is None:
        _fail(f"{backend.name}: pattern {pattern.name!r} has no example: give it "
              "Pattern(..., example=lambda: graph), a small graph the pattern matches")
    graph = pattern.example()
    if not isinstance(graph, Graph):
        _fail(f"{backend.name}: pattern {pattern.name!r}: example() returned {graph!r}, "
              "not a Graph")
    return graph


# -- truthfulness -----------------------------------------------------------------


def _settings(max_examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Database-free hypothesis settings drawing from the run's seed (``--hetero-seed``):
    derandomized for 0, the fixed draw, so a run is the same on every machine; seeded
    otherwise, so a failure found by a search replays from the printed seed.

    Shrinking is off: each example is a compile, and the failure is reported with
    the case as drawn (``case.describe()``) rather than after hundreds more compiles.
    """
    chosen = SEED[0]
    configured = settings(max_examples=max_examples, deadline=None, derandomize=chosen == 0, database=None,
                          phases=(Phase.explicit, Phase.generate),
                          suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.filter_too_much))
    if chosen == 0:
        return configured
    return lambda test: seed(chosen)(configured(test))


def _declined(backend: Backend, graph: Graph) -> str | None:
    """The first refusal of ``backend`` for a node of ``graph``, or None if it takes them all."""
    for node in graph.nodes:
        verdict = _target(backend).supports(node)
        if not verdict.ok:
            return f"{node.name} ({node.op}): {verdict.reason}"
    return None


def _check_case(backend: Backend, case: OpCase) -> None:
    """Compile ``case`` with the backend alone, run it, compare; AssertionError naming all."""
    try:
        part = _target(backend).compile(case.graph)
    except Exception as exc:
        raise AssertionError(f"{backend.name} claims {case.op} but cannot compile "
                             f"{case.describe()}: {type(exc).__name__}: {exc}") from exc
    try:
        got = _run(part, case.inputs)
    except DeviceUnavailableError:
        raise  # compiled, but this machine cannot run it: test_op says so
    except Exception as exc:
        if case.error is not None and isinstance(exc, case.error):
            return
        raise AssertionError(f"{backend.name} compiled but failed to run {case.describe()}: "
                             f"{type(exc).__name__}: {exc}") from exc
    if case.error is not None:
        raise AssertionError(f"{backend.name} returned values for {case.describe()}, where the "
                             f"reference raises {case.error.__name__} ({case.error_message}); "
                             f"raise {case.error.__name__} naming the node instead")
    problem = compare_outputs(case, got)
    if problem is not None:
        raise AssertionError(f"{backend.name} computes a wrong {case.op}: {problem}")


def test_op(backend: Backend, op: str, dtype: str, max_examples: int,
            request: pytest.FixtureRequest) -> None:
    """Every drawn case the backend accepts compiles, runs and matches the reference,
    the op's edge case (NaN inputs, an index out of range) first."""
    accepted: list[OpCase] = []
    declined: list[str] = []
    unrun: list[str] = []

    def check_one(case: OpCase) -> None:
        accepted.append(case)
        try:
            _check_case(backend, case)
        except DeviceUnavailableError as exc:
            unrun.append(str(exc))

    edge = edge_case(op, dtype)
    if edge is not None and _declined(backend, edge.graph) is None:
        check_one(edge)
    for kept in regression_cases(op, dtype):
        if _declined(backend, kept.graph) is None:
            check_one(kept)

    @_settings(max_examples)
    @given(case=op_cases(op, dtype))
    def check(case: OpCase) -> None:
        reason = _declined(backend, case.graph)
        if reason is not None:
            declined.append(reason)
            return
        check_one(case)

    check()
    if unrun:
        pytest.skip(f"{NOT_RUN_PREFIX} {backend.name} compiled {len(unrun)} {op} {dtype} cases, and this "
                    f"machine cannot run them: {unrun[0]}")
    if not accepted:
        pytest.skip(f"{UNSUPPORTED_PREFIX} {backend.name} declined all {len(declined)} "
                    f"{op} {dtype} cases, e.g. {declined[0]}")
    if declined:
        total = len(declined) + len(accepted)
        detail = f"declined {len(declined)} of {total} cases, e.g. {declined[0]}"
        request.node.user_properties.append(("hetero_detail", detail))


def test_pattern(backend: Backend, pattern: Pattern) -> None:
    """The pattern's example, compiled whole by the backend, matches the reference."""
    graph = _pattern_example(backend, pattern)
    inputs = model_inputs(graph)
    want = run_reference(graph, inputs)
    try:
        with _runs_here():
            got = _run(_target(backend).compile(graph), inputs)
    except Exception as exc:  # noqa: BLE001 - whatever a plugin raises is its failure
        _fail(f"{backend.name}: pattern {pattern.name!r}: its example fails to compile "
              f"or run: {type(exc).__name__}: {exc}")
    _compare(f"{backend.name}: pattern {pattern.name!r}", got, want)


def _compare(where: str, got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    for name, expected in want.items():
        assert name in got, f"{where}: output {name!r} is missing (got {sorted(got)})"
        array = np.asarray(got[name])
        assert array.dtype == expected.dtype, \
            f"{where}: output {name!r} is {array.dtype}, expected {expected.dtype}"
        problem = _composite_tolerance(expected.dtype).check(array, expected)
        assert problem is None, f"{where}: output {name!r}: {problem}"


# -- rejection --------------------------------------------------------------------


def test_rejection(backend: Backend, canonical_op: str) -> None:
    """``supports`` answers Support for a case of every dtype of the op, and never raises."""
    for dtype in case_dtypes(canonical_op):
        case = example_case(canonical_op, dtype)
        for node in case.graph.nodes:
            try:
                verdict = _target(backend).supports(node)
            except Exception as exc:  # noqa: BLE001 - whatever a plugin raises is its failure
                _fail(f"{backend.name}.supports raised {type(exc).__name__}: {exc} for "
                      f"{case.describe()}; refuse with Support.no(reason) instead")
            assert isinstance(verdict, Support), (
                f"{backend.name}.supports returned {verdict!r} for {case.describe()}; "
                "return Support.yes() or Support.no(reason)")


# -- determinism and artifacts ----------------------------------------------------


def _accepted_example(backend: Backend, op: str) -> OpCase:
    """A case of ``op`` the backend accepts: the example of its first dtype that has one,
    else a generated case the backend accepts (a 2-D-only backend declines a 1-D
    example Conv); a failure if there is none."""
    reasons = []
    for dtype in case_dtypes(op):
        case = example_case(op, dtype)
        reason = _declined(backend, case.graph)
        if reason is None:
            return case
        try:
            return find(op_cases(op, dtype), lambda c: _declined(backend, c.graph) is None,
                        settings=settings(max_examples=ACCEPTED_SEARCH, derandomize=True, database=None,
                                          suppress_health_check=list(HealthCheck)))
        except NoSuchExample:
            reasons.append(f"{dtype}: {reason}")
    # Listing an op it declines in every form is a false claim: the partitioner would
    # offer it nodes on the strength of supported_ops and learn nothing.
    _fail(f"{backend.name} lists {op} in supported_ops but declines every case of every dtype "
          f"({'; '.join(reasons)}); take some or drop {op} from supported_ops")


def test_artifact(backend: Backend, claimed_op: str) -> None:
    """Two compiles of one case give byte-identical artifacts, even a day apart on the
    clock (the second is compiled and read with ``time.time`` moved on); the artifact
    loads and runs (given as a read-only ``memoryview`` when the backend declares
    ``artifact_views``, as the compile cache gives it)."""
    case = _accepted_example(backend, claimed_op)
    first = _target(backend).compile(case.graph)
    artifact = first.artifact
    with _clock_moved(DAY):
        again = _target(backend).compile(case.graph).artifact
    assert isinstance(artifact, bytes), (
        f"{backend.name}: the artifact of {case.describe()} is {type(artifact).__name__}, not bytes")
    assert artifact == again, (
        f"{backend.name}: compiling {case.describe()} twice, a day apart on the clock, gave "
        f"different artifacts ({len(artifact)} and {len(again)} bytes): compiles must be "
        f"deterministic (a zip or npz writer stamping the current time does this: give it a "
        f"fixed date)")
    loaded = backend.load_artifact(memoryview(artifact) if backend.artifact_views else artifact)
    assert (tuple(loaded.inputs), tuple(loaded.outputs)) == (tuple(first.inputs), tuple(first.outputs)), (
        f"{backend.name}: the loaded part of {case.describe()} has interface "
        f"{loaded.inputs} -> {loaded.outputs}, the compiled one {first.inputs} -> {first.outputs}")
    with _runs_here():
        problem = compare_outputs(case, _run(loaded, case.inputs))
    assert problem is None, f"{backend.name}: the reloaded artifact computes a wrong result: {problem}"


#: How far :func:`test_artifact` moves the clock between its two compiles.
DAY = 86400.0


@contextmanager
def _clock_moved(seconds: float) -> Iterator[None]:
    """``time.time`` runs ``seconds`` ahead inside (what zipfile and numpy stamp entries with)."""
    real = time.time
    with mock.patch("time.time", lambda: real() + seconds):
        yield


# -- end to end -------------------------------------------------------------------


def test_model(backend: Backend, model: Callable[[], Graph]) -> None:
    """The model, split between the backend and the fallback, matches the reference, and
    the backend gets a node of it when it takes any."""
    graph = model()
    taken = [n.name for n in graph.nodes if _target(backend).supports(n).ok]
    if not taken:
        pytest.skip("backend claims none of the model's ops")
    targets = [backend.name]  # hetero.compile adds the fallback
    inputs = model_inputs(graph)
    # min_ratio=0: keep even a one-node island on the backend, so it is exercised.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exe = hetero.compile(graph, targets=targets, min_ratio=0.0, **BACKEND_OPTIONS)
    except HeteroError as exc:
        _fail(f"{graph.name} on {'+'.join(targets)} does not compile: {exc}")
    failed = [f for f in exe.fallbacks if f.backend == backend.name]
    assert not failed, f"{backend.name} failed to compile part of {graph.name}: {failed[0]}"
    placed = {p.backend for p in exe.placements}
    assert backend.name in placed, (
        f"{backend.name} takes {taken} of {graph.name}, yet the partition gives it nothing "
        f"(placed on {sorted(placed)})")
    with _runs_here():
        got = exe.run(inputs)
    _compare(f"{graph.name} on {'+'.join(targets)}", got, run_reference(graph, inputs))


def test_model_int8(backend: Backend, int8_model: Callable[[], Graph]) -> None:
    """The model quantised to int8 (``quantize=`` on :func:`calibration_inputs`), split
    between the backend and the fallback, matches the reference of its integer graph.

    The integer graph is what :func:`hetero.compile` partitions: the optimised model,
    quantised, its QDQ units lowered to integer ops where the backend takes them (the
    fallback is compiled on that integer graph directly, as it receives it when an
    integer backend declines a region).
    Each part on the backend, fed the reference's values, must reproduce the
    reference's exactly (integer outputs at zero tolerance); the whole model, whose
    float tail (dequantisation, float-only ops) runs on the fallback, within the
    composite float tolerance.
    """
    graph = int8_model()
    samples = calibration_inputs(graph)
    lowered = lower_for_backends(quantize_model(hetero.optimize(graph), samples), [backend])
    taken = [n.name for n in lowered.nodes if _target(backend).supports(n).ok]
    if not taken:
        pytest.skip(f"{backend.name} takes no node of {graph.name} quantised to int8")
    targets = [backend.name]  # hetero.compile adds the fallback
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if backend.takes_every_op:
                # Compiling never lowers QDQ units for the fallback (it runs integer ops
                # but does not cause them); it meets them in a region an integer backend
                # declined. Give it that integer graph itself.
                exe = hetero.compile(lowered, targets=targets, min_ratio=0.0, passes=[], **BACKEND_OPTIONS)
            else:
                exe = hetero.compile(graph, targets=targets, min_ratio=0.0, quantize=samples,
                                     **BACKEND_OPTIONS)
    except HeteroError as exc:
        _fail(f"{graph.name} quantised to int8 on {'+'.join(targets)} does not compile: {exc}")
    failed = [f for f in exe.fallbacks if f.backend == backend.name]
    assert not failed, f"{backend.name} failed to compile part of {graph.name} (int8): {failed[0]}"
    mine = [p for p in exe.placements if p.backend == backend.name]
    assert mine, (f"{backend.name} takes {taken} of {graph.name} quantised to int8, yet the "
                  f"partition gives it nothing (placed on {sorted({p.backend for p in exe.placements})})")
    inputs = model_inputs(graph)
    reference = {**inputs, **run_reference(lowered, inputs, keep=True)}
    with _runs_here():
        for placement in mine:
            part = placement.part
            _compare(f"{graph.name} (int8), region {placement.region} on {backend.name}",
                     _run(part, {name: reference[name] for name in part.inputs}),
                     {name: reference[name] for name in part.outputs})
        got = exe.run(inputs)
    _compare(f"{graph.name} (int8) on {'+'.join(targets)}", got,
             {v.name: reference[v.name] for v in lowered.outputs})


# -- robustness -------------------------------------------------------------------


def _bad_inputs(kind: str, graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``inputs`` spoilt in one way: ``wrong_dtype``, ``wrong_shape`` or ``missing``."""
    name = graph.inputs[0].name
    spoilt = dict(inputs)
    if kind == "missing":
        del spoilt[name]
    elif kind == "wrong_shape":
        spoilt[name] = np.zeros((*inputs[name].shape, 2), inputs[name].dtype)
    else:
        other = np.float64 if inputs[name].dtype != np.float64 else np.float32
        spoilt[name] = inputs[name].astype(other)
    return spoilt


@pytest.mark.parametrize("kind", ["wrong_dtype", "wrong_shape", "missing"])
def test_bad_input(backend: Backend, pytestconfig: pytest.Config, kind: str) -> None:
    """An executable on the backend answers a bad input with InputError, not a crash."""
    claimed = [op for op in _selected_ops(pytestconfig) if op in backend.supported_ops]
    cases = (example_case(op, dtype) for op in claimed for dtype in case_dtypes(op))
    case = next((c for c in cases if c.graph.inputs and _declined(backend, c.graph) is None), None)
    if case is None:
        pytest.skip(f"{backend.name} accepts no example case with an input")
    exe = hetero.compile(case.graph, targets=[backend.name], strict=True, passes=[], **BACKEND_OPTIONS)
    try:
        exe.run(case.inputs)
    except DeviceUnavailableError:
        pass  # the good run needs the device; a bad input is refused before any part runs
    try:
        exe.run(_bad_inputs(kind, case.graph, case.inputs))
    except InputError:
        return
    except Exception as exc:  # noqa: BLE001 - anything but InputError is the failure
        _fail(f"{backend.name}: {kind} input to {case.describe()} raised "
              f"{type(exc).__name__}, not InputError: {exc}")
    _fail(f"{backend.name}: {kind} input to {case.describe()} ran without an error")
