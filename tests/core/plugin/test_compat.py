"""Plugins written for older plugin APIs: read by parameter names, adapted, or broken.

Each plugin here is installed for real (an entry point in a throwaway site folder)
and loaded by the plugin manager, as a user's would be.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.plugin import Backend
from hetero.core.plugin.compat import AdaptedBackend, adaptations_of, review_hooks
from hetero.core.plugin.listing import format_backend, format_plugins
from hetero.core.plugin.manager import PluginWarning
from hetero.errors import PluginError
from toyplugin import ToyBackend

_PREAMBLE = """\
import json
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.ir.pattern import Op, Var
from hetero.core.plugin import Backend, Pattern, Support, hookimpl
from toyplugin import ToyBackend, ToyPart

CALLS = []


class Base(Backend):
    version = "1.0"
    device_kind = "cpu"
    peak_gflops = 1.0
    memory = MemoryHierarchy([MemoryLevel("DRAM", 2**30, 10.0, 100.0)])
    supported_ops = frozenset({"Relu", "Neg"})

    def load_artifact(self, artifact):
        return ToyPart(json.loads(artifact))
"""

# Every hook in API 1's form: supports(node), estimate(subgraph), compile(subgraph,
# options), a pattern's check(match). Each records how it was called.
API1 = _PREAMBLE + """
def neg_relu_check(match):
    CALLS.append(("check", type(match).__name__))
    return Support.yes()


class Old(Base):
    name = "old"
    patterns = (Pattern("neg_relu", Op("Relu", Op("Neg", Var("x"))), check=neg_relu_check),)

    def supports(self, node):
        CALLS.append(("supports", node.op))
        return Support.yes()

    def estimate(self, subgraph):
        CALLS.append(("estimate", len(subgraph.nodes)))
        return 1e-9

    def compile(self, subgraph, options):
        CALLS.append(("compile", type(options).__name__))
        # The plugin's own code still calls its hooks in its own forms.
        assert all(self.supports(node) for node in subgraph.nodes)
        return ToyBackend.compile(self, subgraph, None)


@hookimpl
def hetero_backends():
    return [Old()]
"""

# Today's forms (API 2's, which API 3 keeps), with parameter names of its own.
API2 = _PREAMBLE + """
class Current(Base):
    name = "current"
    patterns = (Pattern("neg_relu", Op("Relu", Op("Neg", Var("x"))), check=lambda m, target: Support.yes()),)

    def supports(self, n, target):
        return Support.yes()

    def estimate(self, graph, target):
        return 1e-9

    def compile(self, graph, target):
        CALLS.append(("compile", type(target).__name__))
        return ToyBackend.compile(self, graph, target)


@hookimpl
def hetero_backends():
    return [Current()]
"""

# Two hooks no plugin API calls this way, and one in API 1's form beside them.
UNADAPTABLE = _PREAMBLE + """
class Odd(Base):
    name = "odd"

    def supports(self, node, target, extra):
        return Support.yes()

    def estimate(self, subgraph):
        return 1e-9

    def compile(self):
        raise NotImplementedError


@hookimpl
def hetero_backends():
    return [Odd()]
