"""The host kernels of data-dependent ops against onnxruntime, bit for bit: drawn inputs
full of ties, zeros and NaN, the edge cases each op's spec leaves to the runtime, and the
errors bad inputs raise."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
import numpy as np
import pytest

from hetero.core.exec import host_ops
from hetero.core.exec.host_ops import HOST_OPS, run_host_op
from hetero.errors import InputError, UnsupportedOpError
from oracle import run_node

#: Every ONNX output of each op, so that the oracle model declares all of them.
N_OUTPUTS = {"NonZero": 1, "Compress": 1, "Unique": 4, "NonMaxSuppression": 1}
NMS_INPUTS = ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold",
              "score_threshold")


def _onnxruntime(op: str, inputs: list[np.ndarray | None], names: tuple[str, ...],
                 attrs: dict[str, Any]) -> list[np.ndarray]:
    feeds = dict(zip(names, inputs))
    while feeds and feeds[names[len(feeds) - 1]] is None:  # trailing absent inputs
        del feeds[names[len(feeds) - 1]]
    return run_node(op, feeds, N_OUTPUTS[op], **attrs)


def _assert_bitwise(got: np.ndarray, want: np.ndarray) -> None:
    """Same dtype, shape and values; NaN where NaN is and the sign of every zero."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    else:
        np.testing.assert_array_equal(got, want)


def check(op: str, inputs: list[np.ndarray | None], names: tuple[str, ...],
          **attrs: Any) -> list[np.ndarray]:
    """Run ``op`` on the host and in onnxruntime; every output must agree exactly."""
    got = run_host_op(op, attrs, inputs, "node under test")
    want = _onnxruntime(op, inputs, names, attrs)
    assert len(got) == N_OUTPUTS[op]
    for g, w in zip(got, want):
        _assert_bitwise(g, w)
    return got


def _values(rng: np.random.Generator, shape: list[int], dtype: type, nan: bool) -> np.ndarray:
    """Small integers, so zeros and repeats are common; NaN and -0.0 among floats."""
    x = rng.integers(-2, 3, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[rng.random(shape) < 0.15] = -0.0
        if nan:
            x[rng.random(shape) < 0.2] = np.nan
    return x


# --- NonZero ---------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 4), max_size=3), nan=st.booleans(),
       dtype=st.sampled_from([np.float32, np.float16, np.int32, np.int64, np.uint8, np.bool_]),
       seed=st.integers(0, 2**16))
def test_non_zero_matches_onnxruntime(shape: list[int], nan: bool, dtype: type, seed: int) -> None:
    check("NonZero", [_values(np.random.default_rng(seed), shape, dtype, nan)], ("X",))


@pytest.mark.parametrize("x", [np.array(2.5, np.float32), np.array(0.0, np.float32),
                               np.zeros((3, 2), np.float32), np.zeros((2, 0, 3), np.int64),
                               np.array([np.nan, -0.0, 0.0, 1.0], np.float32)],
                         ids=["scalar", "scalar-zero", "all-zero", "empty", "nan-and-negative-zero"])
def test_non_zero_edge_cases(x: np.ndarray) -> None:
    """A 0-d input gives [1, nnz] as onnxruntime has it (the spec says [0, nnz])."""
    (out,) = check("NonZero", [x], ("X",))
    assert out.shape[0] == max(x.ndim, 1)


# --- Compress --------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), data=st.data(),
       dtype=st.sampled_from([np.float32, np.int64, np.uint8, np.bool_]),
       seed=st.integers(0, 2**16))
def test_compress_matches_onnxruntime(shape: list[int], data: st.DataObject, dtype: type,
                                      seed: int) -> None:
    """With and without axis, negative axes, conditions shorter and longer than the axis."""
    rng = np.random.default_rng(seed)
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    length = int(np.prod(shape)) if axis is None else shape[axis]
    condition = rng.random(data.draw(st.integers(0, length + 2))) < 0.5
    attrs = {} if axis is None else {"axis": axis}
    check("Compress", [_values(rng, shape, dtype, True), condition], ("input", "condition"),
          **attrs)


@pytest.mark.parametrize(("condition", "axis"), [
    ([False, True], 1), ([True], None), ([], 0), ([False, False, False], 0),
    ([True, True, True, True, True, True, True], 1), ([True] * 13, None)],
    ids=["short", "short-flat", "empty", "all-false", "long", "long-flat"])
