"""Operands given as graph inputs: binding them, and executables that specialise on them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
import pytest

import hetero
from hetero.core.runtime.specialize import SpecializingExecutable
from hetero.errors import (
    DataDependentError, HeteroError, InputError, OperandInputError,
    SpecializationLimitError,
)
from oracle import run_model

vi = helper.make_tensor_value_info


def _model(nodes, inputs, outputs, opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _reduce_sum(n: int = 3) -> onnx.ModelProto:
    """ReduceSum(x, axes) whose axes are a graph input."""
    return _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                  [vi("x", TensorProto.FLOAT, [n, 4]), vi("axes", TensorProto.INT64, [1])],
                  [vi("y", TensorProto.FLOAT, ["d"])])


def test_operand_from_an_input_compiles_once_per_value() -> None:
    exe = hetero.compile(_reduce_sum())
    assert isinstance(exe, SpecializingExecutable)
    assert exe.specialized_on == ("axes",)
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for axis in (1, 0, 1, 0):
        y = exe.run({"x": x, "axes": np.array([axis])})["y"]
        np.testing.assert_array_equal(y, x.sum(axis=axis))
    assert exe.compiled == 2  # the repeated values reused their executables
    assert exe.interface.outputs[0][1] == (4,)  # the shape of the last run's output
    assert "specialised on the values of axes; 2 compile(s)" in exe.report()


def test_a_run_past_the_specialisation_bound_is_a_clear_error() -> None:
    exe = hetero.compile(_reduce_sum(), max_specializations=2)
    x = np.ones((3, 4), np.float32)
    for axis in (0, 1, 0):
        exe.run({"x": x, "axes": np.array([axis])})
    assert exe.compiled == 2
    with pytest.raises(SpecializationLimitError, match="compiled for 2 distinct values of axes") as info:
        exe.run({"x": x, "axes": np.array([-1])})
    assert "max_specializations=4" in str(info.value)


def test_operands_behind_further_inputs_join_the_key() -> None:
    # TopK's k names only 'k'; once it is bound, Reshape's shape names 'shape' too.
    model = _model(
        [helper.make_node("TopK", ["x", "k"], ["v", "i"]),
         helper.make_node("Reshape", ["v", "shape"], ["y"])],
        [vi("x", TensorProto.FLOAT, [2, 6]), vi("k", TensorProto.INT64, [1]),
         vi("shape", TensorProto.INT64, [2])],
        [vi("y", TensorProto.FLOAT, ["a", "b"])])
    exe = hetero.compile(model)
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    y = exe.run({"x": x, "k": np.array([3]), "shape": np.array([3, 2])})["y"]
    assert exe.specialized_on == ("k", "shape")
    np.testing.assert_array_equal(y, -np.sort(-x, axis=1)[:, :3].reshape(3, 2))
    y = exe.run({"x": x, "k": np.array([3]), "shape": np.array([1, 6])})["y"]
    assert y.shape == (1, 6) and exe.compiled == 2


def test_bound_inputs_compile_to_one_plain_executable() -> None:
    exe = hetero.compile(_reduce_sum(), input_values={"axes": [1]})
    assert not isinstance(exe, SpecializingExecutable)
    assert [name for name, _, _ in exe.interface.inputs] == ["x"]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(exe.run({"x": x})["y"], x.sum(axis=1))


@pytest.mark.parametrize("values, words", [
    ({"axis": [1]}, "'axis', which is not an input of model m (did you mean 'axes'?)"),
    ({"axes": [0.5]}, "has dtype float64, but the input is INT64"),
    ({"axes": [0, 1]}, "has shape [2], but the input is declared [1]"),
])
def test_a_value_that_does_not_fit_its_input_is_an_input_error(values, words) -> None:
    with pytest.raises(InputError, match=None) as info:
        hetero.load_onnx(_reduce_sum(), input_values=values)
    assert words in str(info.value)


def test_wrong_inputs_to_a_specialising_executable_are_input_errors() -> None:
    exe = hetero.compile(_reduce_sum())
    with pytest.raises(InputError, match="axes"):
        exe.run({"x": np.ones((3, 4), np.float32)})


def test_a_specialising_executable_cannot_be_saved_and_says_what_to_bind(tmp_path) -> None:
    exe = hetero.compile(_reduce_sum())
    with pytest.raises(HeteroError, match=r'input_values=\{"axes": \[\.\.\.\]\}'):
        exe.save(tmp_path / "m.hetero")


def test_the_import_names_the_operand_and_the_inputs_to_bind() -> None:
    with pytest.raises(OperandInputError) as info:
        hetero.load_onnx(_reduce_sum())
    assert info.value.inputs == ("axes",)
    assert "its axes input 'axes' is computed from the model's input(s) 'axes'" in str(info.value)
    assert 'input_values={"axes": [...]}' in str(info.value)


def test_an_operand_behind_a_large_input_waits_for_its_value() -> None:
    # A k computed from a tensor of data (here 2,048 elements) is no input to key on: the
    # TopK waits for a later stage, specialised on the value of k itself.
    model = _model(
        [helper.make_node("ReduceMax", ["big"], ["m"], keepdims=0),
         helper.make_node("Cast", ["m"], ["k"], to=TensorProto.INT64),
         helper.make_node("Unsqueeze", ["k", "zero"], ["k1"]),
         helper.make_node("TopK", ["x", "k1"], ["v", "i"])],
        [vi("x", TensorProto.FLOAT, [8]), vi("big", TensorProto.FLOAT, [2048])],
        [vi("v", TensorProto.FLOAT, ["k"])])
    model.graph.initializer.append(helper.make_tensor("zero", TensorProto.INT64, [1], [0]))
    with pytest.raises(DataDependentError, match="'k1' is computed from tensor values at run time"):
        hetero.load_onnx(model)
    exe = hetero.compile(model)
    x = np.arange(8, dtype=np.float32)[::-1].copy()
    for peak in (3.0, 6.0):
        big = np.full(2048, 1.0, np.float32)
        big[7] = peak
        got = exe.run({"x": x, "big": big})
        np.testing.assert_array_equal(got["v"], run_model(model, {"x": x, "big": big})[0])


@pytest.mark.parametrize("lo, hi", [(-1.0, 1.0), (2.0, 1.0)])
def test_clip_bounds_from_inputs_are_read_at_run_time(lo: float, hi: float) -> None:
    model = _model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                   [vi("x", TensorProto.FLOAT, [5]), vi("lo", TensorProto.FLOAT, []),
                    vi("hi", TensorProto.FLOAT, [])],
                   [vi("y", TensorProto.FLOAT, [5])])
    exe = hetero.compile(model)
    assert not isinstance(exe, SpecializingExecutable)  # no shape depends on the bounds
    x = np.array([-3, -0.5, 0, 0.5, np.nan], np.float32)
    y = exe.run({"x": x, "lo": np.float32(lo), "hi": np.float32(hi)})["y"]
    np.testing.assert_array_equal(y, np.clip(x, lo, hi))  # lo > hi gives hi, NaN stays NaN
