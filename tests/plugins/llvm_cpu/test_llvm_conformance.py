"""llvm_cpu through the conformance suite, as any third-party backend is checked.

The suite runs in a fresh process (``hetero conformance llvm_cpu``) with no known
failures: every op llvm_cpu claims must compile and agree with its reference
definition for every dtype it accepts, and every other check must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from toyplugin import run_conformance

from hetero.core.plugin import get_backend


@pytest.mark.slow
def test_llvm_cpu_passes_the_conformance_suite_with_no_known_failures(tmp_path: Path) -> None:
    data, suite = run_conformance(tmp_path, "llvm_cpu")
    assert set(data["summary"]) <= {"passed", "skipped"}, data["summary"]
    # Skips are only for what llvm_cpu does not declare (patterns), each with its reason;
    # it runs the int8 models too, on their integer ops.
    assert set(data["details"]) == {"test_contract_pattern[none]", "test_pattern[none]"}
    assert {"test_model_int8[conv_block]", "test_model_int8[mlp]", "test_model_int8[transformer_block]"} <= {
        c.get("name") for c in suite.iter("testcase") if c.find("failure") is None and c.find("skipped") is None}
    cells = data["matrix"]
    assert set(cells) == set(get_backend("llvm_cpu").supported_ops)
    assert all("passed" in row.values() and "failed" not in row.values() for row in cells.values())
    assert int(suite.get("tests")) == data["summary"]["passed"] + data["summary"].get("skipped", 0)