def test_compress_edge_cases(condition: list[bool], axis: int | None) -> None:
    """A short condition selects from the axis's first entries; a long one's tail is ignored."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    attrs = {} if axis is None else {"axis": axis}
    check("Compress", [x, np.array(condition, np.bool_)], ("input", "condition"), **attrs)


def test_compress_short_condition_values() -> None:
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    (out,) = run_host_op("Compress", {"axis": -1}, [x, np.array([False, True])], "c")
    np.testing.assert_array_equal(out, [[1], [5], [9]])


# --- Unique ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), sorted_=st.sampled_from([0, 1]),
       nan=st.booleans(), dtype=st.sampled_from([np.float32, np.float64, np.int64, np.int8]),
       seed=st.integers(0, 2**16))
def test_unique_flattened_matches_onnxruntime(shape: list[int], sorted_: int, nan: bool,
                                              dtype: type, seed: int) -> None:
    """No axis: NaN included, which onnxruntime's std::map files under its smallest key."""
    x = _values(np.random.default_rng(seed), shape, dtype, nan)
    check("Unique", [x], ("X",), sorted=sorted_)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=3), data=st.data(),
       sorted_=st.sampled_from([0, 1]), dtype=st.sampled_from([np.float32, np.int64]),
       nan=st.booleans(), seed=st.integers(0, 2**16))
def test_unique_along_axis_matches_onnxruntime(shape: list[int], data: st.DataObject,
                                               sorted_: int, dtype: type, nan: bool,
                                               seed: int) -> None:
    """Unique slices along every axis, from values in {0, 1} so that slices repeat, and
    NaN, which makes onnxruntime's slice order inconsistent (its map's shape decides).

    Only the axis itself may be empty: onnxruntime aborts the process on empty slices
    (see :func:`test_unique_of_empty_slices`).
    """
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    shape = [size if dim in (axis, axis + len(shape)) else max(size, 1)
             for dim, size in enumerate(shape)]
    x = rng.integers(0, 2, shape).astype(dtype)
    if nan and x.dtype.kind == "f":
        x[rng.random(shape) < 0.2] = np.nan
    check("Unique", [x], ("X",), sorted=sorted_, axis=axis)


SPEC_X4 = np.array([[[1, 1], [0, 1], [2, 1], [0, 1]],
                    [[1, 1], [0, 1], [2, 1], [0, 1]]], np.float32)


@pytest.mark.parametrize(("x", "attrs", "want"), [
    (np.array([2, 1, 1, 3, 4, 3], np.float32), {"sorted": 0},
     [[2, 1, 3, 4], [0, 1, 3, 4], [0, 1, 1, 2, 3, 2], [1, 2, 2, 1]]),
    (np.array([[1, 3], [2, 3]], np.float32), {},
     [[1, 2, 3], [0, 2, 1], [0, 2, 1, 2], [1, 1, 2]]),
    (np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.float32), {"axis": 0},
     [[[1, 0, 0], [2, 3, 4]], [0, 2], [0, 0, 1], [2, 1]]),
    (SPEC_X4, {"axis": 1},
     [[[[0, 1], [1, 1], [2, 1]], [[0, 1], [1, 1], [2, 1]]], [1, 0, 2], [1, 0, 2, 0], [2, 1, 1]]),
], ids=["example1-unsorted", "example2", "example3-axis", "example4-axis"])
def test_unique_spec_examples(x: np.ndarray, attrs: dict[str, Any], want: list[list[Any]]) -> None:
    """The four examples of the ONNX spec, and onnxruntime agreeing."""
    got = check("Unique", [x], ("X",), **attrs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.array(w, g.dtype))


