"""`hetero plugins`: the table and the JSON, run as a user runs them, in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
import subprocess

import pytest

from hetero.core.plugin import PluginSet
from hetero.core.plugin.listing import format_plugins
from toyplugin import plugin_source, run_hetero, write_distribution



@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site folder with one good plugin and one that fails to import."""
    path = tmp_path / "site"
    path.mkdir()
    write_distribution(path, "hetero-toy", "0.3.1", {"toy": "cli_toy_plugin"},
                       {"cli_toy_plugin": plugin_source("toy_cpu", ops=("Relu", "Add", "Conv"))})
    write_distribution(path, "hetero-bad", "2.0", {"bad": "cli_bad_plugin"},
                       {"cli_bad_plugin": plugin_source("bad_npu", body="raise ImportError('no libbad')")})
    return path


def hetero(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_hetero(site, "plugins", *args, **env)


def test_table_lists_the_plugin_and_reports_the_broken_one(site: Path) -> None:
    result = hetero(site)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["backend"])
    assert lines[header].split() == ["backend", "version", "distribution", "device", "ops", "memory"]
    row = next(line for line in lines if line.split()[:1] == ["toy_cpu"])
    assert row.split() == ["toy_cpu", "1.0", "hetero-toy", "0.3.1", "cpu", "3", "DRAM", "1", "GiB"]
    assert "Broken plugins (1), skipped:" in lines
    assert "  bad (hetero-bad 2.0): cannot import cli_bad_plugin: ImportError: no libbad" in lines
    # The listing reports broken plugins itself; no duplicate warning on stderr.
    assert "PluginWarning" not in result.stderr


