"""The text form is stable: a test can compare it verbatim."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import GraphBuilder


def test_print_graph_is_stable_and_readable() -> None:
    b = GraphBuilder("mlp")
    x = b.input("x", (1, 4))
    h = b.MatMul(x, b.constant(np.ones((4, 2), np.float32), "w"), name="mm")
    h = b.LeakyRelu(h, alpha=0.5, name="act")
    b.output(b.Clip(h, min=0.0, max=6.0, name="relu6"))
    text = str(b.build())
    assert text == (
        "graph mlp(%x: f32[1,4]) -> (%relu6: f32[1,2]) {\n"
        "  %w = const f32[4,2] [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]\n"
        "  %mm = MatMul(%x, %w) : f32[1,2]\n"
        "  %act = LeakyRelu(%mm) {alpha=0.5} : f32[1,2]\n"
        "  %relu6 = Clip(%act) {max=6.0, min=0.0} : f32[1,2]\n"
        "  return %relu6\n"
        "}"
    )


def test_large_constants_print_their_type_only() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (3, 3))
    b.output(b.Add(x, b.constant(np.zeros((3, 3), np.float32), "big")))
    assert "%big = const f32[3,3]\n" in str(b.build())


def test_absent_optional_inputs_print_as_underscore() -> None:
    b = GraphBuilder("g")
    x = b.input("x", (1, 2, 5, 5))
    w = b.constant(np.zeros((4, 2, 3, 3), np.float32), "w")
    b.output(b.Conv(x, w, None, name="conv"))
    assert "Conv(%x, %w, _)" in str(b.build())
