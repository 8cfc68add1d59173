"""The llvm_cpu backend as a plugin: discovery, compile, fusion, kernel sharing, save/load, dumps."""

from __future__ import annotations

from pathlib import Path
import re

import numpy as np
import pytest

import hetero
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.core.parts import STAGES
from hetero.core.plugin.manager import get_backend
from hetero.plugins.llvm_cpu import jit
from hetero.plugins.llvm_cpu.backend import LlvmCpuBackend
from hetero.core.plugin.target import bind


def conv_block() -> Graph:
    rng = np.random.default_rng(0)
    b = GraphBuilder("block")
    x = b.input("x", (1, 8, 10, 10))
    conv = b.Conv(x, rng.standard_normal((8, 8, 3, 3)).astype(np.float32),
                  rng.standard_normal(8).astype(np.float32), pads=(1, 1, 1, 1), name="conv")
    y = b.Relu(b.Add(conv, x, name="residual"), name="relu")
    left, right = b.Split(y, axis=1, split=(3, 5), name="split")
    b.output(b.MaxPool(left, kernel_shape=(2, 2), strides=(2, 2), name="pool"), right, x)
    return b.build()


def test_llvm_cpu_is_found_through_its_entry_point() -> None:
    backend = get_backend("llvm_cpu")
    assert isinstance(backend, LlvmCpuBackend)
    # Every canonical op, hetero's int8 ops included: it is the fallback for every region.
    assert backend.supported_ops == set(hetero.core.ir.op_names())
    assert INTEGER_OPS <= backend.supported_ops


def test_compiled_graph_matches_the_reference() -> None:
    g = conv_block()
    exe = hetero.compile(g, targets=["llvm_cpu"])
    x = np.random.default_rng(1).standard_normal((1, 8, 10, 10)).astype(np.float32)
    ours, ref = exe.run({"x": x}), hetero.run_reference(g, {"x": x})
    assert set(ours) == set(ref) == {"pool", "split:1", "x"}
    for name in ref:
        # A 72-term float32 dot product per output: a few ulps of its magnitude apart.
        np.testing.assert_allclose(ours[name], ref[name], rtol=1e-5, atol=1e-5)


def test_epilogues_are_fused_into_their_anchor() -> None:
    # In the layout as imported: where the host's vector holds 8 float32 lanes the blocked
    # layout takes this 8-channel Conv and adds its conversions as steps of their own.
    exe = hetero.compile(conv_block(), targets=["llvm_cpu"], layout="nchw")
    names = [step.name for step in exe.placements[0].part.steps]
    assert names == ["conv (Conv+Add+Relu)", "split (Split)", "pool (MaxPool)"]


def test_identical_kernels_compile_once() -> None:
    b = GraphBuilder("twins")
    x = b.input("x", (4, 16))
    y = b.input("y", (4, 16))
    b.output(b.Tanh(x, name="first"), b.Tanh(y, name="second"))
    steps = hetero.compile(b.build(), targets=["llvm_cpu"]).placements[0].part.steps
    assert steps[0].kernel is steps[1].kernel


def test_saved_executable_loads_without_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    g = conv_block()
    exe = hetero.compile(g, targets=["llvm_cpu"])
    exe.save(tmp_path / "block.hetero")

    def no_compiling(func: object) -> None:
        raise AssertionError("hetero.load compiled a kernel")

    monkeypatch.setattr(jit, "_compile", no_compiling)
    again = hetero.load(tmp_path / "block.hetero")
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 10)).astype(np.float32)
    for name, array in exe.run({"x": x}).items():
        np.testing.assert_array_equal(again.run({"x": x})[name], array)


def test_dump_writes_every_stage(tmp_path: Path) -> None:
    hetero.compile(conv_block(), targets=["llvm_cpu"], dump=tmp_path)
    stages = tmp_path / "llvm_cpu"
    assert sorted(p.name for p in stages.iterdir()) == sorted(STAGES)
    assert "Relu(%residual" in (stages / "graph" / "conv.txt").read_text()  # the fused group, node by node
    assert "func conv(" in (stages / "tir" / "conv.txt").read_text()
    assert "func conv(" in (stages / "scheduled" / "conv.txt").read_text()
    assert "define" in (stages / "code" / "conv.ll").read_text()
    asm = (stages / "code" / "conv.s").read_text()
    assert re.search(r"^k_\w+:$", asm, re.MULTILINE)  # the kernel's label
    assert "iterations" in (stages / "report" / "conv.txt").read_text()
    assert "Conv(%x" in (tmp_path / "graph.txt").read_text()


