"""The sampling ops' lowerings against their references on the tensor-IR interpreter:
GridSample in every mode and padding, at rounding ties, points far outside and NaN, with
float64 and float16 grids; RoiAlign on rois inside, beyond, malformed and far larger than
the image; AffineGrid in 2-D and 3-D."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from lowercheck import lowered_and_reference

RNG = np.random.default_rng(11)
X2 = RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)
GRID2 = RNG.uniform(-2.5, 2.5, (1, 3, 2, 2)).astype(np.float32)
X3 = RNG.standard_normal((1, 1, 2, 3, 2)).astype(np.float32)
GRID3 = RNG.uniform(-1.5, 1.5, (1, 2, 1, 2, 3)).astype(np.float32)


@pytest.mark.parametrize("mode,padding,align", list(itertools.product(
    ("linear", "nearest", "cubic"), ("zeros", "border", "reflection"), (0, 1))))
def test_lowering_matches_the_reference(mode: str, padding: str, align: int) -> None:
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    for x, grid in ((X2, GRID2), (X3, GRID3)):
        got, want = lowered_and_reference("GridSample", {"X": x, "grid": grid}, **attrs)
        if mode == "nearest":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_nearest_ties_far_points_and_nan_pick_the_references_index(padding: str) -> None:
    x = np.arange(5, dtype=np.int32).reshape(1, 1, 5)
    g = np.concatenate([np.arange(-13, 14, dtype=np.float32) / 5,
                        np.array([np.nan, 1e30, -1e30, np.inf], np.float32)])
    got, want = lowered_and_reference("GridSample", {"X": x, "grid": g.reshape(1, -1, 1)},
                                      mode="nearest", padding_mode=padding)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("grid_dtype", [np.float64, np.float16])
def test_grid_precision_follows_the_grid(grid_dtype: type) -> None:
    got, want = lowered_and_reference("GridSample", {"X": X2, "grid": GRID2.astype(grid_dtype)},
                                      mode="cubic", padding_mode="reflection")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bool_nearest_reads_false_outside() -> None:
    x = np.array([[[True, True, False]]])
    grid = np.array([[[-2.0], [-0.9], [0.0], [0.9], [2.0]]], np.float32)
    got, want = lowered_and_reference("GridSample", {"X": x, "grid": grid}, mode="nearest")
    np.testing.assert_array_equal(got, want)
    assert want.tolist() == [[[False, True, True, False, False]]]


ROI_X = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
ROIS = np.array([[0.5, 1.0, 4.0, 3.5],     # inside
                 [-2.0, -1.5, 9.0, 7.0],   # beyond every edge: samples outside weigh 0
                 [3.0, 2.0, 1.0, 0.5],     # malformed: ends before starts
                 [0.0, 0.0, 24.0, 2.0]],   # far wider than the image: many samples a bin
                np.float32)
BATCH = np.array([1, 0, 1, 0], np.int64)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ratio", [0, 1, 3])
@pytest.mark.parametrize("half_pixel", [0, 1])
def test_roi_align_lowering_matches_the_reference(mode: str, ratio: int, half_pixel: int) -> None:
    got, want = lowered_and_reference(
        "RoiAlign", {"X": ROI_X, "rois": ROIS, "batch_indices": BATCH}, mode=mode,
        output_height=2, output_width=3, sampling_ratio=ratio, half_pixel=half_pixel)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_outside_sample_reads_pixel_zero_as_the_references_do() -> None:
    # A sample outside weighs 0 against pixel (0, 0): NaN there makes such bins NaN.
    x = ROI_X.copy()
    x[0, :, 0, 0] = np.nan
    got, want = lowered_and_reference("RoiAlign", {"X": x, "rois": ROIS, "batch_indices": BATCH},
                                      output_height=2, output_width=2, sampling_ratio=2)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(want[1]).all() and not np.isnan(want[0]).any()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 1, 3), (2, 1, 3, 1, 2)])
def test_affine_grid_lowering_matches_the_reference(size: tuple[int, ...], align: int) -> None:
    r = len(size) - 2
    theta = RNG.standard_normal((size[0], r, r + 1)).astype(np.float32)
    got, want = lowered_and_reference("AffineGrid", {"theta": theta}, size=size, align_corners=align)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