"""


def _neg_relu() -> hetero.Graph:
    b = GraphBuilder("neg_relu")
    b.output(b.Relu(b.Neg(b.input("x", (2, 3)), name="neg"), name="relu"))
    return b.build()


def _run(exe: object, graph: hetero.Graph) -> None:
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(exe.run({"x": x})[graph.outputs[0].name], np.maximum(-x, 0))


def test_an_api1_plugin_runs_adapted_and_warns_of_every_change(site) -> None:
    modules = site.install("hetero-old", "1.0", {"old": API1})
    with pytest.warns(DeprecationWarning) as caught:
        plugins = site.load()
    [message] = [str(w.message) for w in caught if "backend 'old'" in str(w.message)]
    assert message.startswith("hetero plugin old (hetero-old 1.0): backend 'old' uses plugin API 1 hooks")
    for change in ("supports(self, node) -> write supports(self, node, target)",
                   "estimate(self, subgraph) -> write estimate(self, subgraph, target)",
                   "compile(self, subgraph, options) -> write compile(self, subgraph, target) "
                   "and read options from target.options",
                   "pattern 'neg_relu' check(match) -> write check(match, target)"):
        assert change in message
    assert "'Migrating from API 1 and 2' in docs/plugin-guide.md" in message
    [record] = [r for r in plugins.records if r.name == "old"]
    assert record.status == "loaded" and record.backends == ("old",)
    backend = plugins.get("old")
    assert isinstance(backend, AdaptedBackend) and isinstance(backend, Backend)
    assert [c.hook for c in adaptations_of(backend)] == ["supports", "estimate", "compile", "check"]

    graph = _neg_relu()
    calls = __import__(modules["old"]).CALLS
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no compile fallback: the old hooks did the work
        exe = hetero.compile(graph, targets=["old"], passes=[])
    _run(exe, graph)
    assert [p.backend for p in exe.placements] == ["old"] and not exe.fallbacks
    assert ("compile", "dict") in calls  # API 1's compile took the option values as a dict
    assert ("check", "Match") in calls and ("supports", "Relu") in calls
    assert any(kind == "estimate" for kind, _ in calls)
    # Wherever the backend is shown, it says it runs adapted and what to update.
    assert "runs adapted from plugin API 1 hooks; to update: supports(self, node)" in exe.partition_report
    listing = format_plugins(plugins)
    assert "Adapted from plugin API 1 (1), to update:" in listing
    assert f"  old (hetero-old 1.0): {message.split(': ', 1)[1]}" in listing.splitlines()
    assert "adapted       backend 'old' uses plugin API 1 hooks" in format_backend(plugins, "old")


def test_an_api2_plugin_runs_as_it_is_without_a_warning(site) -> None:
    modules = site.install("hetero-current", "1.0", {"current": API2})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        plugins = site.load()
        backend = plugins.get("current")
        assert type(backend).__name__ == "Current" and not adaptations_of(backend)
        [record] = [r for r in plugins.records if r.name == "current"]
        assert record.status == "loaded" and record.adapted == ()
        graph = _neg_relu()
        exe = hetero.compile(graph, targets=["current"], passes=[])
    _run(exe, graph)
    assert __import__(modules["current"]).CALLS == [("compile", "Target")]
    assert "adapted" not in exe.partition_report
    assert "Adapted from plugin API" not in format_plugins(plugins)


def test_a_plugin_with_an_unadaptable_hook_is_broken_with_every_problem_listed(site) -> None:
    site.install("hetero-odd", "1.0", {"odd": UNADAPTABLE})
    with pytest.warns(PluginWarning, match="odd"):
        plugins = site.load()
    [record] = [r for r in plugins.records if r.name == "odd"]
    assert record.status == "broken"
    error = record.error
    assert error.startswith("backend 'odd': hooks that plugin API 3 cannot call: ")
    assert ("supports(self, node, target, extra) leaves extra unset when hetero calls "
            "supports(node, target): give it a default or remove it") in error
    assert ("compile(self) cannot take what hetero passes (compile(subgraph, target)): "
            "write compile(self, subgraph, target)") in error
    # estimate(subgraph) alone could be adapted; the plugin cannot, so it is listed too.
    assert "in API 1's form: estimate(self, subgraph) -> write estimate(self, subgraph, target)" in error
    assert error.endswith("(see 'Migrating from API 1 and 2' in docs/plugin-guide.md)")
    with pytest.raises(PluginError, match=r"backend 'odd' is broken: plugin odd \(hetero-odd 1.0\) did not load"):
        plugins.get("odd")


class _Forms(ToyBackend):
    """A toy whose hooks the tests below replace one at a time."""


def _review(**hooks: object) -> tuple[list[str], list[str]]:
    backend = _Forms("forms")
    for name, hook in hooks.items():
        setattr(backend, name, hook.__get__(backend) if inspect.isfunction(hook) else hook)
    review = review_hooks(backend)
    return [c.hook for c in review.changes], list(review.problems)


@pytest.mark.parametrize("second", ["options", "opts", "config"])
def test_compile_is_read_by_its_parameter_names_not_their_count(second: str) -> None:
    old = eval(f"lambda self, subgraph, {second}: None")  # noqa: S307 - a signature under test
    assert _review(compile=old) == (["compile"], [])
    assert _review(compile=lambda self, graph, target: None) == ([], [])
    assert _review(compile=lambda self, graph, tgt: None) == ([], [])


def test_variadic_hooks_are_taken_as_they_are() -> None:
    assert _review(supports=lambda self, *args: None, compile=lambda self, *a, **k: None) == ([], [])
    # A **kwargs hook with one positional parameter is API 1's one-argument form.
    assert _review(supports=lambda self, node, **kw: None) == (["supports"], [])


def test_forms_that_no_plugin_api_has_are_problems() -> None:
    changes, problems = _review(supports=lambda self, node, options: None)
    assert changes == [] and problems == [
        "supports(self, node, options) takes options where hetero passes the target "
        "(supports(node, target)): write supports(self, node, target)"]
    changes, problems = _review(estimate=lambda self, subgraph, target, *, precise: None)
    assert problems == ["estimate(self, subgraph, target, *, precise) requires precise by keyword, "
                        "which hetero never passes: give it a default or remove it"]
    assert _review(compile=lambda self, subgraph: None)[1] == [
        "compile(self, subgraph) cannot take what hetero passes (compile(subgraph, target)): "
        "write compile(self, subgraph, target)"]
    # A parameter with a default is no problem.
    assert _review(supports=lambda self, node, target, extra=None: None) == ([], [])
