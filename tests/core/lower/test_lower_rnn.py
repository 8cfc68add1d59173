"""RNN, LSTM and GRU lowered (the projection stage, the serial time loop, the output
stages) against their references on the tensor-IR interpreter, every output: both
layouts, run-time sequence lengths with an empty entry, different activations per
direction, clip, peepholes, GRU's two reset placements, float16 with its float32 state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import run_func, verify_func
from hetero.core.lower import lower_node

_GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def lowered_and_reference(op: str, attrs: dict[str, Any], dtype: Any = np.float32,
                          steps: int = 3, batch: int = 2, size: int = 3, units: int = 4,
                          lens: list[int] | None = None, optional: bool = True
                          ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(5)
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    gates, layout = _GATES[op], attrs.get("layout", 0)
    state = (batch, dirs, units) if layout else (dirs, batch, units)

    def draw(shape: tuple[int, ...], scale: float = 1.0) -> np.ndarray:
        return (rng.uniform(-scale, scale, shape)).astype(dtype)

    arrays: dict[str, np.ndarray | None] = {
        "X": draw((batch, steps, size) if layout else (steps, batch, size)),
        "W": draw((dirs, gates * units, size), 0.5), "R": draw((dirs, gates * units, units), 0.5),
        "B": draw((dirs, 2 * gates * units), 0.5) if optional else None,
        "sequence_lens": None if lens is None else np.array(lens, np.int32),
        "initial_h": draw(state) if optional else None,
    }
    if op == "LSTM":
        arrays["initial_c"] = draw(state) if optional else None
        arrays["P"] = draw((dirs, 3 * units), 0.5) if optional else None
    b = GraphBuilder(op.lower())
    operands = [None if a is None else b.constant(a, k) if k in ("W", "R", "B", "P")
                else b.input(k, a.shape, a.dtype) for k, a in arrays.items()]
    outs = b.op(op, *operands, **attrs)
    b.output(*outs)
    graph = b.build()
    feeds = {k: a for k, a in arrays.items() if a is not None and k not in ("W", "R", "B", "P")}
    want = run_reference(graph, feeds)
    node = graph.nodes[0]
    func = verify_func(lower_node(node))
    params = [v.data if v.data is not None else feeds[v.name] for v in node.inputs if v is not None]
    params += [np.zeros(v.shape, v.dtype) for v in node.outputs]
    got = run_func(func, {p.name: a for p, a in zip(func.params, params)})
    return ([got[p.name] for p in func.params[-len(node.outputs):]],
            [want[v.name] for v in node.outputs])


def assert_close(got: list[np.ndarray], want: list[np.ndarray], tol: float = 1e-5) -> None:
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["RNN", "LSTM", "GRU"])
@pytest.mark.parametrize("layout", [0, 1])
def test_bidirectional_with_run_time_lengths(op: str, layout: int) -> None:
    got, want = lowered_and_reference(op, {"direction": "bidirectional", "layout": layout},
                                      lens=[3, 0])
    assert_close(got, want)
    empty = want[1][1] if layout else want[1][:, 1]  # Y_h of the entry of length 0
    assert not empty.any()


@pytest.mark.parametrize("op,attrs", [
    ("RNN", {"direction": "bidirectional", "activations": "Relu,Softsign",
             "activation_alpha": (0.0, 0.0), "activation_beta": (0.0, 0.0), "clip": 0.4}),
    ("LSTM", {"direction": "reverse", "activations": "HardSigmoid,Elu,ScaledTanh",
              "activation_alpha": (0.3, 0.8, 0.9), "activation_beta": (0.4, 0.0, 1.1),
              "input_forget": 1}),
    ("LSTM", {"clip": 0.3}),
    ("GRU", {"linear_before_reset": 1, "clip": 0.5}),
    ("GRU", {"direction": "bidirectional", "activations": "Sigmoid,Tanh,LeakyRelu,Affine",
             "activation_alpha": (0.0, 0.0, 0.2, 0.7), "activation_beta": (0.0, 0.0, 0.0, 0.1)}),
])
def test_options(op: str, attrs: dict[str, Any]) -> None:
    assert_close(*lowered_and_reference(op, attrs))


@pytest.mark.parametrize("op", ["RNN", "LSTM", "GRU"])
def test_without_optional_inputs(op: str) -> None:
    assert_close(*lowered_and_reference(op, {"direction": "reverse"}, optional=False))


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_float16_keeps_a_float32_state(op: str) -> None:
    """Each output is rounded once from float32 (the reference: from float64)."""
    got, want = lowered_and_reference(op, {}, dtype=np.float16, steps=4)
    assert_close(got, want, tol=2e-3)
