"""Sequences and optionals known at import: each model's tensor outputs against onnxruntime."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest

import hetero
from hetero.errors import ModelLoadError, OperandInputError, UnsupportedOpError
from oracle import run_model

vi = helper.make_tensor_value_info
F = TensorProto.FLOAT


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
           outputs: list[onnx.ValueInfoProto], consts: Mapping[str, np.ndarray] | None = None,
           opset: int = 18) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(a), name) for name, a in (consts or {}).items()]
    graph = helper.make_graph(nodes, "m", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> None:
    """hetero's outputs equal onnxruntime's: the ops only move data, so exactly (an Add
    or Mul in a body computes the same float32 in both)."""
    got = hetero.compile(model, targets=["llvm_cpu"]).run(dict(feeds))
    expected = run_model(model, feeds)
    for info, want in zip(model.graph.output, expected):
        assert got[info.name].dtype == want.dtype, info.name
        np.testing.assert_array_equal(got[info.name], want, err_msg=info.name)


def _x(shape: Sequence[int], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("split, keepdims, position, part", [
    (None, 1, 0, [3, 1]),                        # size-1 parts, kept
    (None, 0, -1, [3]),                          # size-1 parts, squeezed; the last one
    (np.array(2, np.int64), 1, -1, [3, 1]),      # chunks of 2 of 5: the last is 1 long
    (np.array([1, 3, 1], np.int64), 0, 1, [3, 3]),  # explicit sizes (keepdims ignored)
    (np.array(7, np.int64), 1, 0, [3, 5]),       # one chunk: a one-element sequence
])
def test_split_to_sequence_then_sequence_at(split, keepdims, position, part) -> None:
    consts = {"p": np.array(position, np.int64)}
    inputs = ["x"]
    if split is not None:
        consts["split"] = split
        inputs.append("split")
    nodes = [helper.make_node("SplitToSequence", inputs, ["s"], axis=1, keepdims=keepdims),
             helper.make_node("SequenceAt", ["s", "p"], ["y"]),
             helper.make_node("ConcatFromSequence", ["s"], ["all"], axis=1,
                              new_axis=int(split is None and not keepdims)),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    model = _model(nodes, [vi("x", F, [3, 5])],
                   [vi("y", F, part), vi("all", F, [3, 5]), vi("n", TensorProto.INT64, [])], consts)
    _check(model, {"x": _x([3, 5])})


def test_insert_erase_and_length_follow_onnx_positions() -> None:
    consts = {"p1": np.array(1, np.int64), "m1": np.array(-1, np.int32),
              "m3": np.array(-3, np.int64)}
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["s0"]),
        helper.make_node("SequenceInsert", ["s0", "c"], ["s1"]),          # at the end: a b c
        helper.make_node("SequenceInsert", ["s1", "a", "p1"], ["s2"]),    # a a b c
        helper.make_node("SequenceInsert", ["s2", "c", "m1"], ["s3"]),    # a a b c c
        helper.make_node("SequenceErase", ["s3", "m3"], ["s4"]),          # a a c c
        helper.make_node("SequenceErase", ["s4"], ["s5"]),                # a a c
        helper.make_node("ConcatFromSequence", ["s5"], ["y"], axis=0),
        helper.make_node("SequenceLength", ["s3"], ["n"]),
        helper.make_node("SequenceAt", ["s4", "m1"], ["last"]),
    ]
    model = _model(nodes, [vi(n, F, [2, 3]) for n in "abc"],
                   [vi("y", F, [6, 3]), vi("n", TensorProto.INT64, []), vi("last", F, [2, 3])], consts)
    _check(model, {n: _x([2, 3], k) for k, n in enumerate("abc")})


def _appending_body() -> onnx.GraphProto:
    """Loop body: acc += 1; appends x * acc to the carried sequence."""
    return helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Add", ["acc_in", "one"], ["acc_out"]),
         helper.make_node("Mul", ["x", "acc_out"], ["t"]),
         helper.make_node("SequenceInsert", ["seq_in", "t"], ["seq_out"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", F, []),
         helper.make_tensor_sequence_value_info("seq_in", F, [2, 3])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, []),
         helper.make_tensor_sequence_value_info("seq_out", F, [2, 3])],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one")])


@pytest.mark.parametrize("new_axis, axis, shape", [(0, 1, [2, 12]), (1, 0, [4, 2, 3]),
                                                   (1, -1, [2, 3, 4])])
def test_a_loop_appends_to_a_sequence_each_iteration(new_axis: int, axis: int,
                                                     shape: list[int]) -> None:
    nodes = [helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Loop", ["trips", "", "acc0", "empty"], ["acc", "seq"],
                              body=_appending_body()),
             helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=axis, new_axis=new_axis),
             helper.make_node("SequenceLength", ["seq"], ["n"])]
    model = _model(nodes, [vi("x", F, [2, 3])],
                   [vi("y", F, shape), vi("acc", F, []), vi("n", TensorProto.INT64, [])],
                   {"trips": np.array(4, np.int64), "acc0": np.array(0.0, np.float32)})
    _check(model, {"x": _x([2, 3])})


def test_a_loop_body_reads_an_outer_sequence_at_its_iteration() -> None:
    # An exporter's unbind-then-loop: SequenceAt(seq, i), i the iteration counter.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("SequenceAt", ["rows", "i"], ["row"]),
         helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["scan"])],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", F, [3])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, [3]), vi("scan", F, [3])])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
             helper.make_node("SequenceLength", ["rows"], ["n"]),
             helper.make_node("Loop", ["n", "", "acc0"], ["acc", "partial"], body=body)]
    model = _model(nodes, [vi("x", F, [4, 3])], [vi("acc", F, [3]), vi("partial", F, [4, 3])],
                   {"acc0": np.zeros(3, np.float32)})
    _check(model, {"x": _x([4, 3])})


@pytest.mark.parametrize("cond", [True, False])
def test_an_if_chooses_a_sequence(cond: bool) -> None:
    def branch(name: str, parts: list[str]) -> onnx.GraphProto:
        return helper.make_graph([helper.make_node("SequenceConstruct", parts, [f"{name}_s"])], name, [],
                                 [helper.make_tensor_sequence_value_info(f"{name}_s", F, [2, 3])])

    nodes = [helper.make_node("If", ["cond"], ["s"], then_branch=branch("then", ["a", "b"]),
                              else_branch=branch("else", ["b", "a", "b"])),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    model = _model(nodes, [vi("a", F, [2, 3]), vi("b", F, [2, 3])], [vi("y", F, ["n", 2, 3])],
                   {"cond": np.array(cond)})
    _check(model, {"a": _x([2, 3], 1), "b": _x([2, 3], 2)})


def test_optionals_whose_presence_is_known() -> None:
    tensor_type = helper.make_tensor_type_proto(F, [2, 3])
    nodes = [
        helper.make_node("Optional", ["x"], ["some"]),
        helper.make_node("Optional", [], ["none"], type=tensor_type),
        helper.make_node("OptionalHasElement", ["some"], ["has_some"]),
        helper.make_node("OptionalHasElement", ["none"], ["has_none"]),
        helper.make_node("OptionalGetElement", ["some"], ["got"]),
        helper.make_node("OptionalGetElement", ["x"], ["got_tensor"]),  # a tensor passes through
        helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
        helper.make_node("Optional", ["s"], ["some_seq"],
                         type=helper.make_sequence_type_proto(tensor_type)),
        helper.make_node("OptionalGetElement", ["some_seq"], ["got_seq"]),
        helper.make_node("ConcatFromSequence", ["got_seq"], ["joined"], axis=0),
    ]
    bool_out = [vi("has_some", TensorProto.BOOL, []), vi("has_none", TensorProto.BOOL, [])]
    model = _model(nodes, [vi("x", F, [2, 3])],
                   [*bool_out, vi("got", F, [2, 3]), vi("got_tensor", F, [2, 3]), vi("joined", F, [4, 3])])
    _check(model, {"x": _x([2, 3])})


# -- refusals ----------------------------------------------------------------------------
def _split_model(extra: list[onnx.NodeProto], outputs: list[onnx.ValueInfoProto],
                 inputs: Sequence[onnx.ValueInfoProto] = ()) -> onnx.ModelProto:
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0), *extra]
    return _model(nodes, [vi("x", F, [3, 2]), *inputs], outputs)


def test_a_sequence_graph_output_is_refused() -> None:
    model = _split_model([], [helper.make_tensor_sequence_value_info("s", F, [1, 2])])
    with pytest.raises(ModelLoadError, match=r"output 's' is a sequence_type, not a tensor"):
        hetero.load_onnx(model)


def test_an_optional_graph_output_is_refused() -> None:
    opt = helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(F, [3, 2])))
    model = _model([helper.make_node("Optional", ["x"], ["o"])], [vi("x", F, [3, 2])], [opt])
    with pytest.raises(ModelLoadError, match=r"output 'o' is a optional_type, not a tensor"):
        hetero.load_onnx(model)


def test_a_sequence_graph_input_is_refused() -> None:
    seq = helper.make_tensor_sequence_value_info("s", F, [2])
    model = _model([helper.make_node("SequenceAt", ["s", "p"], ["y"])], [seq], [vi("y", F, [2])],
                   {"p": np.array(0, np.int64)})
    with pytest.raises(ModelLoadError, match=r"input 's' is a sequence_type, not a tensor"):
        hetero.load_onnx(model)


def test_a_sequence_read_by_an_op_without_a_sequence_translation_names_the_node() -> None:
    extra = [helper.make_node("Identity", ["s"], ["s2"], name="copy"),
             helper.make_node("SequenceAt", ["s2", "p"], ["y"])]
    model = _model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0), *extra],
                   [vi("x", F, [3, 2])], [vi("y", F, [1, 2])], {"p": np.array(0, np.int64)})
    with pytest.raises(UnsupportedOpError, match=r"'copy'.*its input 0 \('s'\) is a sequence"):
        hetero.load_onnx(model)


def test_a_sequence_in_a_loop_body_read_by_a_tensor_op_names_the_node() -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["seq_in"], ["seq_out"], name="body_copy")],
        "body",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_sequence_value_info("seq_in", F, [1, 2])],
        [vi("cond_out", TensorProto.BOOL, []), helper.make_tensor_sequence_value_info("seq_out", F, [1, 2])])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
             helper.make_node("Loop", ["trips", "", "s"], ["s_out"], body=body),
             helper.make_node("ConcatFromSequence", ["s_out"], ["y"], axis=0)]
    model = _model(nodes, [vi("x", F, [3, 2])], [vi("y", F, [3, 2])], {"trips": np.array(2, np.int64)})
    with pytest.raises(UnsupportedOpError, match=r"'body_copy'.*is a sequence"):
        hetero.load_onnx(model)


def test_a_position_out_of_range_is_refused() -> None:
    extra = [helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")]
    model = _model([helper.make_node("SplitToSequence", ["x"], ["s"], axis=0), *extra],
                   [vi("x", F, [3, 2])], [vi("y", F, [1, 2])], {"p": np.array(-4, np.int64)})
    with pytest.raises(UnsupportedOpError, match=r"'at'.*position -4 is out of range.*3 element"):
        hetero.load_onnx(model)


def test_a_position_from_data_is_an_operand_to_specialise_on() -> None:
    extra = [helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    model = _split_model(extra, [vi("y", F, [1, 2])], [vi("p", TensorProto.INT64, [])])
    with pytest.raises(OperandInputError, match=r"position input 'p'"):
        hetero.load_onnx(model)
    x = _x([3, 2])
    for p in (0, -1):
        got = hetero.compile(model, targets=["llvm_cpu"]).run({"x": x, "p": np.array(p, np.int64)})
        np.testing.assert_array_equal(got["y"], run_model(model, {"x": x, "p": np.array(p)})[0])


def test_concatenating_an_empty_sequence_is_refused() -> None:
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
             helper.make_node("ConcatFromSequence", ["e"], ["y"], axis=0, name="join")]
    model = _model(nodes, [vi("x", F, [2])], [vi("y", F, [2])])
    with pytest.raises(UnsupportedOpError, match=r"'join'.*sequence is empty"):
        hetero.load_onnx(model)


def test_getting_the_element_of_an_empty_optional_is_refused() -> None:
    nodes = [helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(F, [2])),
             helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")]
    model = _model(nodes, [vi("x", F, [2])], [vi("y", F, [2])])
    with pytest.raises(UnsupportedOpError, match=r"'get'.*empty optional"):
        hetero.load_onnx(model)


def test_an_element_of_another_type_is_refused() -> None:
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=F),
             helper.make_node("SequenceInsert", ["e", "i"], ["s"]),
             helper.make_node("SequenceAt", ["s", "p"], ["y"])]
    model = helper.make_model(helper.make_graph(
        nodes, "m", [vi("i", TensorProto.INT64, [2])], [vi("y", TensorProto.INT64, [2])],
        [numpy_helper.from_array(np.array(0, np.int64), "p")]),
        opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ModelLoadError, match=r"SequenceInsert.*same elem type"):
        hetero.load_onnx(model)
