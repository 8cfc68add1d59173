"""The conformance suite's single-op cases: coverage, soundness, tolerances, and llvm_cpu on all of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetero.core.exec.reference import run_reference
from hetero.core.ir import op_names
from hetero.core.ir.verify import verify
from hetero.core.plugin.manager import get_backend
from hetero.core.plugin.target import bind
from hetero.errors import InputError, UnknownOpError
from hetero.testing import (
    OpCase,
    Tolerance,
    case_dtypes,
    compare_outputs,
    edge_case,
    example_case,
    op_cases,
)
from hetero.testing.suite import _check_case
from toyplugin import ToyBackend

SMALL = 4096  # elements per tensor: a backend compiles and runs a case in well under a second
FEW = settings(max_examples=3, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow])


def assert_sound(case: OpCase) -> None:
    """A verified one-node graph of small tensors whose expected outputs are the reference's."""
    verify(case.graph)
    assert [n.op for n in case.graph.nodes] == [case.op]
    assert all(a.size <= SMALL for a in case.inputs.values())
    assert all(a.size >= 1 for a in case.expected.values())
    reference = run_reference(case.graph, case.inputs)
    assert reference.keys() == case.expected.keys()
    for name, want in reference.items():
        np.testing.assert_array_equal(case.expected[name], want)
        assert case.expected[name].dtype == want.dtype


def test_every_canonical_op_has_a_generator_over_dtypes_it_accepts() -> None:
    for op in op_names():
        dtypes = case_dtypes(op)
        assert dtypes, op
        for dtype in dtypes:
            case = example_case(op, dtype)
            assert (case.op, case.dtype) == (op, dtype)
            assert_sound(case)


def test_example_cases_are_the_same_on_every_call() -> None:
    first, second = example_case("Conv"), example_case("Conv")
    assert first.describe() == second.describe()
    for name in first.inputs:
        np.testing.assert_array_equal(first.inputs[name], second.inputs[name])


def test_the_case_dtype_is_the_main_inputs() -> None:
    for op in ("Add", "Conv", "DequantizeLinear", "Cast"):
        for dtype in case_dtypes(op):
            main = example_case(op, dtype).graph.nodes[0].inputs[0]
            assert main.dtype.name == dtype
    where = example_case("Where", "int8").graph.nodes[0]
    assert [v.dtype.name for v in where.inputs] == ["bool", "int8", "int8"]


def test_unknown_ops_and_dtypes_are_refused_by_name() -> None:
    with pytest.raises(UnknownOpError, match="'Conv2d'"):
        case_dtypes("Conv2d")
    with pytest.raises(UnknownOpError, match="Log.*int32"):
        example_case("Log", "int32")


@pytest.mark.parametrize("op", ["Conv", "AveragePool", "Slice", "QuantizeLinear", "Add", "ReduceMean",
                                "Gemm", "Split", "MatMul", "LayerNormalization"])
def test_strategy_yields_sound_cases(op: str) -> None:
    @settings(max_examples=8, deadline=None, database=None)
    @given(op_cases(op))
    def check(case: OpCase) -> None:
        assert case.dtype in case_dtypes(op)
        assert_sound(case)

    check()


def test_strategy_restricted_to_one_dtype_stays_in_it() -> None:
    @settings(max_examples=5, deadline=None, database=None)
    @given(op_cases("Relu", "int8"))
    def check(case: OpCase) -> None:
        assert case.dtype == "int8" and case.inputs["x"].dtype == np.int8

    check()


def test_tolerance_accepts_the_exact_result_and_flags_a_planted_error() -> None:
    case = example_case("MatMul")
    (name, want), = case.expected.items()
    assert case.tolerance.check(want.copy(), want) is None
    planted = want.copy()
    planted.flat[-1] += np.float32(1e-2)
    message = case.tolerance.check(planted, want)
    assert message is not None and "max abs error" in message
    assert str(tuple(int(i) for i in np.unravel_index(want.size - 1, want.shape))) in message
    assert compare_outputs(case, {name: planted}) is not None
    assert "MatMul [float32]" in compare_outputs(case, {name: planted})


def test_integer_tolerance_is_exact_and_names_the_first_difference() -> None:
    want = np.arange(6, dtype=np.int8).reshape(2, 3)
    got = want.copy()
    got[1, 2] += 1
    assert Tolerance(0.0, 0.0).check(want.copy(), want) is None
    assert "index (1, 2)" in Tolerance(0.0, 0.0).check(got, want)


def test_tolerance_treats_non_finite_values_strictly() -> None:
    want = np.array([np.inf, np.nan, 1.0], np.float32)
    assert Tolerance(1e-3, 1e-3).check(want.copy(), want) is None
    assert Tolerance(1e-3, 1e-3).check(np.array([np.inf, 0, 1.0], np.float32), want) is not None


def test_compare_outputs_names_missing_and_mistyped_outputs() -> None:
    case = example_case("Relu")
    (name, want), = case.expected.items()
    assert compare_outputs(case, {name: want}) is None
    assert "missing" in compare_outputs(case, {})
    assert "expected f32" in compare_outputs(case, {name: want.astype(np.float64)})


def test_float_tolerances_scale_with_the_dtype() -> None:
    f32, f16 = example_case("Conv", "float32"), example_case("Conv", "float16")
    assert f16.tolerance.rtol > f32.tolerance.rtol > 0
    assert example_case("Reshape").tolerance == Tolerance(0.0, 0.0)