@pytest.mark.parametrize(("x", "attrs"), [
    (SPEC_X4, {"axis": 1, "sorted": 0}),
    (SPEC_X4, {"axis": -1, "sorted": 0}),
    (np.zeros((0, 3), np.float32), {"axis": 0}),
    (np.zeros((0, 3), np.float32), {"axis": 1}),
    (np.zeros((0,), np.int64), {"sorted": 0}),
    (np.array(3.0, np.float32), {}),
    (np.array([-0.0, 0.0, 0.0], np.float32), {}),
    (np.array([0.0, -0.0], np.float32), {"sorted": 0}),
    (np.array([np.nan, 1, np.nan, 0, 1], np.float32), {}),
    (np.array([3, np.nan, 2, np.nan, 5, np.nan], np.float32), {"sorted": 0}),
    (np.array([[1, np.nan], [1, np.nan], [0, 2], [1, np.nan]], np.float32), {"axis": 0}),
    (np.array([[0, 0], [np.nan, 2]], np.float32), {"axis": 0}),
    (np.array([[2, 1], [np.nan, 0], [0, 3], [1, 1], [np.nan, np.nan], [0, 3], [2, np.nan],
               [1, 0], [0, 1], [np.nan, 1], [3, 3], [2, 0]], np.float32), {"axis": 0}),
], ids=["axis-unsorted", "negative-axis-unsorted", "empty-axis0", "empty-slices",
        "empty-flat", "scalar", "signed-zero", "signed-zero-unsorted", "leading-nan",
        "nan-joins-smallest-so-far", "repeated-nan-rows",
        "nan-row-equivalent-to-any", "nan-rows-through-a-rebalanced-tree"])
def test_unique_edge_cases(x: np.ndarray, attrs: dict[str, Any]) -> None:
    check("Unique", [x], ("X",), **attrs)


def test_unique_of_empty_slices() -> None:
    """Slices with no elements are all equal: one group. onnxruntime's kernel aborts on
    this input (it indexes the empty output), so the spec's numpy semantics decide."""
    x = np.zeros((3, 0, 2), np.float32)
    y, indices, inverse, counts = run_host_op("Unique", {"axis": 0}, [x], "u")
    assert y.shape == (1, 0, 2) and y.dtype == np.float32
    np.testing.assert_array_equal(indices, [0])
    np.testing.assert_array_equal(inverse, [0, 0, 0])
    np.testing.assert_array_equal(counts, [3])


# --- NonMaxSuppression -----------------------------------------------------------------


def _nms(boxes: np.ndarray, scores: np.ndarray, max_boxes: int | None = None,
         iou: float | None = None, score: float | None = None,
         center_point_box: int = 0) -> np.ndarray:
    """Host and onnxruntime NMS on the same inputs; returns the (agreeing) indices."""
    inputs = [boxes, scores,
              None if max_boxes is None else np.array([max_boxes], np.int64),
              None if iou is None else np.array([iou], np.float32),
              None if score is None else np.array([score], np.float32)]
    attrs = {"center_point_box": center_point_box} if center_point_box else {}
    (out,) = check("NonMaxSuppression", inputs, NMS_INPUTS, **attrs)
    return out


def _float64_iou(box1: np.ndarray, box2: np.ndarray) -> float:
    """IoU of two corner boxes in float64, to put a threshold where float32 rounding decides."""
    lo1, hi1 = np.minimum(box1[:2], box1[2:]), np.maximum(box1[:2], box1[2:])
    lo2, hi2 = np.minimum(box2[:2], box2[2:]), np.maximum(box2[:2], box2[2:])
    inter = np.prod(np.clip(np.minimum(hi1, hi2) - np.maximum(lo1, lo2), 0, None))
    union = np.prod(hi1 - lo1) + np.prod(hi2 - lo2) - inter
    return float(inter / union) if union > 0 else 0.0


@settings(max_examples=40, deadline=None)
@given(batches=st.integers(1, 2), classes=st.integers(1, 3), n=st.integers(0, 40),
       center_point_box=st.sampled_from([0, 1]), grid=st.booleans(), nan=st.booleans(),
       data=st.data(), seed=st.integers(0, 2**16))
