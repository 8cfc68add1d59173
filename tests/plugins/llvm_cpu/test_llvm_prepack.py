"""Constant-only stages (weight packing) run once at compile time on llvm_cpu.

Structure: the compiled kernel has no pack stage and no raw-weight parameter; the part
binds the packed weight, and saves it instead of the raw one. Numbers: the packed
array equals the panel layout derived independently in numpy, the hoisted function
gives bitwise the same result as the unhoisted one under the exact interpreter, and
compiled outputs match numpy within the float32 dot-product bound (Higham 3.1:
k * eps * sum |a| |b|, as in test_llvm_schedules.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.ir.tir import Allocate, Block, run_func, walk
from hetero.core.ir.tir.verify import verify_func
from hetero.core.lower import lower_node
from hetero.plugins.llvm_cpu.backend import LlvmCpuBackend
from hetero.plugins.llvm_cpu.part import LlvmCpuPart
from hetero.plugins.llvm_cpu.prepack import ConstantPacker, buffers_read
from hetero.plugins.llvm_cpu.schedules import default_schedule
from hetero.core.plugin.target import bind

RNG = np.random.default_rng(11)
EPS = float(np.finfo(np.float32).eps)


def _gemm(m: int, k: int, n: int) -> tuple[Graph, np.ndarray, np.ndarray]:
    """Relu(A @ W.T + c) with constant W and c: the classifier of AlexNet and VGG."""
    w = RNG.standard_normal((n, k)).astype(np.float32)
    c = RNG.standard_normal(n).astype(np.float32)
    gb = GraphBuilder("gemm")
    gb.output(gb.Relu(gb.Gemm(gb.input("a", (m, k)), w, c, transB=1)))
    return gb.build(), w, c


def _weight_name(graph: Graph, w: np.ndarray) -> str:
    return next(name for name, v in graph.values.items() if v.data is not None and v.data.shape == w.shape)


def _close(got: np.ndarray, a: np.ndarray, w: np.ndarray, c: np.ndarray) -> None:
    a64, w64 = a.astype(np.float64), w.astype(np.float64)
    want = np.maximum(a64 @ w64.T + c, 0)
    bound = (a.shape[1] + 2) * EPS * (np.abs(a64) @ np.abs(w64.T) + np.abs(c)) + 1e-30
    assert np.all(np.abs(got - want) <= bound)


def test_kernel_reads_the_packed_weight_not_the_raw_one() -> None:
    graph, w, c = _gemm(3, 40, 70)
    part = bind(LlvmCpuBackend(), {"num_threads": 1}).compile(graph)
    (step,) = part.steps
    raw = _weight_name(graph, w)
    assert raw not in step.inputs and raw not in part.constants
    func = step.kernel.func
    assert func is not None
    assert not any(isinstance(s, Allocate) and s.buffer.scope == "global" for s in walk(func.body))
    assert [s.name for s in walk(func.body) if isinstance(s, Block)] == ["s0"], "a stage besides the Gemm"
    packed = [n for n in step.inputs if "/" in n]
    assert len(packed) == 1
    # The tile for 3 rows is 32 lanes wide: panel p, row r, lane l holds W[32p + l, r].
    lanes = part.constants[packed[0]].shape[-1]
    panels = -(-70 // lanes)
    padded = np.zeros((panels * lanes, 40), np.float32)
    padded[:70] = w
    np.testing.assert_array_equal(part.constants[packed[0]],
                                  padded.reshape(panels, lanes, 40).transpose(0, 2, 1))
    a = RNG.standard_normal((3, 40)).astype(np.float32)
    _close(next(iter(part.run({"a": a}).values())), a, w, c)


def test_each_call_runs_only_the_gemm_stage() -> None:
    graph, w, c = _gemm(1, 50, 90)
    part = bind(LlvmCpuBackend(), {"num_threads": 2}).compile(graph)
    a = RNG.standard_normal((1, 50)).astype(np.float32)
    for _ in range(2):
        _close(next(iter(part.run({"a": a}).values())), a, w, c)
        assert len(part.steps[0].kernel.last_launches) == 1


def test_runtime_operands_are_still_packed_per_call() -> None:
    gb = GraphBuilder("mm")
    gb.output(gb.MatMul(gb.input("a", (4, 24)), gb.input("b", (24, 40))))
    part = bind(LlvmCpuBackend(), {"num_threads": 1}).compile(gb.build())
    assert part.steps[0].inputs == ("a", "b")
    a = RNG.standard_normal((4, 24)).astype(np.float32)
    b = RNG.standard_normal((24, 40)).astype(np.float32)
    out = next(iter(part.run({"a": a, "b": b}).values()))
    assert len(part.steps[0].kernel.last_launches) == 2, "the pack stage of b should still run"
    np.testing.assert_allclose(out, a @ b, rtol=1e-5, atol=1e-5)


def test_hoisted_function_computes_what_the_original_did() -> None:
    """Interpreted exactly, before and after hoisting: the same bits."""
    graph, w, c = _gemm(2, 9, 20)
    node = next(n for n in graph.nodes if n.op == "Gemm")
    func = default_schedule(lower_node(node), 1).func
    inputs = tuple(v.name for v in node.inputs)
    packer = ConstantPacker({v.name: v.data for v in node.inputs if v.data is not None}, 1)
    hoisted, names = packer.apply(func, inputs, "g")
    verify_func(hoisted)
    assert len(hoisted.params) == len(func.params)
    assert all(b.name != func.params[1].name for b in buffers_read(hoisted.body))
    a = RNG.standard_normal((2, 9)).astype(np.float32)
    out = func.params[-1]
    blank = np.zeros(out.shape, out.dtype)
    before = run_func(func, {b.name: x for b, x in zip(func.params, (a, w, c, blank))})
    env = {"a": a, **packer.constants}
    after = run_func(hoisted, {**{b.name: env[n] for b, n in zip(hoisted.params, names)}, out.name: blank})
    np.testing.assert_array_equal(after[out.name], before[out.name])


def test_a_weight_two_kernels_pack_alike_is_stored_once() -> None:
    w = RNG.standard_normal((64, 48)).astype(np.float32)
    gb = GraphBuilder("twins")
    shared = gb.constant(w, name="w")
    gb.output(gb.MatMul(gb.input("x", (2, 64)), shared), gb.MatMul(gb.input("y", (2, 64)), shared))
    part = bind(LlvmCpuBackend(), {"num_threads": 1}).compile(gb.build())
    assert part.steps[0].inputs[1] == part.steps[1].inputs[1]
    assert len(part.constants) == 1


def test_save_and_load_keep_the_packed_weights(tmp_path: Path) -> None:
    graph, w, c = _gemm(1, 33, 100)
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)
    part = exe.placements[0].part
    again = LlvmCpuPart.from_artifact(part.artifact)
    assert again.constants.keys() == part.constants.keys()
    assert _weight_name(graph, w) not in again.constants
    exe.save(tmp_path / "gemm.hetero")
    loaded = hetero.load(tmp_path / "gemm.hetero")
    a = RNG.standard_normal((1, 33)).astype(np.float32)
    want = exe.run({"a": a})
    for name, array in loaded.run({"a": a}).items():
        np.testing.assert_array_equal(array, want[name])
    _close(next(iter(want.values())), a, w, c)
