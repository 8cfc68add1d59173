"""Models with dynamic dimensions: one hetero.compile, a specialisation per input shape."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.core.runtime.specialize import SpecializingExecutable
from hetero.errors import HeteroError, InputError, SpecializationLimitError
from oracle import run_model

vi = helper.make_tensor_value_info
rng = np.random.default_rng(0)


def _model(nodes, inputs, outputs, inits=(), opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "dyn", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _cnn() -> onnx.ModelProto:
    """Conv, Relu, GlobalAveragePool, Flatten, Gemm over a dynamic batch 'N'."""
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    fc = numpy_helper.from_array(rng.standard_normal((5, 4)).astype(np.float32), "fc")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    return _model(nodes, [vi("x", TensorProto.FLOAT, ["N", 3, 8, 8])], [vi("y", TensorProto.FLOAT, ["N", 5])],
                  [w, fc])


def _attention() -> onnx.ModelProto:
    """Self-attention over a dynamic batch and sequence, with the Shape -> Gather ->
    Concat -> Reshape chain exporters write."""
    wq = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32) * 0.3, "wq")
    consts = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
              (("zero", [0]), ("one", [1]), ("heads", [2, 8]))]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "zero"], ["b"], axis=0),
             helper.make_node("Gather", ["shape", "one"], ["s"], axis=0),
             helper.make_node("Concat", ["b", "s", "heads"], ["split"], axis=0),
             helper.make_node("Reshape", ["q", "split"], ["qh"]),
             helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["qh"], ["kt"], perm=[0, 2, 3, 1]),
             helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
             helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
             helper.make_node("MatMul", ["probs", "qt"], ["y"])]
    return _model(nodes, [vi("x", TensorProto.FLOAT, ["B", "S", 16])],
                  [vi("y", TensorProto.FLOAT, ["B", 2, "S", 8])], [wq, *consts])


def test_a_dynamic_batch_runs_at_batch_1_2_and_8_from_one_compile() -> None:
    model = _cnn()
    exe = hetero.compile(model)
    assert isinstance(exe, SpecializingExecutable) and exe.shaped_on == ("x",)
    assert exe.interface.inputs[0][1] == (-1, 3, 8, 8)
    for batch in (1, 2, 8, 2):
        x = rng.standard_normal((batch, 3, 8, 8)).astype(np.float32)
        got = exe.run({"x": x})["y"]
        # Sums of 27 and 64 float32 products: a few ulps of their order apart.
        np.testing.assert_allclose(got, run_model(model, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert exe.compiled == 3  # batch 2's second run reused its build


def test_attention_runs_at_two_sequence_lengths() -> None:
    model = _attention()
    exe = hetero.compile(model)
    assert exe.shaped_on == ("x",)
    for batch, seq in ((1, 5), (2, 9)):
        x = rng.standard_normal((batch, seq, 16)).astype(np.float32)
        got = exe.run({"x": x})["y"]
        assert got.shape == (batch, 2, seq, 8)
        np.testing.assert_allclose(got, run_model(model, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_shapes_given_as_a_list_compile_ahead_of_time() -> None:
    exe = hetero.compile(_cnn(), input_shapes=[{"x": [1, 3, 8, 8]}, {"x": [8, 3, 8, 8]}])
    assert exe.compiled == 2
    exe.run({"x": np.zeros((8, 3, 8, 8), np.float32)})
    assert exe.compiled == 2


def test_one_shape_given_compiles_one_plain_executable() -> None:
    exe = hetero.compile(_cnn(), input_shapes={"x": [2, 3, 8, 8]})
    assert not isinstance(exe, SpecializingExecutable)
    assert exe.interface.inputs[0][1] == (2, 3, 8, 8)


def test_a_new_shape_past_the_bound_is_a_clear_error() -> None:
    exe = hetero.compile(_cnn(), max_specializations=2)
    for batch in (1, 2):
        exe.run({"x": np.zeros((batch, 3, 8, 8), np.float32)})
    with pytest.raises(SpecializationLimitError, match="compiled for 2 distinct shapes of x") as info:
        exe.run({"x": np.zeros((3, 3, 8, 8), np.float32)})
    assert "max_specializations=4" in str(info.value) and "input_shapes=[...]" in str(info.value)


@pytest.mark.parametrize("shape, words", [
    ((2, 3, 8), "must have shape ['?', 3, 8, 8] (? any size), got [2, 3, 8]"),
    ((2, 4, 8, 8), "must have shape ['?', 3, 8, 8] (? any size), got [2, 4, 8, 8]"),
])
def test_inputs_that_break_the_static_dims_are_input_errors(shape, words) -> None:
    exe = hetero.compile(_cnn())
    with pytest.raises(InputError) as info:
        exe.run({"x": np.zeros(shape, np.float32)})
    assert words in str(info.value)
    assert exe.compiled == 0


def test_a_shape_specialising_executable_cannot_be_saved(tmp_path) -> None:
    exe = hetero.compile(_cnn())
    with pytest.raises(HeteroError, match=r'input_shapes=\{"x": \[\.\.\.\]\}'):
        exe.save(tmp_path / "m.hetero")


def test_dynamic_dims_and_an_operand_input_key_together() -> None:
    model = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0)],
                   [vi("x", TensorProto.FLOAT, ["N", 4]), vi("axes", TensorProto.INT64, [1])],
                   [vi("y", TensorProto.FLOAT, ["d"])])
    exe = hetero.compile(model)
    for n, axis in ((2, 0), (3, 0), (3, 1)):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(exe.run({"x": x, "axes": np.array([axis])})["y"], x.sum(axis=axis),
                                   rtol=1e-6, atol=1e-6)
    assert exe.shaped_on == ("x",) and exe.specialized_on == ("axes",) and exe.compiled == 3