def test_nms_matches_onnxruntime(batches: int, classes: int, n: int, center_point_box: int,
                                 grid: bool, nan: bool, data: st.DataObject, seed: int) -> None:
    """Boxes on a coarse grid (exact overlaps, IoU landing on the threshold, tied scores)
    or anywhere, corners in either order, some coordinates NaN, every threshold absent
    or present, the IoU threshold also set to one pair's exact IoU."""
    rng = np.random.default_rng(seed)
    if grid:
        boxes = (rng.integers(0, 8, (batches, n, 4)) / 4).astype(np.float32)
        scores = rng.integers(0, 4, (batches, classes, n)).astype(np.float32) / 4
    else:
        boxes = rng.uniform(-1, 5, (batches, n, 4)).astype(np.float32)
        scores = rng.random((batches, classes, n)).astype(np.float32)
    if center_point_box:
        boxes[..., 2:] = np.abs(boxes[..., 2:])
    pair_iou = _float64_iou(boxes[0, 0], boxes[0, 1]) if n >= 2 and not center_point_box else 0.5
    if nan:
        boxes[rng.random(boxes.shape) < 0.05] = np.nan
    max_boxes = data.draw(st.none() | st.integers(-1, n + 2))
    iou = data.draw(st.none() | st.sampled_from([0.0, 0.25, 0.5, 1 / 3, 1.0, pair_iou])
                    | st.floats(0, 1, width=32))
    score = data.draw(st.none() | st.sampled_from([0.0, 0.25, 0.5]) | st.floats(-1, 1, width=32))
    if score is not None and iou is None:
        iou = 0.5  # score_threshold is the fifth input: the fourth must be given
    if iou is not None and max_boxes is None:
        max_boxes = n
    _nms(boxes, scores, max_boxes, iou, score, center_point_box)


def test_nms_thousands_of_boxes_match_onnxruntime() -> None:
    """A detector's workload: 2,000 boxes, two classes, all kept up to the limit."""
    rng = np.random.default_rng(7)
    xy = rng.uniform(0, 600, (1, 2000, 2)).astype(np.float32)
    wh = rng.uniform(5, 80, (1, 2000, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + wh], axis=2)[..., [1, 0, 3, 2]]
    scores = rng.random((1, 2, 2000)).astype(np.float32)
    out = _nms(boxes, scores, 2000, 0.45, 0.05)
    assert 100 < len(out) < 4000


@settings(max_examples=15, deadline=None)
@given(n=st.integers(257, 700), grid=st.booleans(), nan=st.booleans(), seed=st.integers(0, 2**16),
       iou=st.sampled_from([0.0, 0.3, 0.5, 1.0]), dense=st.booleans())
def test_nms_over_many_boxes_matches_onnxruntime(n: int, grid: bool, nan: bool, seed: int,
                                                 iou: float, dense: bool) -> None:
    """Past one block of candidates NMS looks only at overlapping pairs (a sweep along x,
    checked a chunk at a time), or, when too many pairs overlap, goes blocked: both against onnxruntime, with exact
    overlaps and tied scores on a grid, and NaN coordinates."""
    rng = np.random.default_rng(seed)
    if grid:
        corner = (rng.integers(0, 40, (1, n, 2)) / 4).astype(np.float32)
        boxes = np.concatenate([corner, corner + (rng.integers(1, 8, (1, n, 2)) / 4).astype(np.float32)], axis=2)
        scores = (rng.integers(0, 8, (1, 2, n)) / 8).astype(np.float32)
    else:
        corner = rng.uniform(0, 100, (1, n, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + rng.uniform(0, 15, (1, n, 2)).astype(np.float32)], axis=2)
        scores = rng.random((1, 2, n)).astype(np.float32)
    if nan:
        boxes[rng.random(boxes.shape) < 0.02] = np.nan
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(host_ops, "_NMS_PAIR_CHUNK", 97)  # many chunks of pairs
        if dense:
            patch.setattr(host_ops, "_NMS_MAX_PAIRS", 0)
        _nms(boxes, scores, n, iou, 0.05)


