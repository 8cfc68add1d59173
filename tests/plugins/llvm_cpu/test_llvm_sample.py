"""The sampling ops compiled by llvm_cpu at the inputs that would make a careless kernel read
out of bounds or convert NaN to an index: points far outside, infinities, NaN."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.ir import GraphBuilder


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_far_points_and_nan(mode: str, padding: str) -> None:
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(1, 2, 3, 4)
    g = np.array([np.nan, 1e30, -1e30, np.inf, -np.inf, 0.3, -1.7, 2.9], np.float32)
    grid = np.stack(np.meshgrid(g, g[::-1]), axis=-1)[None]
    b = GraphBuilder("gs")
    b.output(b.GridSample(b.input("X", x.shape, x.dtype), b.input("grid", grid.shape, grid.dtype),
                          mode=mode, padding_mode=padding))
    graph = b.build()
    got = next(iter(hetero.compile(graph, targets=["llvm_cpu"]).run({"X": x, "grid": grid}).values()))
    want = next(iter(hetero.run_reference(graph, {"X": x, "grid": grid}).values()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
