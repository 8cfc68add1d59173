"""onnx's whole backend node suite, run on llvm_cpu with no fallback.

The cases come from ``onnx.backend.test.BackendTest`` with :class:`HeteroBackend`:
every node test case the installed onnx ships, not a selection by op name (which
missed cases whose names do not start with their op's). Each compares hetero's
outputs with onnx's expected outputs at onnx's own tolerances. The ones listed in
``onnx_backend_known_failures.txt`` (written by ``benchmarks/onnx_node_suite.py
--write-known-failures``, each with its reason) are strict expected failures: a case
that starts passing fails here until its line is removed. No case may be listed for
a wrong number: an expected failure must be a refusal (an error raised while
importing, compiling or running), and a listed case whose comparison fails is a
failure like any other, unless its line says ``numerics:`` and shows that hetero's
answer is the closer one (a float16 result rounded better than onnx's expected output),
or ``spec:`` and shows that onnx's expected output contradicts the operator's
specification, which hetero follows.
"""

from __future__ import annotations

from pathlib import Path
import unittest
import warnings

import onnx.backend.test
import pytest

from hetero.onnx_backend import HeteroBackend

KNOWN_FAILURES_FILE = Path(__file__).with_name("onnx_backend_known_failures.txt")


def _known_failures() -> dict[str, str]:
    known = {}
    for line in KNOWN_FAILURES_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, reason = line.split(maxsplit=1)
            known[f"{name}_cpu"] = reason
    return known


def _suite() -> tuple[type[unittest.TestCase], list[str]]:
    backend_test = onnx.backend.test.BackendTest(HeteroBackend, __name__)
    cases = backend_test.test_cases["OnnxBackendNodeModelTest"]
    return cases, sorted(n for n in dir(cases) if n.startswith("test_") and n.endswith("_cpu"))


# Held in a tuple: a unittest.TestCase class at module level would be collected whole.
_SUITE = _suite()
NAMES = _SUITE[1]
KNOWN = _known_failures()


def test_known_failures_name_real_cases() -> None:
    stale = sorted(set(KNOWN) - set(NAMES))
    assert not stale, f"known failures that are not onnx node tests any more: {stale}"


def _run(name: str) -> unittest.TestResult:
    result = unittest.TestResult()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnx's case generators warn while building data
        _SUITE[0](name).run(result)
    return result


def _expected(name: str) -> pytest.MarkDecorator:
    """A listed case's strict xfail: a refusal must raise; only a line that says
    ``numerics:`` or ``spec:`` (and why hetero is right) may fail its comparison instead."""
    reason = KNOWN[name]
    raises = AssertionError if reason.startswith(("numerics:", "spec:")) else RuntimeError
    return pytest.mark.xfail(strict=True, reason=reason, raises=raises)


@pytest.mark.parametrize("name", [pytest.param(n, marks=_expected(n)) if n in KNOWN else n
                                  for n in NAMES])
def test_onnx_node_case(name: str) -> None:
    result = _run(name)
    assert not result.skipped, result.skipped[0][1]
    # A failed comparison is a wrong number: never an expected failure.
    assert not result.failures, result.failures[0][1].strip().splitlines()[-1]
    if result.errors:
        raise RuntimeError(result.errors[0][1].strip().splitlines()[-1])