def test_nms_with_torchvision_class_offsets_matches_onnxruntime() -> None:
    """torchvision's batched NMS: one class, each box shifted by its label times the
    largest coordinate, so boxes of different labels never overlap (27,000 boxes)."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(90), 300)
    corner = rng.uniform(0, 300, (labels.size, 2)).astype(np.float32)
    boxes = np.concatenate([corner, corner + rng.uniform(2, 40, (labels.size, 2)).astype(np.float32)], axis=1)
    boxes = (boxes + (labels * np.float32(341.0))[:, None]).astype(np.float32)[None]
    scores = rng.random((1, 1, labels.size)).astype(np.float32)
    out = _nms(boxes, scores, labels.size, 0.55, 0.001)
    assert len(out) > 10_000


@pytest.mark.parametrize("limit", [1, 255, 256, 257, 600, 1000])
def test_nms_limit_across_blocks_matches_onnxruntime(limit: int) -> None:
    """Candidates are resolved 256 at a time: the limit may fall inside or between blocks."""
    rng = np.random.default_rng(limit)
    corner = rng.uniform(0, 300, (1, 1000, 2)).astype(np.float32)
    boxes = np.concatenate([corner, corner + rng.uniform(1, 20, (1, 1000, 2))], axis=2)
    scores = rng.integers(0, 50, (1, 1, 1000)).astype(np.float32)
    out = _nms(boxes.astype(np.float32), scores, limit, 0.3)
    assert len(out) == min(limit, len(_nms(boxes.astype(np.float32), scores, 1000, 0.3)))


# Three clusters along y; in each a box with the top score and a near copy.
SPEC_BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
                        [0.0, 10.0, 1.0, 11.0], [0.0, 10.1, 1.0, 11.1],
                        [0.0, 100.0, 1.0, 101.0]]], np.float32)
SPEC_SCORES = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)


def test_nms_spec_example() -> None:
    """ONNX's own test: the top box of each cluster survives."""
    out = _nms(SPEC_BOXES, SPEC_SCORES, 3, 0.5, 0.0)
    np.testing.assert_array_equal(out, [[0, 0, 3], [0, 0, 0], [0, 0, 5]])


def test_nms_center_point_encoding() -> None:
    """The same boxes as (x_center, y_center, width, height) select the same indices."""
    y1, x1, y2, x2 = np.moveaxis(SPEC_BOXES, 2, 0)
    centre = np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], axis=2)
    out = _nms(centre.astype(np.float32), SPEC_SCORES, 3, 0.5, 0.0, center_point_box=1)
    np.testing.assert_array_equal(out, [[0, 0, 3], [0, 0, 0], [0, 0, 5]])


def test_nms_flipped_corners() -> None:
    """(y2, x2, y1, x1) boxes are the same boxes."""
    out = _nms(SPEC_BOXES[..., [2, 3, 0, 1]].copy(), SPEC_SCORES, 3, 0.5, 0.0)
    np.testing.assert_array_equal(out, [[0, 0, 3], [0, 0, 0], [0, 0, 5]])


@pytest.mark.parametrize("max_boxes", [None, 0, -2])
def test_nms_no_limit_selects_nothing(max_boxes: int | None) -> None:
    """max_output_boxes_per_class absent, 0 or negative: no boxes at all."""
    out = _nms(SPEC_BOXES, SPEC_SCORES, max_boxes)
    assert out.shape == (0, 3) and out.dtype == np.int64


def test_nms_every_box_but_the_best_suppressed() -> None:
    boxes = np.tile(np.array([0, 0, 2, 2], np.float32), (2, 5, 1))
    scores = np.array([[[0.1, 0.5, 0.3, 0.9, 0.2]], [[0.4, 0.4, 0.8, 0.1, 0.8]]], np.float32)
    out = _nms(boxes, scores, 10, 0.5)
    np.testing.assert_array_equal(out, [[0, 0, 3], [1, 0, 2]])


def test_nms_ties_come_by_box_index() -> None:
    """Disjoint boxes with equal scores: the lower box index first."""
    boxes = np.zeros((1, 6, 4), np.float32)
    boxes[0, :, 1], boxes[0, :, 2] = np.arange(6) * 10, 1
    boxes[0, :, 3] = boxes[0, :, 1] + 1
    scores = np.array([[[0.5, 0.7, 0.5, 0.7, 0.5, 0.1], [1, 1, 1, 1, 1, 1]]], np.float32)
    out = _nms(boxes, scores, 10)
    np.testing.assert_array_equal(out[:, 2], [1, 3, 0, 2, 4, 5, 0, 1, 2, 3, 4, 5])


def test_nms_score_equal_to_threshold_is_dropped() -> None:
    out = _nms(SPEC_BOXES, SPEC_SCORES, 6, 1.0, 0.6)
    np.testing.assert_array_equal(out[:, 2], [3, 0, 1])
    assert _nms(SPEC_BOXES, SPEC_SCORES, 6, 0.5, 0.95).shape == (0, 3)


def test_nms_iou_equal_to_threshold_is_kept() -> None:
    """Two unit boxes sharing half of each: IoU exactly 1/3."""
    boxes = np.array([[[0, 0, 1, 1], [0, 0.5, 1, 1.5]]], np.float32)
    scores = np.array([[[0.9, 0.8]]], np.float32)
    assert len(_nms(boxes, scores, 2, 1 / 3)) == 2
    assert len(_nms(boxes, scores, 2, 0.3)) == 1