_LLVM = get_backend("llvm_cpu")


def _run_on_llvm(case: OpCase) -> None:
    part = bind(_LLVM).compile(case.graph)
    if case.error is not None:
        with pytest.raises(case.error):
            part.run(case.inputs)
        return
    problem = compare_outputs(case, part.run(case.inputs))
    assert problem is None, problem


# Every op llvm_cpu claims: all but the int8 ops, which only integer backends take.
@pytest.mark.parametrize("op", sorted(_LLVM.supported_ops))
def test_llvm_cpu_passes_every_case(op: str) -> None:
    for dtype in case_dtypes(op):
        _run_on_llvm(example_case(op, dtype))
        edge = edge_case(op, dtype)
        if edge is not None:
            _run_on_llvm(edge)

    @FEW
    @given(st.just(None), op_cases(op))
    def generated(_: None, case: OpCase) -> None:
        _run_on_llvm(case)

    generated()


# -- edge values ------------------------------------------------------------------

#: Ops whose meaning on NaN is the point: a NaN operand, window entry or reduced term wins.
NAN_OPS = ["Max", "Min", "Relu", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "MaxPool",
           "GlobalMaxPool", "AveragePool", "GlobalAveragePool", "ReduceMax", "ReduceMin",
           "ReduceSum", "ReduceMean", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal"]


@pytest.mark.parametrize("op", NAN_OPS)
def test_edge_cases_put_nan_into_every_float_dtype(op: str) -> None:
    for dtype in (d for d in case_dtypes(op) if np.dtype(d).kind == "f"):
        case = edge_case(op, dtype)
        assert case is not None and case.error is None
        assert any(np.isnan(a).any() for a in case.inputs.values()), case.describe()
        assert_sound(case)


@pytest.mark.parametrize("op", ["Max", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin"])
def test_max_min_edge_cases_expect_nan_out(op: str) -> None:
    case = edge_case(op)
    assert case is not None and any(np.isnan(w).any() for w in case.expected.values())


def test_integer_dtypes_and_ops_without_edges_have_no_edge_case() -> None:
    assert edge_case("Max", "int32") is None
    assert edge_case("Conv") is None


def test_gather_edge_case_is_a_runtime_index_out_of_range_that_the_reference_refuses() -> None:
    case = edge_case("Gather")
    assert case is not None and case.error is InputError and case.expected == {}
    assert "is out of range" in case.error_message
    node = case.graph.nodes[0]
    assert not node.inputs[1].is_constant
    dim = node.inputs[0].shape[node.attrs["axis"]]
    indices = case.inputs[node.inputs[1].name]
    assert ((indices < -dim) | (indices >= dim)).any()


def test_exact_tolerance_matches_nan_only_with_nan() -> None:
    want = np.array([np.nan, 1.0], np.float32)
    assert Tolerance(0.0, 0.0).check(want.copy(), want) is None
    assert Tolerance(0.0, 0.0).check(np.array([1.0, 1.0], np.float32), want) is not None
    assert Tolerance(0.0, 0.0).check(np.array([np.nan, np.nan], np.float32), want) is not None


class _Part:
    def __init__(self, fn) -> None:  # noqa: ANN001 - inputs -> outputs
        self.run = fn


class _Backend(ToyBackend):
    """A backend computing one op with a numpy function that has the classic edge bugs."""

    def __init__(self, fn) -> None:  # noqa: ANN001
        super().__init__("edgy")
        self.fn = fn

    def compile(self, graph, target):  # noqa: ANN001, ANN201
        out = graph.outputs[0].name
        return _Part(lambda inputs: {out: self.fn(*inputs.values())})


def test_the_suite_catches_a_backend_that_drops_nan() -> None:
    case = edge_case("Max")
    assert case is not None
    nan_dropping = _Backend(lambda a, b: np.fmax(a, b))
    with pytest.raises(AssertionError, match="computes a wrong Max"):
        _check_case(nan_dropping, case)
    _check_case(_Backend(np.maximum), case)


def test_the_suite_catches_a_backend_that_clamps_indices() -> None:
    case = edge_case("Gather")
    assert case is not None
    axis = case.graph.nodes[0].attrs["axis"]
    clamping = _Backend(lambda data, idx: np.take(data, idx, axis=axis, mode="clip"))
    with pytest.raises(AssertionError, match="returned values .* where the reference raises InputError"):
        _check_case(clamping, case)

    def refusing(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise InputError("node gather (Gather): index out of range")

    _check_case(_Backend(refusing), case)


def test_each_kept_regression_still_makes_the_case_it_names() -> None:
    from hetero.testing.cases import REGRESSIONS, regression_cases

    for (op, dtype), seeds in REGRESSIONS.items():
        cases = regression_cases(op, dtype)
        assert len(cases) == len(seeds)
        for case in cases:
            node = case.graph.nodes[0]
            assert node.op == op and str(node.inputs[0].dtype) == dtype
            if op == "GridSample":  # a one-wide spatial axis, nearest, reflection, align_corners
                assert 1 in node.inputs[0].shape[2:]
                assert (node.attrs["mode"], node.attrs["padding_mode"], node.attrs["align_corners"]) == (
                    "nearest", "reflection", 1)
