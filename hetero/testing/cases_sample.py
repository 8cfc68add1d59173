"""Case generators of the sampling ops: GridSample in every mode, padding and alignment;
RoiAlign in both modes and transforms, with fixed and adaptive sample counts;
AffineGrid in 2-D and 3-D.

GridSample samples a small 1-D to 3-D input at a grid that reaches a little beyond
the edges (so every padding mode matters), sometimes at the exact points where
nearest rounds half to even or a tap lands on an edge. Nearest moves values and must
be exact for every dtype; linear and cubic (floats only) are sums of ``taps ** r``
weighted terms, cubic's weights up to 1.5 in magnitude per axis.

RoiAlign's rois (run-time inputs) reach a little beyond the image, some as large as
it, a few malformed (ends before starts); its average is a sum of four weighted
corners per sample, its maximum one weighted corner. Sometimes a batch index is out
of range at run time, which a backend must refuse as the reference does.

AffineGrid's entries are sums of r + 1 products of theta with coordinates of at most 1.
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.ops.sample import PADDING_MODES, TAPS, accumulator, roi_geometry
from hetero.core.ir.types import FLOAT_DTYPES
from hetero.errors import InputError
from hetero.testing.cases_base import (
    ALL,
    EXACT,
    FLOATS,
    Draw,
    Operand,
    Spec,
    generates,
    peak,
    summed,
    uniform,
    values,
)


def _grid(d: Draw, n: int, spatial: tuple[int, ...], out: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Normalised points a little beyond [-1, 1]; sometimes on the half-pixel lattice,
    where rounding ties and taps on the edges happen."""
    r = len(spatial)
    grid = uniform(d, (n,) + out + (r,), np.float64, -1.25, 1.25)
    if d.pick((False, True)):
        # Multiples of 1 / (2 * size) are pixel centres and edges under both alignments.
        size = np.array(spatial[::-1], np.float64)
        grid = np.round(grid * 2 * size) / (2 * size)
    return grid.astype(dtype)


#: The floats beyond the suite's usual ones that these ops take.
_MORE_FLOATS = ("float64", "bfloat16")


def _data(d: Draw, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """:func:`values`, with bfloat16 drawn as the floats it is (in [-4, 4])."""
    return uniform(d, shape, dtype, -4.0, 4.0) if dtype in FLOAT_DTYPES else values(d, shape, dtype)


@generates(("GridSample",), ALL + _MORE_FLOATS)
def _grid_sample(op: str, d: Draw, dtype: np.dtype) -> Spec:
    r = d.integer(1, 3)
    n, c = d.integer(1, 2), d.integer(1, 3)
    spatial = tuple(d.integer(1, 4 if r < 3 else 3) for _ in range(r))
    out = tuple(d.integer(1, 4 if r < 3 else 2) for _ in range(r))
    x = _data(d, (n, c) + spatial, dtype)
    grid = _grid(d, n, spatial, out, np.dtype(d.pick(("float32", "float32", "float16", "float64"))))
    mode = "nearest" if dtype not in FLOAT_DTYPES else d.pick(("linear", "nearest", "cubic"))
    attrs = {"mode": mode, "padding_mode": d.pick(PADDING_MODES), "align_corners": d.pick((0, 1))}
    if mode == "nearest":
        tolerance = EXACT
    else:
        growth = 1.5 ** r if mode == "cubic" else 1.0
        tolerance = summed(dtype, TAPS[mode] ** r, growth * max(peak(x), 1.0))
    return Spec((Operand("X", x), Operand("grid", grid)), attrs, tolerance)


@generates(("RoiAlign",), FLOATS + _MORE_FLOATS)
def _roi_align(op: str, d: Draw, dtype: np.dtype) -> Spec:
    n, c = d.integer(1, 2), d.integer(1, 3)
    h, w = d.integer(1, 6), d.integer(1, 6)
    x = _data(d, (n, c, h, w), dtype)
    count = d.integer(1, 3)
    scale = d.pick((1.0, 0.5, 0.25))
    corners = d.rng.uniform(-2.0, np.array([w, h, w, h]) / scale + 2.0, (count, 4))
    if d.pick((True, True, False)):  # well formed: starts before ends
        corners = np.concatenate([np.minimum(corners[:, :2], corners[:, 2:]),
                                  np.maximum(corners[:, :2], corners[:, 2:])], axis=1)
    rois = corners.astype(dtype)
    batch = d.rng.integers(0, n, count).astype(np.int64)
    attrs = {"mode": d.pick(("avg", "max")), "output_height": d.integer(1, 3),
             "output_width": d.integer(1, 3), "sampling_ratio": d.pick((0, 0, 1, 2)),
             "spatial_scale": scale, "half_pixel": d.pick((0, 1))}
    operands = (Operand("X", x), Operand("rois", rois), Operand("batch_indices", batch))
    if d.edge():
        batch[int(d.rng.integers(count))] = d.pick((n, -1))
        return Spec(operands, attrs, EXACT, error=InputError)
    samples = max(max(g, 0) for r in rois for g in roi_geometry(r, attrs, accumulator(dtype))[2])
    magnitude = max(peak(x), 1.0)
    if attrs["mode"] == "max":
        tolerance = summed(dtype, 4, magnitude)
    else:
        tolerance = summed(dtype, 4 * max(samples, 1) ** 2, magnitude)
    return Spec(operands, attrs, tolerance)


@generates(("AffineGrid",), FLOATS + _MORE_FLOATS)
def _affine_grid(op: str, d: Draw, dtype: np.dtype) -> Spec:
    r = d.integer(2, 3)
    n = d.integer(1, 2)
    size = (n, d.integer(1, 3)) + tuple(d.integer(1, 5 if r == 2 else 3) for _ in range(r))
    theta = _data(d, (n, r, r + 1), dtype)
    attrs = {"size": size, "align_corners": d.pick((0, 1))}
    return Spec((Operand("theta", theta),), attrs, summed(dtype, r + 1, (r + 1) * max(peak(theta), 1.0)))
