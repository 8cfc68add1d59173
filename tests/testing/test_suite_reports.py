"""The conformance report carries each failure's message, and the suite leaves the
user's working directory as it found it."""

from __future__ import annotations

import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

from tests.testing.test_suite import BUGGY_RELU  # Relu answers one element off by one

pytest_plugins = ["pytester"]


def test_json_details_carry_each_failures_message(pytester: pytest.Pytester, site: object,
                                                   tmp_path: Path) -> None:
    site.install("hetero-buggy", "1.0", {"buggy": BUGGY_RELU})
    site.load()
    report = tmp_path / "report.json"
    result = pytester.runpytest_inprocess("--hetero-backend", "buggy", "-p", "no:cacheprovider",
                                          "--hetero-max-examples", "2", "-k", "test_op",
                                          "--hetero-report-json", str(report))
    assert result.ret == 1
    data = json.loads(report.read_text())
    failed = [t for t, outcome in data["tests"].items() if outcome == "failed"]
    assert failed and all(t.startswith("test_op[Relu-") for t in failed)
    for test in failed:
        assert "buggy computes a wrong Relu: Relu [" in data["details"][test]


@pytest.mark.slow
def test_the_suite_writes_no_hypothesis_folder_into_the_working_directory(tmp_path: Path) -> None:
    # A test of the user's own beside the suite, drawing integers: hypothesis keeps its
    # constants cache in <home>/.hypothesis even without a database.
    (tmp_path / "test_mine.py").write_text(
        "from hypothesis import given, settings, strategies as st\n"
        "@settings(database=None, derandomize=True, max_examples=3)\n"
        "@given(st.integers())\n"
        "def test_op_of_mine(x):\n"
        "    pass\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HETERO_") and k != "HYPOTHESIS_STORAGE_DIRECTORY"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull,
                           "--rootdir", str(tmp_path), "--hetero-backend", "llvm_cpu", "--hetero-ops", "Relu",
                           "--hetero-max-examples", "1", "-k", "test_op", "test_mine.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert not (tmp_path / ".hypothesis").exists()
    assert (tmp_path / "cache" / "hetero" / "hypothesis").is_dir()
