"""onnx's own node cases of the reductions hetero added, with their axes made constant.

onnx feeds most reductions' axes (opset 18) as a graph input, which hetero refuses
until operands that are graph inputs are designed (issue 11, item 4). Here each
case's axes input becomes an initializer holding the case's own axes, so the model
imports, and hetero's llvm_cpu result is compared with onnx's expected output at the
node suite's tolerances.
"""

from __future__ import annotations

from typing import Any
import warnings

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.loader import load_node_model_tests
import pytest

from hetero.onnx_backend import HeteroBackend

PREFIXES = ("test_reduce_l1", "test_reduce_l2", "test_reduce_log_sum", "test_reduce_prod",
            "test_reduce_sum_square")


def _node_cases() -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # some generators overflow on purpose
        cases = load_node_model_tests()
    return {c.name: c for c in cases
            if c.name.startswith(PREFIXES) and not c.name.endswith("_expanded")}


CASES = _node_cases()


def _with_constant_axes(case: Any) -> tuple[onnx.ModelProto, list[np.ndarray], list[np.ndarray]]:
    """The case's model with every input after the data made an initializer of its value."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    graph = model.graph
    for k in reversed(range(1, len(graph.input))):
        graph.initializer.append(numpy_helper.from_array(np.asarray(inputs[k]), graph.input[k].name))
        del graph.input[k]
    return model, list(inputs[:1]), list(outputs)


def test_cases_are_found() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", sorted(CASES))
def test_node_case_with_constant_axes(case: str) -> None:
    model, inputs, outputs = _with_constant_axes(CASES[case])
    got = HeteroBackend.prepare(model, device="CPU").run(inputs)
    for actual, expected in zip(got, outputs):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-7)
