"""Plugin discovery from real (throwaway) installed distributions, one plugin at a time."""

from __future__ import annotations

import subprocess
import sys
import uuid
import warnings

import numpy as np
import pytest

import hetero
from hetero.core.ir import GraphBuilder
from hetero.core.plugin import (
    PluginRecord, PluginSet, PluginWarning, get_backend, hookimpl, load_plugins,
)
from hetero.errors import UnknownBackendError
from toyplugin import ToyBackend, plugin_source, write_distribution, write_project

GOOD = plugin_source("toy_cpu")


def by_name(plugins: PluginSet) -> dict[str, PluginRecord]:
    """The records by plugin name (other installed plugins may be listed too)."""
    return {r.name: r for r in plugins.records}


def load_quietly(site, **env: str) -> PluginSet:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        return site.load(**env)


def test_good_plugin_is_found_with_its_distribution(site) -> None:
    site.install("hetero-toy", "0.3.1", {"toy": GOOD})
    plugins = site.load()
    record = by_name(plugins)["toy"]
    assert (record.status, record.distribution, record.version) == ("loaded", "hetero-toy", "0.3.1")
    assert record.backends == ("toy_cpu",) and record.error is None
    backend = plugins.backends["toy_cpu"]
    assert isinstance(backend, ToyBackend)
    assert plugins.provided_by["toy_cpu"] is record
    assert get_backend("toy_cpu") is backend


def test_plugin_may_provide_no_backend(site) -> None:
    site.install("hetero-empty", "1.0", {"empty": plugin_source()})
    record = by_name(site.load())["empty"]
    assert (record.status, record.backends) == ("loaded", ())


def test_import_error_is_recorded_and_does_not_stop_the_others(site) -> None:
    site.install("hetero-toy", "0.3.1", {"toy": GOOD})
    modules = site.install("hetero-bad", "2.0", {"bad": plugin_source(
        "bad_npu", body="raise ImportError('libbadnpu.so: cannot open shared object file')"
    )})
    with pytest.warns(PluginWarning, match=r"plugin bad \(hetero-bad 2.0\) is broken.*libbadnpu"):
        plugins = site.load()
    bad = by_name(plugins)["bad"]
    assert (bad.status, bad.distribution, bad.version) == ("broken", "hetero-bad", "2.0")
    assert bad.error == (
        f"cannot import {modules['bad']}: ImportError: libbadnpu.so: cannot open shared object file"
    )
    assert "Traceback" in bad.traceback and "libbadnpu" in bad.traceback
    assert "bad_npu" not in plugins.backends
    assert by_name(plugins)["toy"].status == "loaded" and "toy_cpu" in plugins.backends


def test_exit_at_import_is_contained(site) -> None:
    site.install("hetero-quits", "1.0", {"quits": plugin_source("q", body="raise SystemExit(3)")})
    record = by_name(load_quietly(site))["quits"]
    assert record.status == "broken" and record.error.endswith("SystemExit: 3")


def test_hook_that_raises_is_recorded(site) -> None:
    site.install("hetero-raises", "1.0", {"raises": GOOD.replace(
        "    return [", "    raise RuntimeError('no device found')\n    return ["
    )})
    record = by_name(load_quietly(site))["raises"]
    assert record.status == "broken"
    assert record.error == "hetero_backends() raised RuntimeError: no device found"
    assert "no device found" in record.traceback


@pytest.mark.parametrize(
    ("source", "error"),
    [
        (GOOD.replace("@hookimpl\n", ""), "implements no hetero_backends hook"),
        (GOOD.replace("def hetero_backends", "def hetero_backend"),
         "does not match the hook specs: PluginValidationError: unknown hook 'hetero_backend'"),
        (GOOD.replace("def hetero_backends():", "def hetero_backends(device):"),
         "does not match the hook specs: PluginValidationError"),
        (GOOD.replace("    return [", "    return None and ["),
         "hetero_backends() returned None; return a list of Backend ([] for none)"),
        (GOOD.replace("    return [", "    return {'toy': 1} or ["),
         "hetero_backends() must return a list of Backend, got {'toy': 1}"),
        (GOOD.replace("    return [", "    return ['toy_cpu'] or ["),
         "'toy_cpu' is not a hetero Backend"),
    ],
    ids=["unmarked", "misspelled", "extra-parameter", "returns-none", "returns-a-dict",
         "returns-a-string"],
)
def test_a_plugin_that_breaks_the_hook_contract_is_broken(site, source: str, error: str) -> None:
    site.install("hetero-sloppy", "1.0", {"sloppy": source})
    record = by_name(load_quietly(site))["sloppy"]
    assert record.status == "broken" and error in record.error


