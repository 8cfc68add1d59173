"""A fused group runs where its last operand is ready, not where its anchor was.

An epilogue's other operand (a residual branch, an attention mask) may be produced
after the anchor in a valid topological order. These graphs put that producer
between the anchor and the epilogue; before fused groups were gathered at their last
member, llvm_cpu ran the group at the anchor's place and failed with ``KeyError``.
Numbers are checked against onnxruntime on the same ONNX model.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import pytest
from models import tiny_model
from oracle import run_model

import hetero

RNG = np.random.default_rng(0)


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, ...]],
           weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    return tiny_model(nodes, {n: (TensorProto.FLOAT, list(s)) for n, s in inputs.items()}, ["out"],
                      [numpy_helper.from_array(a, n) for n, a in weights.items()])


def _w(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def matmul_then_side_branch() -> onnx.ModelProto:
    """The smallest case: MatMul(x, W) -> mm; Relu(y) -> r; Add(mm, r)."""
    return _model([helper.make_node("MatMul", ["x", "W"], ["mm"]),
                   helper.make_node("Relu", ["y"], ["r"]),
                   helper.make_node("Add", ["mm", "r"], ["out"])],
                  {"x": (4, 8), "y": (4, 6)}, {"W": _w(8, 6)})


def anchor_then_side_branch(anchor: str, side: str) -> onnx.ModelProto:
    """A Conv or pool anchor whose Add joins a Relu or Slice branch produced after it."""
    attrs = {"Conv": {"pads": [1, 1, 1, 1]}, "MaxPool": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
             "AveragePool": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}}[anchor]
    first = helper.make_node(anchor, ["x", "W"] if anchor == "Conv" else ["x"], ["a"], **attrs)
    if side == "Relu":
        branch = [helper.make_node("Relu", ["y"], ["s"])]
    else:
        branch = [helper.make_node("Slice", ["y", "starts", "ends", "axes"], ["s"])]
    nodes = [first, *branch, helper.make_node("Add", ["a", "s"], ["out"])]
    weights = {"W": _w(4, 4, 3, 3)} if anchor == "Conv" else {}
    weights.update(starts=np.array([1], np.int64), ends=np.array([5], np.int64),
                   axes=np.array([1], np.int64))
    y_shape = (1, 4, 6, 6) if side == "Relu" else (1, 6, 6, 6)
    return _model(nodes, {"x": (1, 4, 6, 6), "y": y_shape}, weights)


def diamond(mul_on_conv_side: bool) -> onnx.ModelProto:
    """A Conv chain and a Softmax branch of the same input joined by an Add, with a Mul
    on the Conv side or on the Softmax side; the Conv comes first in node order."""
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Softmax", ["x"], ["s"], axis=1)]
    if mul_on_conv_side:
        nodes += [helper.make_node("Mul", ["c", "k"], ["cm"]), helper.make_node("Add", ["cm", "s"], ["out"])]
    else:
        nodes += [helper.make_node("Mul", ["s", "k"], ["sm"]), helper.make_node("Add", ["c", "sm"], ["out"])]
    return _model(nodes, {"x": (1, 8, 8, 8)},
                  {"W": _w(8, 8, 3, 3) * 0.2, "B": _w(8), "k": np.float32(1.5) * np.ones((1, 8, 1, 1), np.float32)})


def _inputs(model: onnx.ModelProto, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}


CASES = {
    "matmul+relu": matmul_then_side_branch,
    **{f"{a.lower()}+{s.lower()}": (lambda a=a, s=s: anchor_then_side_branch(a, s))
       for a in ("Conv", "MaxPool", "AveragePool") for s in ("Relu", "Slice")},
    "diamond-mul-conv-side": lambda: diamond(True),
    "diamond-mul-softmax-side": lambda: diamond(False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_group_with_a_later_operand_runs_on_llvm_cpu(case: str) -> None:
    model = CASES[case]()
    # In the layout as imported: on a host of 8 float32 lanes the blocked layout takes the
    # diamonds' 8-channel Conv, and the conversion to the Softmax side's layout lands in
    # the group and dissolves it; here the fusion across a later operand is what is tested.
    exe = hetero.compile(model, targets=["llvm_cpu"], layout="nchw")
    feeds = _inputs(model)
    ours = exe.run(feeds)["out"]
    # Sums of at most 72 float32 products (the Conv), then one add: a few ulps of the magnitude.
    np.testing.assert_allclose(ours, run_model(model, feeds)[0], rtol=1e-5, atol=1e-5)
    # The epilogue was fused, so the case tests what it claims to.
    assert any("+Add" in name for name, _ in exe.placements[0].part.last_profile)


@pytest.mark.parametrize("mul_on_conv_side", [True, False], ids=["mul-conv-side", "mul-softmax-side"])
def test_diamond_runs_across_npu_sim_and_llvm_cpu(mul_on_conv_side: bool) -> None:
    model = diamond(mul_on_conv_side)
    samples = [_inputs(model, seed) for seed in range(4)]
    exe = hetero.compile(model, targets=["npu_sim", "llvm_cpu"], quantize=samples)
    assert {p.backend for p in exe.placements} == {"npu_sim", "llvm_cpu"}
    feeds = _inputs(model, seed=9)
    ours = exe.run(feeds)["out"].ravel()
    ref = run_model(model, feeds)[0].ravel()
    # int8 end to end against the float model: the bar the npu_sim model tests use.
    cosine = float(ours @ ref / (np.linalg.norm(ours) * np.linalg.norm(ref)))
    assert cosine >= 0.99
