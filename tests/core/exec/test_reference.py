"""The reference executor runs graphs and rejects bad inputs with InputError."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder
from hetero.errors import InputError


def graph() -> Graph:
    b = GraphBuilder("g")
    x = b.input("x", (2, 3))
    y = b.input("y", (3,))
    s = b.Add(x, y, name="s")
    b.output(b.Relu(s, name="out"), b.Neg(s, name="neg"))
    return b.build()


def test_runs_every_output() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal(3).astype(np.float32)
    out = run_reference(graph(), {"x": x, "y": y})
    np.testing.assert_array_equal(out["out"], np.maximum(x + y, 0))
    np.testing.assert_array_equal(out["neg"], -(x + y))
    assert set(out) == {"out", "neg"}


def test_keep_returns_intermediates() -> None:
    x = np.ones((2, 3), np.float32)
    out = run_reference(graph(), {"x": x, "y": np.ones(3, np.float32)}, keep=True)
    np.testing.assert_array_equal(out["s"], 2 * x)


def test_missing_input() -> None:
    with pytest.raises(InputError, match=r"missing input\(s\) \['y'\]"):
        run_reference(graph(), {"x": np.ones((2, 3), np.float32)})


def test_unknown_input_suggests_name() -> None:
    with pytest.raises(InputError, match="no input 'xx'.*did you mean 'x'"):
        run_reference(graph(), {"xx": np.ones((2, 3), np.float32), "y": np.ones(3, np.float32)})


def test_wrong_dtype_is_not_cast() -> None:
    with pytest.raises(InputError, match="'x'.*float32, got float64"):
        run_reference(graph(), {"x": np.ones((2, 3)), "y": np.ones(3, np.float32)})


def test_wrong_shape_is_not_broadcast() -> None:
    with pytest.raises(InputError, match=r"'y'.*shape \[3\], got \[1, 3\]"):
        run_reference(graph(), {"x": np.ones((2, 3), np.float32), "y": np.ones((1, 3), np.float32)})


def test_outputs_that_are_inputs_or_constants() -> None:
    g = Graph("passthrough")
    x = g.add_input("x", (2,), "float32")
    c = g.add_constant(np.arange(2, dtype=np.float32), "c")
    g.set_outputs([x, c])
    out = run_reference(g, {"x": np.ones(2, np.float32)})
    np.testing.assert_array_equal(out["x"], np.ones(2))
    np.testing.assert_array_equal(out["c"], np.arange(2))
