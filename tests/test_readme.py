"""The README's "Using it" example runs as written, from a model onnx ships."""

from __future__ import annotations

import os
from pathlib import Path
import re

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_using_it_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Using it", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    assert 'hetero.load_onnx("light:' in code
    monkeypatch.chdir(tmp_path)  # it saves model.hetero where it runs
    scope: dict = {}
    exec(compile(code, "README.md (Using it)", "exec"), scope)
    ref = scope["hetero"].run_reference(scope["graph"], {"data_0": scope["x"]})
    for name, want in ref.items():
        np.testing.assert_allclose(scope["out"][name], want, rtol=1e-4, atol=1e-5)
    assert os.path.isfile(tmp_path / "model.hetero")
