"""Plugin discovery with each plugin imported in a child process (``hetero plugins --isolated``)."""

from __future__ import annotations

import sys
import warnings

import pytest

from hetero.core.plugin import PluginWarning
from hetero.core.plugin.isolated import isolated_listing
from hetero.core.plugin.listing import PluginListing, describe_plugins
from hetero.errors import PluginError, UnknownBackendError
from toyplugin import plugin_source

#: Per phase of each child; far above what a child needs, even on a loaded machine.
GENEROUS = 600.0


def listing(monkeypatch: pytest.MonkeyPatch, allow: str | None = None,
            deny: str | None = None) -> PluginListing:
    """The isolated listing with ``HETERO_PLUGINS=allow`` and ``HETERO_DISABLE_PLUGINS=deny``.

    Nothing is loaded in this process: some of these plugins would take it down.
    """
    for variable, value in (("HETERO_PLUGINS", allow), ("HETERO_DISABLE_PLUGINS", deny)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        return isolated_listing(GENEROUS)


def records(listed: PluginListing) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    return {r.name: (r.status, r.error, r.backends) for r in listed.records}


@pytest.mark.slow
def test_the_isolated_listing_is_the_in_process_one(site, monkeypatch) -> None:
    site.install("hetero-toy", "0.3.1", {"toy": plugin_source("toy_cpu", ops=("Relu", "Conv"))})
    site.install("hetero-bad", "2.0", {"bad": plugin_source("bad_npu", body="import no_such_module_x")})
    site.install("hetero-fast", "1.0", {"fast": plugin_source("llvm_cpu")})  # a bundled name
    site.install("hetero-off", "1.0", {"off": plugin_source("off_cpu")})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        in_process = site.load(deny="off")
    isolated = listing(monkeypatch, deny="off")
    assert records(isolated) == {r.name: (r.status, r.error, r.backends) for r in in_process.records}
    expected, found = describe_plugins(in_process), describe_plugins(isolated)
    for data in (expected, found):
        for record in data["plugins"]:
            record.pop("traceback")  # the frames differ: one ran in a child
        # The bundled backends' declarations are theirs to test (their op set follows
        # the lowerings of the source tree, which this process read earlier).
        for backend in data["backends"]:
            if backend["bundled"]:
                del backend["ops"], backend["patterns"]
    assert found == expected
    assert records(isolated)["fast"][0] == "broken"
    assert isolated.provided_by["llvm_cpu"].bundled


def test_a_plugin_is_not_imported_into_the_calling_process(site, monkeypatch) -> None:
    modules = site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu")})
    listed = listing(monkeypatch, allow="toy")
    assert records(listed)["toy"] == ("loaded", None, ("toy_cpu",))
    assert listed.backend("toy_cpu")["ops"] == ["Add", "Neg", "Relu"]
    assert modules["toy"] not in sys.modules


def test_a_plugin_that_crashes_the_interpreter_is_broken(site, monkeypatch) -> None:
    body = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    site.install("hetero-crash", "1.0", {"crash": plugin_source("crash_npu", body=body)})
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu")})
    listed = listing(monkeypatch, allow="crash,toy")
    status, error, _ = records(listed)["crash"]
    assert status == "broken"
    assert error == "the isolated child importing it was killed by SIGSEGV before reporting"
    assert records(listed)["toy"][0] == "loaded" and "toy_cpu" in listed.backends


def test_what_a_plugin_prints_does_not_garble_its_result(site, monkeypatch) -> None:
    body = "import os, sys\nprint('hello from the plugin')\nos.write(1, b'raw bytes\\n')\n"
    site.install("hetero-chatty", "1.0", {"chatty": plugin_source("chatty_cpu", body=body)})
    listed = listing(monkeypatch, allow="chatty")
    assert records(listed)["chatty"] == ("loaded", None, ("chatty_cpu",))


def test_an_unknown_backend_says_what_there_is(site, monkeypatch) -> None:
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu")})
    listed = listing(monkeypatch, allow="toy")
    with pytest.raises(UnknownBackendError, match=r"did you mean 'toy_cpu'.*Available backends: toy_cpu"):
        listed.backend("toy_cup")


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), True])
def test_the_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(PluginError, match="timeout must be a positive number of seconds"):
        isolated_listing(timeout)
