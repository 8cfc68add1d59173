"""The sampling ops compiled by llvm_cpu at the inputs that would make a careless kernel read
out of bounds or convert NaN to an index: points far outside, infinities, NaN, rois far
larger than the image, batch indices out of range."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder


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


def _roi_align(**attrs: object) -> Graph:
    b = GraphBuilder("roi")
    b.output(b.RoiAlign(b.input("X", (2, 2, 4, 5), np.float32), b.input("rois", (3, 4), np.float32),
                        b.input("batch_indices", (3,), np.int64), **attrs))
    return b.build()


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_nan_and_huge_rois(mode: str) -> None:
    graph = _roi_align(mode=mode, output_height=2, output_width=2)
    feeds = {"X": np.arange(80, dtype=np.float32).reshape(2, 2, 4, 5),
             "rois": np.array([[np.nan, 0, 2, 2], [0, 0, 3e3, 3.0], [-300, -300, 300, 300]],
                              np.float32),
             "batch_indices": np.array([0, 1, 1])}
    got = next(iter(hetero.compile(graph, targets=["llvm_cpu"]).run(feeds).values()))
    want = next(iter(hetero.run_reference(graph, feeds).values()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_batch_index_out_of_range_is_refused_at_run_time() -> None:
    exe = hetero.compile(_roi_align(), targets=["llvm_cpu"])
    feeds = {"X": np.zeros((2, 2, 4, 5), np.float32), "rois": np.zeros((3, 4), np.float32),
             "batch_indices": np.array([0, 2, 1])}
    with pytest.raises(hetero.errors.InputError, match="out of range"):
        exe.run(feeds)


def test_a_half_pixel_tie_rounds_as_the_reference_despite_fused_multiply_adds() -> None:
    """(-1/3 + 1) * 3 - 1 rounds to just above 1.0 step by step, which a fused
    multiply-add would not reproduce: the coordinate keeps the reference's roundings."""
    g = Graph("gs")
    x = g.add_input("X", (1, 1, 3, 1), "int8")
    grid = g.add_input("grid", (1, 1, 4, 2), "float64")
    g.set_outputs([g.add_node("GridSample", [x, grid], {"align_corners": 0, "mode": "nearest",
                                                         "padding_mode": "zeros"}).output])
    feeds = {"X": np.array([[[[-97], [58], [15]]]], np.int8),
             "grid": np.array([[[[-0.5, -1.0], [-0.5, -0.5], [-0.5, -5 / 6], [-1.0, -1 / 3]]]])}
    got = hetero.compile(g, targets=["llvm_cpu"]).run(feeds)
    np.testing.assert_array_equal(got[g.outputs[0].name], hetero.run_reference(g, feeds)[g.outputs[0].name])