def test_nms_iou_rounds_as_onnxruntime_does() -> None:
    """A threshold between two roundings of one IoU: onnxruntime's (a1 + a2) - inter gives
    0.12398359 and suppresses; a1 + (a2 - inter) would give 0.123983584 and keep."""
    boxes = np.array([[[139.42857360839844, 19.14285659790039, 224.64285278320312,
                        58.07143020629883],
                       [129.0, 29.0, 186.78570556640625, 37.92856979370117]]], np.float32)
    scores = np.array([[[0.9, 0.8]]], np.float32)
    np.testing.assert_array_equal(_nms(boxes, scores, 2, 0.12398358434438705), [[0, 0, 0]])


def test_nms_without_boxes() -> None:
    out = _nms(np.zeros((2, 0, 4), np.float32), np.zeros((2, 3, 0), np.float32), 5)
    assert out.shape == (0, 3)


# --- errors ----------------------------------------------------------------------------


BOXES = np.zeros((1, 3, 4), np.float32)
SCORES = np.zeros((1, 2, 3), np.float32)


@pytest.mark.parametrize(("op", "attrs", "inputs", "message"), [
    ("NonMaxSuppression", {}, [BOXES, np.zeros((1, 2, 4), np.float32)],
     r"scores of shape \[1, 2, 4\] do not match boxes of shape \[1, 3, 4\]"),
    ("NonMaxSuppression", {}, [BOXES[0], SCORES], r"'boxes' must be \[batches, boxes, 4\]"),
    ("NonMaxSuppression", {}, [BOXES, SCORES[0]], r"'scores' must be \[batches, classes, boxes\]"),
    ("NonMaxSuppression", {}, [BOXES.astype(np.float64), SCORES], "'boxes' must be float32"),
    ("NonMaxSuppression", {}, [BOXES, SCORES, np.array([1], np.int64),
                               np.array([1.5], np.float32)], r"'iou_threshold' must be in \[0, 1\]"),
    ("NonMaxSuppression", {}, [BOXES, SCORES, np.array([1, 2], np.int64)], "must hold one value"),
    ("NonMaxSuppression", {"center_point_box": 2}, [BOXES, SCORES], "must be 0 or 1"),
    ("NonMaxSuppression", {}, [BOXES], "'scores' is missing"),
    ("Compress", {"axis": 2}, [np.zeros((2, 3)), np.array([True])],
     r"axis 2 is out of range .* rank 2; use one in \[-2, 1\]"),
    ("Compress", {}, [np.zeros((2, 3)), np.array([[True]])], "'condition' must be 1-D"),
    ("Compress", {}, [np.zeros((2, 3)), np.array([1])], "'condition' must be bool"),
    ("Compress", {}, [np.array(1.0), np.array([True])], "rank >= 1"),
    ("Unique", {"axis": -3}, [np.zeros((2, 3))], "axis -3 is out of range"),
    ("Unique", {"sorted": 2}, [np.zeros(3)], "'sorted' must be 0 or 1"),
    ("Unique", {"axes": 0}, [np.zeros(3)], "unknown attribute 'axes'.*did you mean 'axis'"),
    ("Unique", {"axis": "0"}, [np.zeros(3)], "'axis' must be an integer"),
    ("NonZero", {}, [np.zeros(3), np.zeros(3)], "at most 1 inputs"),
])
def test_bad_input_names_the_node(op: str, attrs: dict[str, Any], inputs: list[np.ndarray],
                                  message: str) -> None:
    with pytest.raises(InputError, match=rf"^node 7 \({op}\): .*{message}"):
        run_host_op(op, attrs, inputs, "node 7")


def test_unknown_op_is_unsupported() -> None:
    with pytest.raises(UnsupportedOpError, match=r"node 7: op 'Uniq' has no host kernel "
                                                 r"\(did you mean 'Unique'\?\)"):
        run_host_op("Uniq", {}, [np.zeros(3)], "node 7")


def test_registry_lists_the_four_ops() -> None:
    assert set(HOST_OPS) == {"NonZero", "Compress", "Unique", "NonMaxSuppression"}
