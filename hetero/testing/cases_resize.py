"""Case generators of Resize: every mode, coordinate transform and nearest rounding.

Each case resizes one to three axes of a small tensor, to sizes given directly or
through scales (the output then floor(scale * size), as ONNX computes it), so both
of the op's scale conventions are met. Nearest moves values and must be exact for
every dtype; linear and cubic (floats only, with and without antialias) are sums of
one weighted term per combination of taps, with cubic's weights up to 1.5 in
magnitude per axis.
"""

from __future__ import annotations

import math

import numpy as np

from hetero.core.ir.ops.resize import TRANSFORMS, tap_count
from hetero.testing.cases_base import (
    ALL,
    EXACT,
    Draw,
    Operand,
    Spec,
    generates,
    peak,
    shape,
    summed,
    values,
)

_SCALES = (0.4, 0.5, 0.6, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0)


@generates(("Resize",), ALL)
def _resize(op: str, d: Draw, dtype: np.dtype) -> Spec:
    x = values(d, shape(d, 1, 4, dim_hi=5), dtype)
    rank = x.ndim
    mode = "nearest" if dtype.kind != "f" else d.pick(("nearest", "linear", "cubic"))
    transform = d.pick(TRANSFORMS)
    axes = sorted(d.rng.permutation(rank)[: d.integer(1, min(rank, 3))].tolist())
    sizes, scales = list(x.shape), [1.0] * rank
    by_scale = d.pick((False, True))
    for a in axes:
        n = x.shape[a]
        if by_scale:
            scale = d.pick(tuple(s for s in _SCALES if math.floor(s * n) >= 1))
            sizes[a], scales[a] = math.floor(scale * n), scale
        else:
            sizes[a] = d.integer(1, 7)
            scales[a] = sizes[a] / n
    attrs: dict = {"sizes": tuple(sizes), "scales": tuple(scales), "mode": mode,
                   "coordinate_transformation_mode": transform}
    if mode == "nearest":
        attrs["nearest_mode"] = d.pick(("round_prefer_floor", "round_prefer_ceil", "floor",
                                        "ceil", "simple"))
    if mode == "cubic":
        attrs["cubic_coeff_a"] = d.pick((-0.75, -0.5))
        attrs["exclude_outside"] = d.pick((0, 1))
    if mode != "nearest":
        attrs["antialias"] = d.pick((0, 1))
    if transform == "tf_crop_and_resize":
        starts = [round(float(d.rng.uniform(-0.2, 0.5)), 3) if a in axes else 0.0 for a in range(rank)]
        ends = [round(float(d.rng.uniform(0.6, 1.2)), 3) if a in axes else 1.0 for a in range(rank)]
        attrs["roi"] = tuple(starts + ends)
        attrs["extrapolation_value"] = d.pick((0.0, -1.5))
    if mode == "nearest":
        tolerance = EXACT
    else:
        terms = math.prod(tap_count({"mode": mode, "antialias": attrs["antialias"]}, scales[a])
                          for a in axes)
        growth = 1.5 ** len(axes) if mode == "cubic" else 1.0
        tolerance = summed(dtype, terms, growth * max(peak(x), 1.5))
    return Spec((Operand("X", x),), attrs, tolerance)
