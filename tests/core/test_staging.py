"""Models compiled in stages: data-dependent ops on the host, control flow decided by
data, tails specialised on the shapes the host produces; each against onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest
from toyplugin import plugin_source

import hetero
from hetero.core import staging
from hetero.core.staging import StagedExecutable
from hetero.errors import DataDependentError, HeteroError, SpecializationLimitError, UnsupportedOpError
from oracle import run_model

vi = helper.make_tensor_value_info
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(model: onnx.ModelProto, exe, feeds: dict[str, np.ndarray], rtol: float = 1e-6) -> None:
    got = exe.run(feeds)
    for out, want in zip(model.graph.output, run_model(model, feeds)):
        assert got[out.name].shape == want.shape, out.name
        np.testing.assert_allclose(got[out.name], want, rtol=rtol, atol=1e-6, err_msg=out.name)


def _positives_model() -> onnx.ModelProto:
    """The positive elements of relu(x) - 0.5 (NonZero, then GatherND), their sum, and x*x."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Sub", ["r", "half"], ["c"]),
             helper.make_node("Greater", ["c", "zero"], ["mask"]),
             helper.make_node("NonZero", ["mask"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["idx"]),
             helper.make_node("GatherND", ["c", "idx"], ["vals"]),
             helper.make_node("ReduceSum", ["vals"], ["total"], keepdims=0),
             helper.make_node("Mul", ["x", "x"], ["sq"])]
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    return _model(nodes, [vi("x", F, [3, 4])],
                  [vi("vals", F, ["n"]), vi("total", F, []), vi("sq", F, [3, 4])], inits)


def test_nonzero_runs_on_the_host_and_the_tail_specialises_on_its_count() -> None:
    model = _positives_model()
    with pytest.raises(DataDependentError, match="NonZero.*depends on the values"):
        hetero.load_onnx(model)
    exe = hetero.compile(model)
    assert isinstance(exe, StagedExecutable)
    assert [s.node.op_type for s in exe.steps] == ["NonZero"]
    counts = set()
    for seed in range(4):
        x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
        counts.add(int((x > 0.5).sum()))
        _check(model, exe, {"x": x})
    _check(model, exe, {"x": np.zeros((3, 4), np.float32)})  # nothing selected: empty tail inputs
    counts.add(0)
    assert exe.tail.compiled == len(counts)  # one compile per distinct count, reused after
    assert "NonZero" in exe.report() and "stage tail" in exe.report()


def test_a_tail_past_its_specialisation_bound_is_a_clear_error() -> None:
    exe = hetero.compile(_positives_model(), max_specializations=1)
    exe.run({"x": np.full((3, 4), 1.0, np.float32)})
    with pytest.raises(SpecializationLimitError, match="max_specializations"):
        exe.run({"x": np.zeros((3, 4), np.float32)})


def test_a_staged_executable_cannot_be_saved(tmp_path) -> None:
    exe = hetero.compile(_positives_model())
    with pytest.raises(HeteroError, match="cannot be saved as one file"):
        exe.save(tmp_path / "m.hexe")


def test_staging_nests_at_most_its_bound(monkeypatch) -> None:
    # NonZero of NonZero: the tail stages again, one level deeper.
    model = _model([helper.make_node("NonZero", ["x"], ["a"]),
                    helper.make_node("NonZero", ["a"], ["b"])],
                   [vi("x", F, [4])], [vi("b", I64, [2, "n"])])
    x = np.array([0.0, 2.0, 0.0, 3.0], np.float32)
    _check(model, hetero.compile(model), {"x": x})
    monkeypatch.setattr(staging, "MAX_STAGE_DEPTH", 1)
    with pytest.raises(UnsupportedOpError, match="nest more than 1 deep"):
        hetero.compile(model).run({"x": x})


