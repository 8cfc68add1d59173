"""Running one op on the reference executor, and judging float gaps by rounding bounds."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder, Node


def reference(op: str, inputs: dict[str, np.ndarray | None], constants: tuple[str, ...] = (),
              **attrs: Any) -> tuple[np.ndarray, Node]:
    """The reference result of one ``op`` node, run as a graph, and the node itself.

    Inputs named in ``constants`` become graph constants; a ``None`` input is absent.
    """
    b = GraphBuilder(op.lower())
    operands = [
        None if a is None else b.constant(a, k) if k in constants else b.input(k, a.shape, a.dtype)
        for k, a in inputs.items()
    ]
    y = b.op(op, *operands, **attrs)
    b.output(y)
    graph = b.build()
    feeds = {k: a for k, a in inputs.items() if a is not None and k not in constants}
    return run_reference(graph, feeds)[y.name], graph.nodes[0]


def assert_within(actual: np.ndarray, expected: np.ndarray, magnitude: np.ndarray,
                  roundings: float) -> None:
    """|actual - expected| <= roundings * eps * magnitude, elementwise.

    A float sum of k terms computed in any order is within about k roundings of the
    exact sum, each rounding at most eps times the sum of the terms' magnitudes; tests
    pass that magnitude and the count of roundings their op implies.
    """
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    gap = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    bound = roundings * np.finfo(expected.dtype).eps * magnitude + np.finfo(expected.dtype).tiny
    worst = np.argmax(gap - bound)
    assert np.all(gap <= bound), f"gap {gap.flat[worst]} exceeds {bound.flat[worst]} at {worst}"
