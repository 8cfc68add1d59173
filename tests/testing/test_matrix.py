"""The conformance report when no (op, dtype) check ran: a placeholder is no matrix cell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toyplugin import plugin_source

from hetero.testing.matrix import Report

pytest_plugins = ["pytester"]


def test_the_placeholder_of_an_empty_op_check_is_no_cell() -> None:
    report = Report("toy", "1.0")
    report.record("test_op[none]", "skipped", (None, None), "the backend claims none of these ops")
    report.record("test_op[Relu-float32]", "passed", ("Relu", "float32"))
    assert report.matrix == {"Relu": {"float32": "passed"}}
    assert report.tests["test_op[none]"] == "skipped"
    assert report.table().splitlines()[2].split() == ["Relu", "ok"]


def test_a_run_that_checks_no_op_prints_its_table(pytester: pytest.Pytester, site: object,
                                                  tmp_path: Path) -> None:
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy", ops=("Relu",))})
    site.load()
    report = tmp_path / "report.json"
    # toy claims no Conv: test_op runs only its "[none]" placeholder, skipped with the reason.
    result = pytester.runpytest_inprocess("--hetero-backend", "toy", "-p", "no:cacheprovider",
                                          "--hetero-ops", "Conv", "-k", "test_op",
                                          "--hetero-report-json", str(report))
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["hetero conformance: toy 1.0", "(no op claimed, or no op check ran)"])
    data = json.loads(report.read_text())
    assert data["matrix"] == {} and data["tests"]["test_op[none]"] == "skipped"
    assert data["details"]["test_op[none]"] == "the backend claims none of these ops"
