"""Resize's lowering against its reference on the tensor-IR interpreter, and the
reference against onnx's: the cases where a float's last bit decides an index."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from lowercheck import lowered_and_reference

from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder

X = np.arange(2 * 5 * 6, dtype=np.float32).reshape(2, 5, 6) / 7 - 2


def _attrs(x: np.ndarray, sizes: tuple[int, ...], **attrs: Any) -> dict[str, Any]:
    return {"sizes": sizes, "scales": tuple(o / n for o, n in zip(sizes, x.shape)), **attrs}


CASES = [
    # Output 3 of 6 under half_pixel lands exactly on x.5: each rounding picks its side.
    *[_attrs(X, (2, 5, 3), nearest_mode=m) for m in ("round_prefer_floor", "round_prefer_ceil",
                                                   "floor", "ceil", "simple")],
    _attrs(X, (2, 9, 4), mode="linear", coordinate_transformation_mode="align_corners"),
    _attrs(X, (2, 3, 11), mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    _attrs(X, (2, 1, 1), mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    _attrs(X, (2, 7, 4), mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5),
    _attrs(X, (2, 3, 4), mode="cubic", antialias=1),
    _attrs(X, (2, 2, 3), mode="linear", antialias=1,
           coordinate_transformation_mode="half_pixel_symmetric"),
    _attrs(X, (2, 4, 8), mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
           roi=(0.0, -0.2, 0.1, 1.0, 0.9, 1.3), extrapolation_value=-9.0),
    _attrs(X, (2, 4, 8), coordinate_transformation_mode="tf_crop_and_resize",
           roi=(0.0, -0.2, 0.1, 1.0, 0.9, 1.3), extrapolation_value=-9.0),
]


@pytest.mark.parametrize("attrs", CASES, ids=lambda a: "-".join(
    str(a.get(k, "")) for k in ("mode", "coordinate_transformation_mode", "nearest_mode", "antialias")))
def test_lowering_matches_the_reference(attrs: dict[str, Any]) -> None:
    got, want = lowered_and_reference("Resize", {"X": X}, **attrs)
    if attrs.get("mode", "nearest") == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_integer_linear_rounds_half_to_even_and_saturates() -> None:
    x = np.array([[0, 3, 120, -128]], np.int8)
    attrs = _attrs(x, (1, 7), mode="linear", coordinate_transformation_mode="align_corners")
    got, want = lowered_and_reference("Resize", {"X": x}, **attrs)
    np.testing.assert_array_equal(got, want)
    # 0, 3 at 0.5 -> 1.5 -> 2; 3, 120 at 1/2 -> 61.5 -> 62: half to even, as onnx's reference
    assert want.tolist() == [[0, 2, 3, 62, 120, -4, -128]]


def test_nearest_moves_every_dtype_exactly() -> None:
    x = np.array([[True, False, True]])
    got, want = lowered_and_reference("Resize", {"X": x}, **_attrs(x, (2, 5)))
    np.testing.assert_array_equal(got, want)
    big = np.array([2**62 + 1, -(2**62) - 3], np.int64)
    b = GraphBuilder("r")
    v = b.input("X", big.shape, big.dtype)
    b.output(b.Resize(v, **_attrs(big, (4,))))
    out = next(iter(run_reference(b.build(), {"X": big}).values()))
    assert out.tolist() == [big[0], big[0], big[1], big[1]]  # no float64 round trip
