"""NaN through llvm_cpu's compiled max/min family, against the reference and onnxruntime.

The reference (numpy) propagates NaN, as the ONNX reference implementation does
(``np.maximum.reduce`` for ReduceMax). onnxruntime (1.32) agrees for elementwise Max
and Min; its MaxPool, GlobalMaxPool and ReduceMax kernels drop a NaN or keep it
depending on where it falls (the outcome of ``maxps`` operand order), so those are
checked against the reference only. The compiled kernels must still vectorise: the NaN rule
is rendered with ``llvm.maximum``/``llvm.minimum``, whose reductions LLVM widens.
"""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
from oracle import run_node
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.lower import lower_node
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind
from hetero.plugins.llvm_cpu.kernel import CompiledKernel
from hetero.plugins.llvm_cpu.schedules import default_schedule

NAN = np.float32("nan")
RNG = np.random.default_rng(5)


def _with_nan(shape: tuple[int, ...], positions: list[tuple[int, ...]], dtype: Any = np.float32) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(dtype)
    for p in positions:
        x[p] = np.nan
    return x


def _one_node(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> Graph:
    gb = GraphBuilder(op.lower())
    gb.output(gb.op(op, *(gb.input(k, a.shape, a.dtype) for k, a in inputs.items()), **attrs))
    return gb.build()


def _compiled_and_reference(graph: Graph, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    got = bind(get_backend("llvm_cpu"), {"num_threads": 2}).compile(graph).run(inputs)
    want = run_reference(graph, inputs)
    name = graph.outputs[0].name
    return got[name], want[name]


def assert_same(actual: np.ndarray, expected: np.ndarray, rtol: float = 0.0) -> None:
    """Equal dtype, shape and NaN positions (and the case has a NaN); the other values
    equal, or within ``rtol`` for ops whose FMAs round once where numpy rounds twice."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert np.isnan(expected).any(), "the case must produce a NaN to test anything"
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=0.0)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_max_min_propagate_nan_as_the_reference_and_onnxruntime(op: str, dtype: Any) -> None:
    # 40 elements: the vector body and its scalar remainder both meet NaN on each side.
    a = _with_nan((40,), [(0,), (17,), (38,)], dtype)
    b = _with_nan((40,), [(3,), (17,), (33,)], dtype)
    got, want = _compiled_and_reference(_one_node(op, {"a": a, "b": b}), {"a": a, "b": b})
    assert_same(got, want)
    assert_same(got, run_node(op, {"a": a, "b": b})[0])


@pytest.mark.parametrize(("op", "attrs"), [
    ("Relu", {}), ("Clip", {"min": 0.0, "max": 6.0}), ("HardSigmoid", {}), ("LeakyRelu", {}),
])
def test_activations_keep_nan(op: str, attrs: dict[str, Any]) -> None:
    x = _with_nan((3, 20), [(0, 1), (2, 19)])
    got, want = _compiled_and_reference(_one_node(op, {"x": x}, **attrs), {"x": x})
    assert_same(got, want, rtol=4 * float(np.finfo(np.float32).eps))


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": (2, 2), "strides": (2, 2)},
    {"kernel_shape": (3, 3), "strides": (2, 2), "pads": (1, 1, 1, 1)},
    {"kernel_shape": (3, 3)},
])
def test_max_pool_window_with_a_nan_is_nan(attrs: dict[str, Any]) -> None:
    # Wide enough rows for the windowed schedule's vector lanes.
    x = _with_nan((1, 4, 12, 40), [(0, 0, 0, 0), (0, 1, 5, 17), (0, 3, 11, 39)])
    got, want = _compiled_and_reference(_one_node("MaxPool", {"x": x}, **attrs), {"x": x})
    assert_same(got, want)


def test_global_max_pool_is_nan_where_a_channel_holds_one() -> None:
    x = _with_nan((2, 8, 7, 7), [(0, 1, 6, 6), (1, 5, 0, 0), (1, 7, 3, 2)])
    got, want = _compiled_and_reference(_one_node("GlobalMaxPool", {"x": x}), {"x": x})
    assert_same(got, want)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize(("axes", "keepdims"), [((1,), 0), ((0,), 1), ((0, 1), 0)])
def test_reductions_are_nan_where_the_slice_holds_one(op: str, axes: tuple[int, ...], keepdims: int) -> None:
    x = _with_nan((9, 70), [(0, 0), (4, 69), (8, 33)])
    got, want = _compiled_and_reference(_one_node(op, {"x": x}, axes=axes, keepdims=keepdims), {"x": x})
    assert_same(got, want)


def test_softmax_of_a_row_with_nan_is_nan_there() -> None:
    x = _with_nan((4, 33), [(1, 32)])
    got, want = _compiled_and_reference(_one_node("Softmax", {"x": x}, axis=-1), {"x": x})
    assert_same(got, want, rtol=16 * float(np.finfo(np.float32).eps))


def test_fused_pool_epilogue_keeps_nan() -> None:
    x = _with_nan((1, 4, 8, 16), [(0, 2, 3, 3)])
    gb = GraphBuilder("pool_relu")
    gb.output(gb.Relu(gb.MaxPool(gb.input("x", x.shape), kernel_shape=(2, 2), strides=(2, 2))))
    got, want = _compiled_and_reference(gb.build(), {"x": x})
    assert_same(got, want)


def test_max_min_render_as_nan_propagating_intrinsics_and_reductions_vectorise() -> None:
    """A contiguous max reduction becomes a vector ``llvm.maximum`` (``maxnum`` would drop NaN)."""
    node = _one_node("ReduceMax", {"x": np.zeros((64, 1024), np.float32)}, axes=(1,), keepdims=0).nodes[0]
    ir = CompiledKernel(default_schedule(lower_node(node), 1).func, 1).llvm_ir
    assert "maxnum" not in ir
    if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64"):
        assert "llvm.vector.reduce.fmaximum" in ir or "@llvm.maximum.v" in ir, "the reduction stayed scalar"
