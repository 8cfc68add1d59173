"""LpPool and GlobalLpPool imported from ONNX and run on llvm_cpu against onnxruntime:
padding (which adds 0 to the sum, not a mean rescaled by the kernel size as onnx's
reference computes), ceil mode and dilations (opset 18), auto_pad, orders 1 to 3."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hetero.onnx_backend import HeteroBackend
from oracle import node_model, run_model

RNG = np.random.default_rng(5)
X = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)


def run_both(op: str, x: np.ndarray, opset: int, **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    model = node_model(op, {"x": x}, opset=opset, **attrs)
    want = run_model(model, {"x": x})[0]
    got = HeteroBackend.prepare(model, device="CPU").run([x])[0]
    return got, want


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2]},
    {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]},
    {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"},
])
def test_lp_pool_matches_onnxruntime(p: int, attrs: dict[str, Any]) -> None:
    got, want = run_both("LpPool", X, 11, p=p, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "dilations": [2, 1]},
    {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
])
def test_lp_pool_opset_18_dilations_and_ceil_mode(attrs: dict[str, Any]) -> None:
    got, want = run_both("LpPool", X, 18, p=2, **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool_matches_onnxruntime(p: int) -> None:
    got, want = run_both("GlobalLpPool", X, 13, p=p)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
