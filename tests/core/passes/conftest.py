"""Fixtures for the pass tests: compare a rewritten graph's numbers with the original's."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir.graph import Graph


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Standard-normal float inputs (small integers for integer inputs) for ``graph``."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in graph.inputs:
        if v.dtype.kind == "f":
            feeds[v.name] = rng.standard_normal(v.shape).astype(v.dtype)
        else:
            feeds[v.name] = rng.integers(0, 4, v.shape).astype(v.dtype)
    return feeds


@pytest.fixture
def same_numbers() -> Callable[..., None]:
    """``same_numbers(before, after, rtol=0, atol=0)``: equal outputs, by name, on random inputs."""

    def check(before: Graph, after: Graph, rtol: float = 0.0, atol: float = 0.0) -> None:
        assert [v.name for v in after.outputs] == [v.name for v in before.outputs]
        feeds = random_inputs(before)
        expected = run_reference(before, feeds)
        actual = run_reference(after, feeds)
        for v in before.outputs:
            np.testing.assert_allclose(actual[v.name], expected[v.name], rtol=rtol, atol=atol,
                                       err_msg=f"output {v.name}")

    return check
