"""GridSample's and RoiAlign's references against onnx's reference implementation and
onnxruntime: every GridSample mode, padding and alignment in 1 to 3 spatial axes, rounding
ties, points far outside; opset 16's mode names through the importer; inference errors;
RoiAlign's modes and transforms on well formed and malformed rois, and its batch indices;
AffineGrid in 2-D and 3-D with size-1 axes, through the importer."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from onnx.reference import ReferenceEvaluator
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder, get_op
from hetero.errors import InputError, ShapeError
from oracle import node_model, run_model


def _ours(x: np.ndarray, grid: np.ndarray, **attrs: Any) -> np.ndarray:
    op = get_op("GridSample")
    return op.reference([x, grid], op.normalize_attrs(attrs, "test"))[0]


def _onnx(x: np.ndarray, grid: np.ndarray, opset: int = 20, **attrs: Any) -> np.ndarray:
    return ReferenceEvaluator(node_model("GridSample", {"X": x, "grid": grid}, opset=opset,
                                         **attrs)).run(None, {"X": x, "grid": grid})[0]


def _case(seed: int, r: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    spatial = tuple(int(v) for v in rng.integers(2, 5, r))
    out = tuple(int(v) for v in rng.integers(1, 4, r))
    x = rng.standard_normal((2, 3) + spatial).astype(np.float32)
    grid = rng.uniform(-3.0, 3.0, (2,) + out + (r,)).astype(np.float32)
    return x, grid


SETTINGS = [(m, p, a, r) for m, p, a, r in itertools.product(
    ("linear", "nearest", "cubic"), ("zeros", "border", "reflection"), (0, 1), (1, 2, 3))
    if not (m == "cubic" and p == "border")]


@pytest.mark.parametrize("mode,padding,align,r", SETTINGS)
def test_reference_matches_onnx(mode: str, padding: str, align: int, r: int) -> None:
    x, grid = _case(r * 7 + align, r)
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    np.testing.assert_allclose(_ours(x, grid, **attrs), _onnx(x, grid, **attrs),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("align", [0, 1])
def test_cubic_border_clamps_the_taps_as_onnxruntime_and_pytorch_do(align: int) -> None:
    # onnx's reference clamps the coordinate first, which onnxruntime (like PyTorch) does
    # not: the points just outside the edges differ, and hetero takes onnxruntime's.
    x, grid = _case(3, 2)
    attrs = {"mode": "cubic", "padding_mode": "border", "align_corners": align}
    want = run_model(node_model("GridSample", {"X": x, "grid": grid}, opset=20, **attrs),
                     {"X": x, "grid": grid})[0]
    np.testing.assert_allclose(_ours(x, grid, **attrs), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_nearest_rounds_half_to_even(padding: str, align: int) -> None:
    x = np.arange(2 * 5, dtype=np.float32).reshape(1, 1, 2, 5)
    # Every multiple of a half pixel from beyond one edge to beyond the other.
    size = 5 if not align else 4
    g = np.arange(-size - 3, size + 4, dtype=np.float32) / size
    grid = np.stack([g, np.zeros_like(g)], axis=-1)[None, None]
    attrs = {"mode": "nearest", "padding_mode": padding, "align_corners": align}
    np.testing.assert_array_equal(_ours(x, grid, **attrs), _onnx(x, grid, **attrs))


def test_nan_in_the_grid_reads_as_a_point_far_below_the_axis() -> None:
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 1, 4)
    grid = np.array([[[[np.nan, 0.0]]]], np.float32)
    assert _ours(x, grid).item() == 0.0
    assert _ours(x, grid, padding_mode="border").item() == 1.0


def test_opset_16_modes_import_as_the_new_names() -> None:
    x, grid = _case(5, 2)
    for old, new in (("bilinear", "linear"), ("bicubic", "cubic"), ("nearest", "nearest")):
        graph = hetero.load_onnx(node_model("GridSample", {"X": x, "grid": grid}, opset=16,
                                            mode=old))
        assert graph.nodes[0].attrs["mode"] == new
        got = next(iter(run_reference(graph, {"X": x, "grid": grid}).values()))
        np.testing.assert_allclose(got, _onnx(x, grid, mode=new), rtol=1e-5, atol=1e-5)


def test_inference_checks_the_grid() -> None:
    b = GraphBuilder("g")
    x = b.input("X", (1, 2, 3, 4), np.float32)
    with pytest.raises(ShapeError, match="grid must be"):
        b.GridSample(x, b.input("g", (1, 5, 5, 3), np.float32))
    with pytest.raises(ShapeError, match="interpolates floats"):
        b.GridSample(b.input("i", (1, 2, 3, 4), np.int32), b.input("h", (1, 5, 5, 2), np.float32))


def _roi_case(seed: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    n, c, h, w = 2, 2, int(rng.integers(2, 8)), int(rng.integers(2, 8))
    scale = float(rng.choice([1.0, 0.5]))
    corners = rng.uniform(-3, max(h, w) / scale + 3, (3, 4))
    if seed % 3:  # well formed
        corners = np.concatenate([np.minimum(corners[:, :2], corners[:, 2:]),
                                  np.maximum(corners[:, :2], corners[:, 2:])], axis=1)
    feeds = {"X": rng.standard_normal((n, c, h, w)).astype(np.float32),
             "rois": corners.astype(np.float32),
             "batch_indices": rng.integers(0, n, 3).astype(np.int64)}
    attrs = {"output_height": int(rng.integers(1, 4)), "output_width": int(rng.integers(1, 4)),
             "sampling_ratio": int(rng.choice([0, 0, 1, 2])), "spatial_scale": scale}
    return feeds, attrs


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_matches_onnx_and_onnxruntime(seed: int, mode: str, transform: str) -> None:
    feeds, attrs = _roi_case(seed)
    model = node_model("RoiAlign", feeds, opset=16, mode=mode,
                       coordinate_transformation_mode=transform, **attrs)
    op = get_op("RoiAlign")
    ours = op.reference(list(feeds.values()), op.normalize_attrs(
        {**attrs, "mode": mode, "half_pixel": int(transform == "half_pixel")}, "test"))[0]
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)
    if seed % 3:  # onnxruntime refuses a malformed roi's negative sample count
        np.testing.assert_allclose(ours, run_model(model, feeds)[0], rtol=1e-5, atol=1e-5)
    graph = hetero.load_onnx(model)
    got = next(iter(run_reference(graph, feeds).values()))
    np.testing.assert_array_equal(got, ours)


@pytest.mark.parametrize("opset", [10, 13, 16])  # onnxruntime has no RoiAlign-22 kernel
def test_roi_align_without_its_transform_takes_its_opsets_meaning(opset: int) -> None:
    # Unset: output_half_pixel before opset 16 (RoiAlign-10 had no attribute), half_pixel
    # after. onnxruntime is the oracle: onnx's reference reads every opset as 16.
    feeds, attrs = _roi_case(1)
    model = node_model("RoiAlign", feeds, opset=opset, **attrs)
    want = run_model(model, feeds)[0]
    got = next(iter(run_reference(hetero.load_onnx(model), feeds).values()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_roi_align_batch_index_out_of_range_is_an_error() -> None:
    feeds, attrs = _roi_case(1)
    feeds["batch_indices"][1] = 2
    op = get_op("RoiAlign")
    with pytest.raises(InputError, match="out of range"):
        op.reference(list(feeds.values()), op.normalize_attrs(attrs, "test"))


@pytest.mark.filterwarnings("ignore:divide by zero")  # onnx's reference, at a size-1 axis
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [(2, 3, 5, 6), (1, 1, 1, 4), (2, 2, 3, 1, 4), (1, 3, 1, 2, 1)])
def test_affine_grid_matches_onnx_and_onnxruntime(size: tuple[int, ...], align: int) -> None:
    r = len(size) - 2
    theta = np.random.default_rng(len(size) + align).standard_normal((size[0], r, r + 1)).astype(np.float32)
    feeds = {"theta": theta, "size": np.array(size, np.int64)}
    model = node_model("AffineGrid", feeds, opset=20, constant_inputs=("size",), align_corners=align)
    graph = hetero.load_onnx(model)
    assert graph.nodes[0].attrs["size"] == size
    ours = next(iter(run_reference(graph, {"theta": theta}).values()))
    want = ReferenceEvaluator(model).run(None, {"theta": theta})[0]
    np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-6)
    # A size-1 axis under align_corners: onnx's reference and PyTorch put it at -1,
    # onnxruntime elsewhere.
    if min(size[2:]) > 1 or not align:
        np.testing.assert_allclose(ours, run_model(model, {"theta": theta})[0], rtol=1e-5, atol=1e-5)
