"""npu_sim through the conformance suite, as any third-party backend is checked.

The suite runs in a fresh process (``hetero conformance npu_sim``) with no known
failures. npu_sim computes int8 only, so its matrix has an int8 cell for every op
it claims, each passed, and every other dtype declined with a reason; the float
models are skipped (it claims none of their ops) and their int8 versions
(``test_model_int8``) must pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from toyplugin import run_conformance

from hetero.core.plugin import get_backend
from hetero.testing.models import MODELS


@pytest.mark.slow
def test_npu_sim_passes_the_conformance_suite_with_no_known_failures(tmp_path: Path) -> None:
    data, _ = run_conformance(tmp_path, "npu_sim")
    assert set(data["summary"]) <= {"passed", "skipped", "unsupported"}, data["summary"]
    cells = data["matrix"]
    assert set(cells) == set(get_backend("npu_sim").supported_ops)
    assert all(row.get("int8") == "passed" for row in cells.values()), cells
    assert all(outcome in ("passed", "unsupported") for row in cells.values() for outcome in row.values())
    tests = data["tests"]
    assert all(tests[f"test_model_int8[{name}]"] == "passed" for name in MODELS)
    # The float models are skipped for the one reason that npu_sim takes none of their ops.
    assert all(data["details"][f"test_model[{name}]"] == "backend claims none of the model's ops"
               for name in MODELS)
    skipped = {t for t, outcome in tests.items() if outcome == "skipped"}
    assert skipped == {"test_contract_pattern[none]", "test_pattern[none]",
                       *(f"test_model[{name}]" for name in MODELS)}
