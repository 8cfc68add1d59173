"""onnx's own backend node tests for every canonical op, run on llvm_cpu with no fallback.

The cases come from ``onnx.backend.test.BackendTest`` with :class:`HeteroBackend`:
every node test whose name starts with a canonical op's name (plus Sum and Constant,
which the frontend rewrites). Each compares hetero's outputs with onnx's expected
outputs at onnx's own tolerances. The ones listed in
``onnx_backend_known_failures.txt`` are strict expected failures, with their reasons.
"""

from __future__ import annotations

from pathlib import Path
import re
import unittest
import warnings

import onnx.backend.test
import pytest

from hetero.core.ir.opdef import op_names
from hetero.onnx_backend import HeteroBackend

KNOWN_FAILURES_FILE = Path(__file__).with_name("onnx_backend_known_failures.txt")


def _known_failures() -> dict[str, str]:
    known = {}
    for line in KNOWN_FAILURES_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, reason = line.split(maxsplit=1)
            known[f"{name}_cpu"] = reason
    return known


def _snake(op: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower()


def _suite() -> tuple[type[unittest.TestCase], list[str]]:
    backend_test = onnx.backend.test.BackendTest(HeteroBackend, __name__)
    prefixes = sorted({_snake(op) for op in [*op_names(), "Sum", "Constant"]} | {"lrn", "matmul"})
    pattern = re.compile(rf"^test_({'|'.join(prefixes)})(_.*)?_cpu$")
    backend_test.include(pattern.pattern)
    cases = backend_test.test_cases["OnnxBackendNodeModelTest"]
    return cases, sorted(n for n in dir(cases) if pattern.match(n))


# Held in a tuple: a unittest.TestCase class at module level would be collected whole.
_SUITE = _suite()
NAMES = _SUITE[1]
KNOWN = _known_failures()


def test_known_failures_name_real_cases() -> None:
    stale = sorted(set(KNOWN) - set(NAMES))
    assert not stale, f"known failures that are not onnx node tests any more: {stale}"


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN[n])) if n in KNOWN else n
    for n in NAMES
])
def test_onnx_node_case(name: str) -> None:
    result = unittest.TestResult()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnx's case generators warn while building data
        _SUITE[0](name).run(result)
    problems = result.errors + result.failures
    assert not result.skipped, result.skipped[0][1]
    assert not problems, problems[0][1].strip().splitlines()[-1]
