"""The conformance suite's single-op cases: coverage, soundness, tolerances, and llvm_cpu on all of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetero.core.ir import op_names
from hetero.core.ir.verify import verify
from hetero.core.plugin.manager import get_backend
from hetero.core.runtime.reference import run_reference
from hetero.errors import UnknownOpError
from hetero.testing import (
    OpCase,
    Tolerance,
    case_dtypes,
    compare_outputs,
    example_case,
    op_cases,
)

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
    got = _LLVM.compile(case.graph, {}).run(case.inputs)
    problem = compare_outputs(case, got)
    assert problem is None, problem


# Every op llvm_cpu claims: all but the int8 ops, which only integer backends take.
@pytest.mark.parametrize("op", sorted(_LLVM.supported_ops))
def test_llvm_cpu_passes_every_case(op: str) -> None:
    for dtype in case_dtypes(op):
        _run_on_llvm(example_case(op, dtype))

    @FEW
    @given(st.just(None), op_cases(op))
    def generated(_: None, case: OpCase) -> None:
        _run_on_llvm(case)

    generated()
