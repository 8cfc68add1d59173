"""Einsum, rewritten at import into Transpose, Reshape, Gather, ReduceSum, Mul and MatMul,
against numpy's einsum (onnx's reference): the equations exporters write (attention's
``bhqd,bhkd->bhqk``, batched and transposed products, outer products), diagonals and
traces, sums, implicit outputs, ellipses that broadcast, three operands, every dtype
family; run by the reference executor and compiled by llvm_cpu."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
import pytest

import hetero
from hetero.core.frontend.onnx.translate_linalg import parse_einsum
from hetero.errors import ShapeError
from hetero.onnx_backend import HeteroBackend

CASES = [
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]),
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,kj->ik", [(3, 4), (5, 4)]),
    ("ba,ca->bc", [(3, 4), (5, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("ij,ij", [(3, 4), (3, 4)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->j", [(3, 3, 2)]),
    ("bii->bi", [(2, 3, 3)]),
    ("ij->", [(3, 4)]),
    ("ijk->kj", [(2, 3, 4)]),
    ("ij->j", [(3, 4)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("b...,b...->b...", [(2, 3, 4), (2, 3, 4)]),
    ("...b,...b->...", [(2, 3, 4), (2, 3, 4)]),
    ("i...,i...", [(3, 2), (3, 1)]),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
    ("ab,bc,cd", [(2, 3), (3, 4), (4, 2)]),
    ("i,i", [(5,)] * 2),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("ji", [(3, 4)]),
    ("->", [()]),
    (",->", [(), ()]),
    ("i,->i", [(3,), ()]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
]

_DTYPES = {np.float32: onnx.TensorProto.FLOAT, np.float64: onnx.TensorProto.DOUBLE,
           np.int32: onnx.TensorProto.INT32, np.int64: onnx.TensorProto.INT64,
           np.int8: onnx.TensorProto.INT8, np.float16: onnx.TensorProto.FLOAT16}


def _model(equation: str, shapes: list[tuple[int, ...]], dtype: type) -> onnx.ModelProto:
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], name="my_einsum", equation=equation)
    out = list(np.einsum(equation, *[np.zeros(s) for s in shapes]).shape)
    graph = helper.make_graph(
        [node], "einsum",
        [helper.make_tensor_value_info(n, _DTYPES[dtype], list(s)) for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("y", _DTYPES[dtype], out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])


def _inputs(shapes: list[tuple[int, ...]], dtype: type, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]
    return [rng.integers(-3, 4, s).astype(dtype) for s in shapes]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0] for c in CASES])
def test_rewrite_matches_numpy(equation: str, shapes: list[tuple[int, ...]]) -> None:
    """The canonical graph's reference equals np.einsum (float64, so exactly up to order)."""
    xs = _inputs(shapes, np.float64, 0)
    graph = hetero.load_onnx(_model(equation, shapes, np.float64))
    assert "Einsum" not in {n.op for n in graph.nodes}
    got = hetero.run_reference(graph, {f"x{i}": x for i, x in enumerate(xs)})["y"]
    want = np.einsum(equation, *xs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation,shapes,dtype", [
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)], np.float32),
    ("...ii->...i", [(2, 3, 3)], np.float32),
    ("ij,jk->ik", [(3, 4), (4, 5)], np.int32),
    ("ij,kj->ik", [(3, 4), (5, 4)], np.int8),
    ("ijk,ikl,ilm->ijm", [(2, 3, 4), (2, 4, 5), (2, 5, 3)], np.float16),
    ("ij->", [(3, 4)], np.int64),
])
def test_compiled_on_llvm_cpu(equation: str, shapes: list[tuple[int, ...]], dtype: type) -> None:
    """The rewritten graph compiles (MatMul, or Mul and ReduceSum for int8) and agrees."""
    xs = _inputs(shapes, dtype, 1)
    (got,) = HeteroBackend.prepare(_model(equation, shapes, dtype)).run(xs)
    want = np.einsum(equation, *[x.astype(np.float64) for x in xs]).astype(dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    if np.dtype(dtype).kind == "f":
        np.testing.assert_allclose(got, want, rtol=4e-3 if dtype == np.float16 else 1e-5,
                                   atol=1e-2 if dtype == np.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("equation,ranks,match", [
    ("ij,jk->ik", [2], "has 2 operands"),
    ("ij->k", [2], "names one no input has"),
    ("ij,j->ii", [2, 1], "repeats a label"),
    ("i1->i", [2], "not letters"),
    ("b...->b", [3], "drops the ellipsis"),
    ("ijk->i", [2], "does not fit an input of rank 2"),
])
def test_malformed_equations_are_shape_errors(equation: str, ranks: list[int], match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        parse_einsum(equation, ranks, "node my_einsum")


def test_implicit_output_puts_the_ellipsis_first_then_single_letters_sorted() -> None:
    labels, output = parse_einsum("...ba,cb", [3, 2], "n")
    assert labels == [["…0", "b", "a"], ["c", "b"]]
    assert output == ["…0", "a", "c"]