def test_unknown_op_declaration_is_broken_with_did_you_mean(site) -> None:
    site.install("hetero-typo", "1.0", {"typo": plugin_source("typo_cpu", ops=("Relu", "Conv2d"))})
    plugins = load_quietly(site)
    record = by_name(plugins)["typo"]
    assert record.status == "broken"
    assert record.error == (
        "backend 'typo_cpu': supported_ops names 'Conv2d', which is not a canonical op "
        "(did you mean 'Conv'?)"
    )
    assert "typo_cpu" not in plugins.backends


def test_negative_capacity_is_broken_naming_the_level(site) -> None:
    site.install("hetero-neg", "1.0", {"neg": plugin_source("neg_cpu", capacity="-1")})
    record = by_name(load_quietly(site))["neg"]
    assert record.status == "broken"
    assert record.error.endswith(
        "PluginError: memory level 'DRAM': capacity_bytes must be a positive integer, got -1"
    )


def test_duplicate_backend_name_keeps_the_first_and_reports_the_second(site) -> None:
    site.install("hetero-first", "1.0", {"first": plugin_source("shared_cpu")})
    site.install("hetero-second", "2.0", {"second": plugin_source("other_cpu", "shared_cpu")})
    plugins = load_quietly(site)
    first, second = by_name(plugins)["first"], by_name(plugins)["second"]
    assert first.status == "loaded" and plugins.provided_by["shared_cpu"] is first
    assert second.status == "broken"
    assert second.error == (
        "backend 'shared_cpu' is already provided by plugin first (hetero-first 1.0), which "
        "comes first (from an earlier sys.path folder, or by distribution name); rename one "
        "of the two, or set HETERO_DISABLE_PLUGINS=first to use this one"
    )
    # The broken plugin is skipped whole: its other backend is not half-loaded.
    assert "other_cpu" not in plugins.backends


def test_a_backend_name_clash_between_third_parties_is_settled_by_distribution_name(site) -> None:
    # Installed in the opposite order: within one sys.path folder the file system's
    # listing order must not decide.
    site.install("hetero-zeta", "1.0", {"zeta": plugin_source("dup_cpu")})
    site.install("hetero-alpha", "1.0", {"alpha": plugin_source("dup_cpu")})
    plugins = load_quietly(site)
    assert plugins.provided_by["dup_cpu"] is by_name(plugins)["alpha"]
    zeta = by_name(plugins)["zeta"]
    assert zeta.status == "broken"
    assert zeta.error.startswith("backend 'dup_cpu' is already provided by plugin alpha (hetero-alpha 1.0)")
    assert "HETERO_DISABLE_PLUGINS=alpha" in zeta.error


def test_an_earlier_sys_path_folder_wins_a_backend_name(site, tmp_path, monkeypatch) -> None:
    site.install("hetero-alpha", "1.0", {"alpha": plugin_source("dup_cpu")})
    front = tmp_path / "front"
    front.mkdir()
    module = f"hetero_test_{uuid.uuid4().hex[:8]}_front"
    write_distribution(front, "hetero-zeta", "1.0", {"zeta": module},
                       {module: plugin_source("dup_cpu")})
    site.modules.append(module)
    monkeypatch.syspath_prepend(str(front))
    plugins = load_quietly(site)
    assert plugins.provided_by["dup_cpu"] is by_name(plugins)["zeta"]
    assert by_name(plugins)["alpha"].error.startswith(
        "backend 'dup_cpu' is already provided by plugin zeta (hetero-zeta 1.0)"
    )


def test_bundled_plugins_are_recognised_by_their_distribution(site) -> None:
    site.install("hetero-toy", "1.0", {"toy": GOOD})
    plugins = site.load()
    bundled = {r.name for r in plugins.records if r.bundled}
    assert {"llvm_cpu", "npu_sim"} <= bundled and "toy" not in bundled
    assert all(r.distribution == "hetero" for r in plugins.records if r.bundled)
    # Bundled plugins are settled first, whatever sys.path says.
    assert [r.bundled for r in plugins.records] == sorted((r.bundled for r in plugins.records), reverse=True)


