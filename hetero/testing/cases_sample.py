"""Case generators of the sampling ops: GridSample in every mode, padding and alignment.

GridSample samples a small 1-D to 3-D input at a grid that reaches a little beyond
the edges (so every padding mode matters), sometimes at the exact points where
nearest rounds half to even or a tap lands on an edge. Nearest moves values and must
be exact for every dtype; linear and cubic (floats only) are sums of ``taps ** r``
weighted terms, cubic's weights up to 1.5 in magnitude per axis.
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.ops.sample import PADDING_MODES, TAPS
from hetero.testing.cases_base import (
    ALL,
    EXACT,
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


@generates(("GridSample",), ALL)
def _grid_sample(op: str, d: Draw, dtype: np.dtype) -> Spec:
    r = d.integer(1, 3)
    n, c = d.integer(1, 2), d.integer(1, 3)
    spatial = tuple(d.integer(1, 4 if r < 3 else 3) for _ in range(r))
    out = tuple(d.integer(1, 4 if r < 3 else 2) for _ in range(r))
    x = values(d, (n, c) + spatial, dtype)
    grid = _grid(d, n, spatial, out, np.dtype(d.pick(("float32", "float32", "float16", "float64"))))
    mode = "nearest" if dtype.kind != "f" else d.pick(("linear", "nearest", "cubic"))
    attrs = {"mode": mode, "padding_mode": d.pick(PADDING_MODES), "align_corners": d.pick((0, 1))}
    if mode == "nearest":
        tolerance = EXACT
    else:
        growth = 1.5 ** r if mode == "cubic" else 1.0
        tolerance = summed(dtype, TAPS[mode] ** r, growth * max(peak(x), 1.0))
    return Spec((Operand("X", x), Operand("grid", grid)), attrs, tolerance)