def test_json_for_tools(site: Path) -> None:
    result = hetero(site, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    toy = next(b for b in data["backends"] if b["name"] == "toy_cpu")
    assert toy["distribution"] == "hetero-toy" and toy["distribution_version"] == "0.3.1"
    assert toy["plugin"] == "toy" and toy["device_kind"] == "cpu"
    assert toy["ops"] == ["Add", "Conv", "Relu"]
    assert toy["memory"] == [{"name": "DRAM", "capacity_bytes": 2**30, "bandwidth_gbps": 20.0,
                              "latency_ns": 100.0, "scope": "global"}]
    bad = next(p for p in data["plugins"] if p["name"] == "bad")
    assert bad["status"] == "broken" and bad["distribution"] == "hetero-bad" and bad["version"] == "2.0"
    assert bad["error"] == "cannot import cli_bad_plugin: ImportError: no libbad"
    assert "Traceback" in bad["traceback"]


def test_disabled_plugins_are_listed_as_such(site: Path) -> None:
    result = hetero(site, HETERO_DISABLE_PLUGINS="bad")
    assert result.returncode == 0, result.stderr
    assert "  bad (hetero-bad 2.0): disabled by HETERO_DISABLE_PLUGINS" in result.stdout.splitlines()
    assert "Broken plugins" not in result.stdout


def test_a_selection_that_matches_nothing_is_reported(site: Path) -> None:
    result = hetero(site, HETERO_PLUGINS="tyo")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "No backends are available."
    assert "  toy (hetero-toy 0.3.1): disabled by HETERO_PLUGINS" in lines
    problem = next(line for line in lines if line.startswith("  HETERO_PLUGINS names"))
    assert "'tyo', which is not installed (did you mean 'toy'?)" in problem


def test_usage_error_exits_2(site: Path) -> None:
    result = hetero(site, "--colour")
    assert result.returncode == 2
    assert "unrecognized arguments: --colour" in result.stderr


def test_no_plugins_installed_is_said_plainly() -> None:
    text = format_plugins(PluginSet({}, ()))
    assert text.startswith("No hetero plugins are installed.")
    assert "'hetero.backends' entry point" in text


def test_one_backend_in_detail(site: Path) -> None:
    result = hetero(site, "toy_cpu")
    assert result.returncode == 0, result.stderr
    assert "backend       toy_cpu 1.0 (cpu)" in result.stdout
    assert "Add, Conv, Relu" in result.stdout and "DRAM" in result.stdout


def test_a_mistyped_backend_name_gets_did_you_mean(site: Path) -> None:
    result = hetero(site, "toy_cup")
    assert result.returncode == 2
    assert "did you mean 'toy_cpu'" in result.stderr and "Traceback" not in result.stderr


#: A plugin whose import never returns: it waits on an event nobody sets.
HANGS = "import threading\nthreading.Event().wait()\n"


@pytest.mark.slow
def test_isolated_reports_a_hanging_import_and_lists_the_others(site: Path) -> None:
    write_distribution(site, "hetero-hang", "1.0", {"hang": "cli_hang_plugin"},
                       {"cli_hang_plugin": plugin_source("hang_npu", body=HANGS)})
    # Each child's start-up, and then its plugin's import, get 20 s on their own: the
    # hanging import exceeds any limit, the good one's needs a fraction of a second.
    result = hetero(site, "--isolated", "--timeout", "20", HETERO_PLUGINS="toy,bad,hang")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    row = next(line for line in lines if line.split()[:1] == ["toy_cpu"])
    assert row.split() == ["toy_cpu", "1.0", "hetero-toy", "0.3.1", "cpu", "3", "DRAM", "1", "GiB"]
    assert "Broken plugins (2), skipped:" in lines
    assert "  bad (hetero-bad 2.0): cannot import cli_bad_plugin: ImportError: no libbad" in lines
    hang = next(line for line in lines if line.startswith("  hang (hetero-hang 1.0): "))
    assert hang.endswith(
        "import did not finish within 20 s (its hetero_backends hook included), so the isolated "
        "child was stopped; in-process it would block every hetero command that loads plugins: "
        "set HETERO_DISABLE_PLUGINS=hang until it is fixed"
    )


@pytest.mark.slow
def test_isolated_json_is_the_plain_json(site: Path) -> None:
    plain = json.loads(hetero(site, "--json", HETERO_PLUGINS="toy,bad").stdout)
    result = hetero(site, "--isolated", "--json", HETERO_PLUGINS="toy,bad")
    assert result.returncode == 0, result.stderr
    isolated = json.loads(result.stdout)
    for data in (plain, isolated):
        for record in data["plugins"]:
            assert "Traceback" in record.pop("traceback") or record["status"] != "broken"
    assert isolated == plain
    detail = hetero(site, "toy_cpu", "--isolated", HETERO_PLUGINS="toy")
    assert detail.returncode == 0, detail.stderr
    assert "backend       toy_cpu 1.0 (cpu)" in detail.stdout


def test_help_says_an_in_process_import_cannot_be_bounded(site: Path) -> None:
    result = hetero(site, "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "--isolated" in text and "--timeout SECONDS" in text
    assert "a hanging import cannot be interrupted and blocks the command" in text


def test_a_timeout_must_be_positive(site: Path) -> None:
    result = hetero(site, "--timeout", "0")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "hetero plugins: error: --timeout must be a positive number of seconds, got 0"
    )



def test_an_adapted_plugin_is_listed_with_what_to_update(site: Path) -> None:
    from tests.core.plugin.test_compat import API1  # every hook in plugin API 1's form

    write_distribution(site, "hetero-old", "1.0", {"old": "cli_old_plugin"}, {"cli_old_plugin": API1})
    expected = ("  old (hetero-old 1.0): backend 'old' uses plugin API 1 hooks, which hetero adapts to "
                "API 3 for now: supports(self, node) -> write supports(self, node, target); "
                "estimate(self, subgraph) -> write estimate(self, subgraph, target); "
                "compile(self, subgraph, options) -> write compile(self, subgraph, target) and read "
                "options from target.options; pattern 'neg_relu' check(match) -> write check(match, target). "
                "See 'Migrating from API 1 and 2' in docs/plugin-guide.md")
    plain = hetero(site, HETERO_PLUGINS="old")
    isolated = hetero(site, "--isolated", HETERO_PLUGINS="old")
    for result in (plain, isolated):
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert next(line for line in lines if line.split()[:1] == ["old"]).split()[:2] == ["old", "1.0"]
        assert lines[lines.index("Adapted from plugin API 1 (1), to update:") + 1] == expected
    data = json.loads(hetero(site, "--json", HETERO_PLUGINS="old").stdout)
    [record] = [r for r in data["plugins"] if r["name"] == "old"]
    assert record["status"] == "loaded" and record["adapted"] == {"old": expected.split(": ", 1)[1]}