def test_a_third_party_backend_cannot_take_a_bundled_backend_name(site) -> None:
    # The site folder comes first on sys.path, so this plugin is found first.
    site.install("hetero-fast", "9.9", {"fast": plugin_source("llvm_cpu", "fast_npu")})
    plugins = load_quietly(site)
    owner = plugins.provided_by["llvm_cpu"]
    assert (owner.name, owner.distribution, owner.status) == ("llvm_cpu", "hetero", "loaded")
    assert owner.bundled
    assert get_backend("llvm_cpu") is plugins.backends["llvm_cpu"]
    assert not isinstance(plugins.backends["llvm_cpu"], ToyBackend)
    fast = by_name(plugins)["fast"]
    assert (fast.status, fast.distribution) == ("broken", "hetero-fast")
    assert fast.error == (
        f"backend 'llvm_cpu' is already provided by plugin {owner.label}, which is bundled "
        "with hetero and keeps its name; rename this backend"
    )
    assert "fast_npu" not in plugins.backends  # skipped whole


def test_models_still_run_on_the_bundled_fallback_beside_an_impostor(site) -> None:
    # A toy calling itself llvm_cpu declares three ops: had it displaced the bundled
    # backend, hetero would have no fallback for Sigmoid and the compile would fail.
    site.install("hetero-fast", "9.9", {"fast": plugin_source("llvm_cpu")})
    load_quietly(site)
    b = GraphBuilder("impostor")
    x = b.input("x", (2, 3))
    b.output(b.Relu(b.Sigmoid(x, name="sigmoid"), name="relu"))
    graph = b.build()
    feed = {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}
    exe = hetero.compile(graph, targets=["llvm_cpu"])
    np.testing.assert_allclose(exe.run(feed)["relu"], hetero.run_reference(graph, feed)["relu"],
                               rtol=1e-6)


def test_a_third_party_plugin_cannot_take_a_bundled_plugin_name(site) -> None:
    site.install("hetero-impostor", "1.0", {"npu_sim": plugin_source("npu_sim")})
    plugins = load_quietly(site)
    bundled, impostor = (r for r in plugins.records if r.name == "npu_sim")
    assert (bundled.distribution, bundled.status) == ("hetero", "loaded")
    assert plugins.provided_by["npu_sim"] is bundled
    assert (impostor.distribution, impostor.status) == ("hetero-impostor", "broken")
    assert impostor.error == (
        f"plugin name 'npu_sim' belongs to plugin {bundled.label}, which is bundled with "
        "hetero and keeps its name; rename this entry point"
    )


def test_a_bundled_name_stays_reserved_while_its_plugin_is_disabled(site) -> None:
    site.install("hetero-spare", "1.0", {"spare": plugin_source("npu_sim")})
    plugins = load_quietly(site, deny="npu_sim")
    assert "npu_sim" not in plugins.backends
    spare = by_name(plugins)["spare"]
    assert spare.status == "broken"
    assert spare.error.startswith("backend 'npu_sim' is the name of plugin npu_sim (hetero ")
    assert "bundled with hetero and keeps its name even when it is not loaded" in spare.error


def test_duplicate_backend_within_one_plugin(site) -> None:
    site.install("hetero-twice", "1.0", {"twice": plugin_source("twin", "twin")})
    record = by_name(load_quietly(site))["twice"]
    assert record.error == "backend 'twin' is provided twice by this plugin"


def test_duplicate_plugin_name_across_distributions(site) -> None:
    site.install("hetero-a", "1.0", {"same": plugin_source("a_cpu")})
    site.install("hetero-b", "1.0", {"same": plugin_source("b_cpu")})
    plugins = load_quietly(site)
    same = [r for r in plugins.records if r.name == "same"]
    assert [r.status for r in same] == ["loaded", "broken"]
    assert "already declared by same (hetero-a 1.0)" in same[1].error


def test_allow_list_loads_only_the_named_plugins(site) -> None:
    site.install("hetero-toy", "1.0", {"toy": GOOD})
    modules = site.install("hetero-other", "1.0", {"other": plugin_source("other_cpu")})
    plugins = site.load(allow=" toy , ")
    assert by_name(plugins)["toy"].status == "loaded"
    other = by_name(plugins)["other"]
    assert (other.status, other.disabled_by) == ("disabled", "HETERO_PLUGINS")
    assert "other_cpu" not in plugins.backends
    assert modules["other"] not in sys.modules  # a disabled plugin is not even imported