def test_report_names_kernels_by_node_and_ops() -> None:
    exe = hetero.compile(conv_block(), targets=["llvm_cpu"], layout="nchw")
    exe.run({"x": np.zeros((1, 8, 10, 10), np.float32)})
    assert "conv (Conv+Add+Relu)" in exe.report()


def test_dump_adds_ahead_of_time_code_for_another_target(tmp_path: Path) -> None:
    hetero.compile(conv_block(), targets=["llvm_cpu"], dump=tmp_path, aot="aarch64-unknown-linux-gnu")
    code = tmp_path / "llvm_cpu" / "code"
    assert (code / "conv.aot.o").read_bytes()[:4] == b"\x7fELF"
    assert "fmla" in (code / "conv.aot.s").read_text() or "fmul" in (code / "conv.aot.s").read_text()


def test_outputs_computed_by_no_node_still_come_out(tmp_path: Path) -> None:
    g = Graph("folded")
    x = g.add_input("x", (2, 3), "float32")
    g.set_outputs([g.add_constant(np.array([2, 3], np.int64), "shape"), x])
    exe = hetero.compile(g, targets=["llvm_cpu"])
    data = np.ones((2, 3), np.float32)
    exe.save(tmp_path / "f.hetero")
    for candidate in (exe, hetero.load(tmp_path / "f.hetero")):
        out = candidate.run({"x": data})
        np.testing.assert_array_equal(out["shape"], [2, 3])
        np.testing.assert_array_equal(out["x"], data)


def _reshape_chain() -> Graph:
    """Relu, Reshape of its result, Relu again; and a Reshape of the input itself."""
    g = Graph("views")
    x = g.add_input("x", (2, 6), "float32")
    r = g.add_node("Relu", [x]).output
    flat = g.add_node("Reshape", [r], {"shape": [3, 4]}).output
    direct = g.add_node("Reshape", [x], {"shape": [12]}).output
    g.set_outputs([g.add_node("Neg", [flat]).output, direct])
    return g


def test_a_reshape_of_an_array_the_part_made_is_a_view_not_a_kernel() -> None:
    part = bind(LlvmCpuBackend()).compile(_reshape_chain())
    reshapes = [s for s in part.steps if "Reshape" in s.name]
    # The Reshape of Relu's fresh output is a view; the one of the caller's input copies,
    # so no output shares memory with an array the caller holds.
    assert sorted(s.kernel is None for s in reshapes) == [False, True]
    x = np.arange(12, dtype=np.float32).reshape(2, 6) - 6
    out = part.run({"x": x})
    assert not np.may_share_memory(out[part.outputs[1]], x)
    np.testing.assert_array_equal(out[part.outputs[0]], -np.maximum(x, 0).reshape(3, 4))
    loaded = LlvmCpuBackend().load_artifact(part.artifact)
    assert [s.kernel is None for s in loaded.steps] == [s.kernel is None for s in part.steps]
    np.testing.assert_array_equal(loaded.run({"x": x})[part.outputs[0]], out[part.outputs[0]])


@pytest.mark.parametrize("shape, perm", [((3, 5), (1, 0)), ((8, 8, 4), (2, 0, 1)), ((4, 6, 5), (1, 0, 2))])
def test_a_transposed_constant_is_read_in_its_new_order(shape, perm) -> None:
    """T5's and Swin's relative-position bias: Add(x, Transpose(initializer)) from ONNX,
    where the importer folds the Transpose; llvm_cpu once read the folded constant in the
    initializer's order."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)
    table = rng.standard_normal(shape).astype(np.float32)
    out = [shape[p] for p in perm]
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["table"], ["t"], perm=list(perm)), helper.make_node("Add", ["x", "t"], ["y"])],
        "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, out)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], [numpy_helper.from_array(table, "table")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal(out).astype(np.float32)
    got = hetero.compile(model, targets=["llvm_cpu"]).run({"x": x})["y"]
    np.testing.assert_array_equal(got, x + table.transpose(perm))
