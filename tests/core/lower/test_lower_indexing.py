"""The indexing lowerings compiled by llvm_cpu (and run on the tensor-IR interpreter)
against each op's reference: scatters whose updates repeat under every reduction, index tuples checked column by column at run time
(also after the executable is saved and loaded), and the scatter-as-gather form at a
cache-update shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lowercheck import lowered_and_reference
import numpy as np
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.errors import InputError

RNG = np.random.default_rng(5)


def graph_of(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> Graph:
    b = GraphBuilder(op.lower())
    b.output(b.op(op, *(b.input(n, a.shape, a.dtype) for n, a in inputs.items()), **attrs))
    return b.build()


def compiled_and_reference(op: str, inputs: dict[str, np.ndarray], **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    graph = graph_of(op, inputs, **attrs)
    name = graph.outputs[0].name
    got = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run(inputs)[name]
    return got, run_reference(graph, inputs)[name]


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_scatters_with_repeated_targets_combine_in_order(reduction: str, dtype: str) -> None:
    data = RNG.integers(-3, 4, (3, 5)).astype(dtype)
    # Updates repeat only where a reduction says what they give.
    elements = (np.array([[0, 4, -1], [2, -5, 3], [1, 3, 0]]) if reduction == "none"
                else np.array([[0, 0, -5, 2], [1, 1, 1, 4], [3, -2, 3, 3]]))
    updates = RNG.integers(-3, 4, elements.shape).astype(dtype)
    got, want = compiled_and_reference("ScatterElements", {"data": data, "indices": elements,
                                                           "updates": updates},
                                       axis=1, reduction=reduction)
    np.testing.assert_array_equal(got, want)
    rows = np.array([[0, 1], [-1, 4], [2, -1]]) if reduction == "none" \
        else np.array([[0, 1], [0, 1], [-3, 1], [2, 2]])
    values = RNG.integers(-3, 4, len(rows)).astype(dtype)
    got, want = compiled_and_reference("ScatterND", {"data": data, "indices": rows, "updates": values},
                                       reduction=reduction)
    np.testing.assert_array_equal(got, want)


def test_index_tuples_are_checked_column_by_column_at_run_time(tmp_path: Path) -> None:
    data = RNG.uniform(-1, 1, (5, 2)).astype(np.float32)
    good = np.array([[4, 1], [-5, -2]], np.int64)
    bad = np.array([[4, 1], [0, 3]], np.int64)  # 3 fits axis 0 (5) but not axis 1 (2)
    graph = graph_of("GatherND", {"data": data, "indices": good})
    exe = hetero.compile(graph, targets=["llvm_cpu"], strict=True)
    name = graph.outputs[0].name
    np.testing.assert_array_equal(exe.run({"data": data, "indices": good})[name], data[[4, 0], [1, 0]])
    with pytest.raises(InputError, match="axis 1 of size 2"):
        exe.run({"data": data, "indices": bad})
    exe.save(tmp_path / "gather_nd.hx")
    loaded = hetero.load(tmp_path / "gather_nd.hx")
    with pytest.raises(InputError, match="axis 1 of size 2"):
        loaded.run({"data": data, "indices": bad})


def test_a_negative_sequence_length_is_refused_at_run_time(tmp_path: Path) -> None:
    """Lengths are counts, not positions: -1 is an error, never 'the last' nor 0."""
    x = RNG.uniform(-1, 1, (4, 3)).astype(np.float32)  # time 4, batch 3
    good, bad = np.array([4, 0, 2], np.int64), np.array([4, -1, 2], np.int64)
    graph = graph_of("ReverseSequence", {"x": x, "lens": good}, batch_axis=1, time_axis=0)
    exe = hetero.compile(graph, targets=["llvm_cpu"], strict=True)
    name = graph.outputs[0].name
    np.testing.assert_array_equal(exe.run({"x": x, "lens": good})[name],
                                  run_reference(graph, {"x": x, "lens": good})[name])
    with pytest.raises(InputError, match=r"index -1 is out of range .* must lie in \[0, 5\)"):
        exe.run({"x": x, "lens": bad})
    with pytest.raises(InputError):
        run_reference(graph, {"x": x, "lens": bad})
    exe.save(tmp_path / "reverse.hx")
    with pytest.raises(InputError, match=r"must lie in \[0, 5\)"):
        hetero.load(tmp_path / "reverse.hx").run({"x": x, "lens": bad})


def test_a_cache_update_scatters_one_row_per_batch() -> None:
    cache = RNG.uniform(-1, 1, (2, 4, 16, 8)).astype(np.float32)
    step = RNG.uniform(-1, 1, (2, 4, 8)).astype(np.float32)
    position = np.array([[[b, h, 11] for h in range(4)] for b in range(2)], np.int64)
    got, want = compiled_and_reference("ScatterND", {"data": cache, "indices": position, "updates": step})
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(got[:, :, 11], step)


@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 1)])
def test_half_precision_cumsum_accumulates_in_float32(exclusive: int, reverse: int) -> None:
    x = RNG.uniform(0, 1, (3, 200)).astype(np.float16)
    got, want = compiled_and_reference("CumSum", {"x": x}, axis=1, exclusive=exclusive, reverse=reverse)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3)


@pytest.mark.parametrize(("op", "inputs", "attrs"), [
    ("ScatterND", {"data": np.arange(12.0).reshape(3, 4), "indices": np.array([[2], [0], [2]]),
                   "updates": np.ones((3, 4))}, {"reduction": "add"}),
    ("ScatterElements", {"data": np.zeros((2, 3), np.int32), "indices": np.array([[2, 2], [0, -3]]),
                         "updates": np.array([[5, 6], [7, 8]], np.int32)}, {"axis": 1}),
    ("CumSum", {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)}, {"axis": 1, "exclusive": 1}),
    ("CumSum", {"x": np.arange(6, dtype=np.int64)}, {"axis": 0, "reverse": 1}),
])
def test_serial_stages_run_on_the_interpreter(op: str, inputs: dict[str, np.ndarray],
                                              attrs: dict[str, Any]) -> None:
    got, want = lowered_and_reference(op, inputs, **attrs)
    np.testing.assert_array_equal(got, want)