def test_deny_list_wins_over_the_allow_list(site) -> None:
    site.install("hetero-toy", "1.0", {"toy": GOOD})
    site.install("hetero-other", "1.0", {"other": plugin_source("other_cpu")})
    plugins = site.load(allow="toy,other", deny="other")
    assert by_name(plugins)["toy"].status == "loaded"
    assert by_name(plugins)["other"].disabled_by == "HETERO_DISABLE_PLUGINS"


def test_selection_naming_no_installed_plugin_warns(site) -> None:
    site.install("hetero-toy", "1.0", {"toy": GOOD})
    with pytest.warns(PluginWarning, match=r"HETERO_PLUGINS names plugin 'tyo'.*did you mean 'toy'"):
        plugins = site.load(allow="tyo")
    assert by_name(plugins)["toy"].status == "disabled"
    [problem] = plugins.selection_problems
    assert problem.startswith("HETERO_PLUGINS names plugin 'tyo', which is not installed")
    with pytest.raises(UnknownBackendError, match=r"No backend is available\..*HETERO_PLUGINS names plugin 'tyo'"):
        plugins.get("toy_cpu")


def test_get_backend_says_what_there_is(site) -> None:
    site.install("hetero-toy", "0.3.1", {"toy": GOOD})
    site.install("hetero-bad", "2.0", {"bad": plugin_source("bad_npu", body="import no_such_module_x")})
    site.install("hetero-off", "1.0", {"off": plugin_source("off_cpu")})
    load_quietly(site, deny="off")
    with pytest.raises(UnknownBackendError) as info:
        get_backend("toy_cpv")
    message = str(info.value)
    assert message.startswith("no backend named 'toy_cpv' (did you mean 'toy_cpu'?).")
    assert "Available backends: " in message and "toy_cpu" in message
    assert "Plugin bad (hetero-bad 2.0) is broken: cannot import" in message
    assert "No module named 'no_such_module_x'" in message
    assert "Plugin off (hetero-off 1.0) is disabled by HETERO_DISABLE_PLUGINS." in message
    assert message.endswith("Run `hetero plugins` for details.")


def test_get_backend_with_nothing_installed() -> None:
    with pytest.raises(UnknownBackendError, match="No hetero plugin is installed.*'hetero.backends'"):
        PluginSet({}, ()).get("llvm_cpu")


def test_discovery_is_cached_until_reload(site) -> None:
    first = site.load()
    assert load_plugins() is first
    site.install("hetero-late", "1.0", {"late": plugin_source("late_cpu")})
    assert "late_cpu" not in load_plugins().backends
    assert "late_cpu" in load_plugins(reload=True).backends


def test_plugin_object_need_not_be_a_module(site) -> None:
    # An entry point may name an object inside a module ("module:attr").
    source = GOOD + "\n\nclass Holder:\n    hetero_backends = staticmethod(hetero_backends)\n\nholder = Holder()\n"
    modules = site.install("hetero-obj", "1.0", {"obj": source})
    info = next(site.path.glob("hetero_obj-1.0.dist-info"))
    (info / "entry_points.txt").write_text(f"[hetero.backends]\nobj = {modules['obj']}:holder\n")
    plugins = site.load()
    assert by_name(plugins)["obj"].status == "loaded" and "toy_cpu" in plugins.backends


def test_hookimpl_marker_is_the_one_the_specs_use() -> None:
    @hookimpl
    def hetero_backends() -> list:
        return []

    assert getattr(hetero_backends, "hetero_impl") is not None


def test_a_pip_installed_plugin_is_found(site, tmp_path) -> None:
    module = f"hetero_test_{uuid.uuid4().hex[:8]}_pip"
    project = write_project(tmp_path / "project", "hetero-pip-toy", "0.4.2", module,
                            plugin_source("pip_cpu"), entry="pip_toy")
    # The project builds with its own in-tree PEP 517 backend: no network, no wheel package.
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--disable-pip-version-check", "--root-user-action=ignore",
         "--target", str(site.path), str(project)],
        check=True, capture_output=True,
    )
    site.modules.append(module)
    plugins = site.load()
    record = by_name(plugins)["pip_toy"]
    assert (record.status, record.distribution, record.version) == ("loaded", "hetero-pip-toy", "0.4.2")
    assert isinstance(plugins.backends["pip_cpu"], ToyBackend)