def test_topk_with_k_from_data_waits_for_its_value() -> None:
    # k = how many elements exceed 0: computed from data (x is too large to specialise
    # on its value), so TopK waits for a later stage, specialised on k.
    n = 1100
    nodes = [helper.make_node("Greater", ["x", "zero"], ["pos"]),
             helper.make_node("Cast", ["pos"], ["ones"], to=I64),
             helper.make_node("ReduceSum", ["ones"], ["k"], keepdims=1),
             helper.make_node("TopK", ["x", "k"], ["values", "indices"])]
    model = _model(nodes, [vi("x", F, [n])], [vi("values", F, ["k"]), vi("indices", I64, ["k"])],
                   [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    exe = hetero.compile(model)
    assert isinstance(exe, StagedExecutable) and not exe.steps  # nothing on the host: only TopK waits
    rng = np.random.default_rng(0)
    for shift in (0.0, 2.0):
        _check(model, exe, {"x": rng.permutation(np.arange(n, dtype=np.float32) - n / 2 + shift * n / 4)})


def _if_on_data_model(n: int = 2000) -> onnx.ModelProto:
    """y = relu(x) if sum(x) > 0 else -x, for an x too large to specialise on its value."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [vi("t", F, [n])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [n])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)]
    return _model(nodes, [vi("x", F, [n])], [vi("y", F, [n])],
                  [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])


def test_an_if_on_a_computed_condition_takes_each_branch() -> None:
    model = _if_on_data_model()
    exe = hetero.compile(model)
    assert isinstance(exe, StagedExecutable)
    rng = np.random.default_rng(0)
    for shift in (1.0, -1.0, 2.0):
        _check(model, exe, {"x": (rng.standard_normal(2000) + shift).astype(np.float32)})
    assert exe.tail.compiled == 2  # once per value of the condition


def test_an_if_whose_branch_holds_a_host_op_runs_on_the_host() -> None:
    # then: Unique(x) padded back to 4 by a Pad whose pads come from its count.
    then = helper.make_graph(
        [helper.make_node("Unique", ["x"], ["u"], sorted=1),
         helper.make_node("ReduceMax", ["u"], ["t"], keepdims=1)], "then", [], [vi("t", F, [1])])
    other = helper.make_graph([helper.make_node("ReduceMin", ["x"], ["e"], keepdims=1)], "else", [],
                              [vi("e", F, [1])])
    nodes = [helper.make_node("Greater", ["flag", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other),
             helper.make_node("Add", ["y", "x"], ["z"])]
    model = _model(nodes, [vi("x", F, [4]), vi("flag", F, [])], [vi("z", F, [4])],
                   [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    exe = hetero.compile(model)
    x = np.array([3.0, 1.0, 3.0, 2.0], np.float32)
    for flag in (1.0, -1.0):
        _check(model, exe, {"x": x, "flag": np.array(flag, np.float32)})


def test_a_scan_whose_body_holds_a_host_op_runs_on_the_host() -> None:
    # For each row: how many elements are non-zero (NonZero's count), summed into a state.
    body = helper.make_graph(
        [helper.make_node("NonZero", ["row"], ["nz"]),
         helper.make_node("Shape", ["nz"], ["shape"], start=1),
         helper.make_node("Add", ["acc", "shape"], ["acc_out"]),
         helper.make_node("Identity", ["shape"], ["each"])], "body",
        [vi("acc", I64, [1]), vi("row", F, [5])], [vi("acc_out", I64, [1]), vi("each", I64, [1])])
    node = helper.make_node("Scan", ["acc0", "x"], ["total", "counts"], body=body, num_scan_inputs=1)
    model = _model([node], [vi("acc0", I64, [1]), vi("x", F, [3, 5])],
                   [vi("total", I64, [1]), vi("counts", I64, [3, 1])])
    exe = hetero.compile(model)
    x = np.array([[0, 1, 2, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 1, 1]], np.float32)
    _check(model, exe, {"acc0": np.array([10], np.int64), "x": x})


def _doubling_loop(body_nodes, extra_body_inputs=()) -> onnx.ModelProto:
    """Loop while max(s) < 100: s = body(s); every s stacked as a scan output."""
    body = helper.make_graph(
        [*body_nodes,
         helper.make_node("ReduceMax", ["s_out"], ["peak"], keepdims=0),
         helper.make_node("Less", ["peak", "hundred"], ["cond_out"]),
         helper.make_node("Identity", ["s_out"], ["each"])], "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("s", F, [2, 3])],
        [vi("cond_out", B, []), vi("s_out", F, [2, 3]), vi("each", F, [2, 3])],
        [numpy_helper.from_array(np.array(100.0, np.float32), "hundred")])
    node = helper.make_node("Loop", ["", "", "s0"], ["s_final", "all"], body=body)
    return _model([node], [vi("s0", F, [2, 3])], [vi("s_final", F, [2, 3]), vi("all", F, ["T", 2, 3])])


def test_a_while_loop_reads_outer_values_and_stacks_its_scan_outputs() -> None:
    # No trip count: it stops when the data says; the body reads 'bias' from outside.
    model = _doubling_loop([helper.make_node("Mul", ["s", "bias"], ["m"]),
                            helper.make_node("Add", ["m", "one"], ["s_out"])])
    model.graph.input.append(vi("bias", F, [3]))
    model.graph.initializer.append(numpy_helper.from_array(np.array(1.0, np.float32), "one"))
    exe = hetero.compile(model)
    assert isinstance(exe, StagedExecutable) and [s.node.op_type for s in exe.steps] == ["Loop"]
    for bias in ([2.0, 1.5, 3.0], [4.0, 4.0, 4.0]):
        _check(model, exe, {"s0": np.ones((2, 3), np.float32), "bias": np.array(bias, np.float32)})


def test_a_loop_body_is_partitioned_across_two_backends(site) -> None:
    site.install("hetero-toy", "1.0", {"toy": plugin_source("toy_cpu", ops=("Add", "Neg", "Relu"))})
    site.load()
    # Add, Neg on toy_cpu; Tanh on llvm_cpu only; then Relu, Add on toy_cpu again.
    model = _doubling_loop([helper.make_node("Add", ["s", "one"], ["a"]),
                            helper.make_node("Neg", ["a"], ["n"]),
                            helper.make_node("Tanh", ["n"], ["t"]),
                            helper.make_node("Relu", ["t"], ["r"]),
                            helper.make_node("Add", ["a", "r"], ["s_out"])])
    model.graph.initializer.append(numpy_helper.from_array(np.array(3.0, np.float32), "one"))
    exe = hetero.compile(model, targets=["toy_cpu"], passes=[], min_ratio=0.0)
    _check(model, exe, {"s0": np.ones((2, 3), np.float32)})
    body = exe.steps[0].body.exe.report()
    assert "toy_cpu" in body and "llvm_cpu" in body
    assert "region r1" in body or "r1 " in body  # more than one region


def test_a_loop_whose_body_holds_nonzero_stages_its_body() -> None:
    # Each iteration: count the elements above the iteration number (NonZero), add it.
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Greater", ["x", "fi"], ["above"]),
         helper.make_node("NonZero", ["above"], ["nz"]),
         helper.make_node("Shape", ["nz"], ["n"], start=1),
         helper.make_node("Add", ["acc", "n"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("acc", I64, [1])],
        [vi("cond_out", B, []), vi("acc_out", I64, [1])])
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc"], body=body)
    model = _model([node], [vi("x", F, [6]), vi("acc0", I64, [1])], [vi("acc", I64, [1])],
                   [numpy_helper.from_array(np.array(4, np.int64), "M")])
    exe = hetero.compile(model)
    assert [s.node.op_type for s in exe.steps] == ["Loop"]
    x = np.array([0.5, 1.5, 2.5, 3.5, 4.5, -1.0], np.float32)
    _check(model, exe, {"x": x, "acc0": np.array([0], np.int64)})


def test_non_max_suppression_then_gather_matches_onnxruntime() -> None:
    # A detector's post-processing in small: NMS, then the kept boxes and scores.
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "thresh"], ["sel"]),
             helper.make_node("Gather", ["sel", "two"], ["box_index"], axis=1),
             helper.make_node("Squeeze", ["boxes", "zero_axis"], ["boxes2d"]),
             helper.make_node("Gather", ["boxes2d", "box_index"], ["kept"], axis=0),
             helper.make_node("Squeeze", ["scores", "zero_axes2"], ["scores1d"]),
             helper.make_node("Gather", ["scores1d", "box_index"], ["kept_scores"], axis=0)]
    inits = [numpy_helper.from_array(np.array([5], np.int64), "max_out"),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.1], np.float32), "thresh"),
             numpy_helper.from_array(np.array(2, np.int64), "two"),
             numpy_helper.from_array(np.array([0], np.int64), "zero_axis"),
             numpy_helper.from_array(np.array([0, 1], np.int64), "zero_axes2")]
    model = _model(nodes, [vi("boxes", F, [1, 40, 4]), vi("scores", F, [1, 1, 40])],
                   [vi("kept", F, ["k", 4]), vi("kept_scores", F, ["k"])], inits)
    exe = hetero.compile(model)
    for seed in range(2):
        rng = np.random.default_rng(seed)
        corner = rng.uniform(0, 50, (1, 40, 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + rng.uniform(5, 20, (1, 40, 2)).astype(np.float32)], axis=2)
        scores = rng.uniform(0, 1, (1, 1, 40)).astype(np.float32)
        _check(model, exe, {"boxes": boxes, "scores": scores})


def test_compress_and_unique_on_data_run_on_the_host() -> None:
    nodes = [helper.make_node("Greater", ["x", "zero"], ["keep"]),
             helper.make_node("Compress", ["x", "keep"], ["kept"], axis=0),
             helper.make_node("Unique", ["kept"], ["u", "idx", "inv", "counts"], sorted=1),
             helper.make_node("ReduceSum", ["counts"], ["n"], keepdims=0)]
    model = _model(nodes, [vi("x", F, [8])],
                   [vi("u", F, ["u"]), vi("inv", I64, ["k"]), vi("n", I64, [])],
                   [numpy_helper.from_array(np.array(0.0, np.float32), "zero")])
    exe = hetero.compile(model)
    _check(model, exe, {"x": np.array([1, -1, 2, 2, 3, 1, -5, 3], np.float32)})
    _check(model, exe, {"x": np.array([-1, -1, -2, -2, -3, -1, -5, -3], np.float32)})
