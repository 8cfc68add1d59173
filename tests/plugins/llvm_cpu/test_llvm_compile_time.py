"""What makes llvm_cpu compile fast keeps its numbers: equal kernels compile once, weight
packing compiles quickly to the same bytes, a parallel compile makes the serial machine
code, and a load from the compile cache compiles nothing.

None of these tests reads a clock: they check what was compiled (the JIT's shared
modules, the phases :mod:`hetero.core.timing` recorded) and what it computes.
"""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper
import pytest

import hetero
from hetero.core import timing
from hetero.core.exec.reference import run_reference
from hetero.core.ir.builder import GraphBuilder
from hetero.core.ir.tir import Block, Buffer, For, ForKind, PrimFunc, Store, Var
from hetero.core.lower import lower_node
from hetero.errors import OptionError
from hetero.plugins.llvm_cpu import CompiledKernel, render
from hetero.plugins.llvm_cpu.jit import (
    JOBS_ENV, MIN_PARALLEL, OWNER, RUNS_ONCE, compile_all, compile_workers, jit_compile, structural_key,
)
from hetero.plugins.llvm_cpu.target import host_target_machine, optimise, unrolls

RNG = np.random.default_rng(5)
EPS = float(np.finfo(np.float32).eps)


def _transpose(rows: int, cols: int, name: str = "transpose", loops: tuple[str, str] = ("i", "j"),
               attrs: tuple[tuple[str, object], ...] = ()) -> PrimFunc:
    """T[j, i] = A[i, j], the inner loop vectorized: a pure copy, so every build of it
    must give the same bits."""
    a, t = Buffer("A", (rows, cols), "float32"), Buffer("T", (cols, rows), "float32")
    i, j = Var(loops[0]), Var(loops[1])
    body = For(i, rows, For(j, cols, Store(t, (j, i), a[i, j]), kind=ForKind.VECTORIZED))
    return PrimFunc(name, (a, t), Block("T", body, t), attrs)


def test_functions_equal_up_to_names_share_one_compile() -> None:
    first = _transpose(13, 24, "first", ("i", "j"))
    renamed = _transpose(13, 24, "second", ("row", "col"))
    other = _transpose(13, 25, "first", ("i", "j"))
    assert structural_key(first) == structural_key(renamed) != structural_key(other)
    assert jit_compile(first) is jit_compile(renamed)
    a = RNG.standard_normal((13, 24)).astype(np.float32)
    for func in (first, renamed):
        np.testing.assert_array_equal(CompiledKernel(func).run(A=a)["T"], a.T)


def test_a_variable_renamed_onto_another_is_a_different_function() -> None:
    # T[j, i] = A[i, j] and T[i, i] = A[i, i] differ only in names, but not injectively:
    # the key must tell them apart.
    a, t = Buffer("A", (8, 8), "float32"), Buffer("T", (8, 8), "float32")
    i, j = Var("i"), Var("j")
    diagonal = PrimFunc("d", (a, t), Block("T", For(i, 8, For(j, 8, Store(t, (i, i), a[i, i]))), t))
    assert structural_key(diagonal) != structural_key(_transpose(8, 8))


def _negate(rows: int, cols: int, name: str, attrs: tuple[tuple[str, object], ...] = ()) -> PrimFunc:
    """C[i, j] = -A[i, j], contiguous, so that O3 vectorizes it; exact in any build."""
    a, c = Buffer("A", (rows, cols), "float32"), Buffer("C", (rows, cols), "float32")
    i, j = Var("i"), Var("j")
    body = For(i, rows, For(j, cols, Store(c, (i, j), -a[i, j]), kind=ForKind.VECTORIZED))
    return PrimFunc(name, (a, c), Block("C", body, c), attrs)


def _conv_model(folder: Path, weights: list[np.ndarray]) -> Path:
    """Two convolutions of the same shapes and attributes (weights ``weights``), each
    with a Relu: lowering names their loops after different values."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 10, 10])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 8, 10, 10])
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["y"])]
    graph = helper.make_graph(nodes, "two_convs", [x], [y],
                              [numpy_helper.from_array(w, f"w{k}") for k, w in enumerate(weights)])
    folder.mkdir(exist_ok=True)
    path = folder / "two_convs.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


WEIGHTS = [RNG.standard_normal((8, 8, 3, 3)).astype(np.float32) for _ in range(2)]
INPUTS = {"x": RNG.standard_normal((1, 8, 10, 10)).astype(np.float32)}
TAPS = 8 * 3 * 3  # terms of each output's dot product


def _check_conv_model(tmp_path: Path, got: np.ndarray) -> None:
    """Within the float32 bound of two dot products of TAPS terms in a row: each within
    gamma * sum |a||b| (Higham 3.1, gamma = TAPS * eps), the first one's error carried
    through the second's weights; to first order 2 * gamma times the network run on
    absolute values (relu is the identity there)."""
    want = run_reference(hetero.load_onnx(str(_conv_model(tmp_path / "ref", WEIGHTS))), INPUTS)["y"]
    absolute = _conv_model(tmp_path / "abs", [np.abs(w) for w in WEIGHTS])
    magnitude = run_reference(hetero.load_onnx(str(absolute)), {"x": np.abs(INPUTS["x"])})["y"]
    assert np.all(np.abs(got - want) <= 2 * TAPS * EPS * magnitude.astype(np.float64) + 1e-30)


def test_equal_convolutions_of_a_model_compile_once(tmp_path: Path) -> None:
    exe = hetero.compile(str(_conv_model(tmp_path, WEIGHTS)), targets=["llvm_cpu"], num_threads=1)
    steps = [s for p in exe.placements for s in p.part.steps if s.kernel is not None and "Conv" in s.name]
    assert len(steps) == 2
    assert steps[0].kernel.module is steps[1].kernel.module
    _check_conv_model(tmp_path, exe.run(INPUTS)["y"])


def test_code_that_runs_once_skips_the_pipeline_and_computes_the_same_bits() -> None:
    full, quick = _negate(7, 32, "full"), _negate(7, 32, "quick", ((RUNS_ONCE, True),))
    assert jit_compile(full) is not jit_compile(quick)
    # O3 vectorizes the loop; the quick build is the rendered IR, one float at a time.
    assert "x float>" in jit_compile(full).llvm_ir and "x float>" not in jit_compile(quick).llvm_ir
    a = RNG.standard_normal((7, 32)).astype(np.float32)
    got = CompiledKernel(quick).run(A=a)["C"]
    np.testing.assert_array_equal(got, -a)
    np.testing.assert_array_equal(CompiledKernel(full).run(A=a)["C"], got)


def test_llvm_unrolls_only_kernels_that_reduce() -> None:
    gb = GraphBuilder("two")
    x = gb.input("x", (4, 16))
    gb.output(gb.Relu(x))
    gb.output(gb.ReduceSum(x, axes=[1]))
    relu, reduce = gb.build().nodes
    assert not unrolls(lower_node(relu))
    assert unrolls(lower_node(reduce))
    # A stage written as statements declares no iterators: nothing says it folds nothing.
    assert unrolls(_negate(2, 16, "neg"))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork()")
def test_a_parallel_compile_makes_the_serial_machine_code() -> None:
    # Shapes no other test compiles, so the cache holds none of them yet.
    funcs = [_transpose(3, 40 + k, f"par{k}") for k in range(MIN_PARALLEL + 1)]
    with timing.recording() as times:
        compile_all(funcs, 2)
    assert any("2 processes" in name for owner, name in times.seconds if owner == OWNER)
    machine = host_target_machine()
    for func in funcs:
        serial = machine.emit_object(optimise(render(func).module, machine))
        assert jit_compile(func).object_code == serial
    a = RNG.standard_normal((3, 40)).astype(np.float32)
    np.testing.assert_array_equal(CompiledKernel(funcs[0]).run(A=a)["T"], a.T)


def test_compile_jobs_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOBS_ENV, "3")
    assert compile_workers(2) == 3
    monkeypatch.setenv(JOBS_ENV, "none")
    with pytest.raises(OptionError, match=JOBS_ENV):
        compile_workers(2)
    monkeypatch.delenv(JOBS_ENV)
    assert compile_workers(2) == 2


def test_a_load_from_the_compile_cache_compiles_nothing(tmp_path: Path) -> None:
    # Imported afresh from the file each time, so both compiles key the same subgraph.
    path, cache = _conv_model(tmp_path, WEIGHTS), tmp_path / "cache"
    first = hetero.compile(str(path), targets=["llvm_cpu"], num_threads=1, cache=str(cache))
    with timing.recording() as times:
        again = hetero.compile(str(path), targets=["llvm_cpu"], num_threads=1, cache=str(cache))
    phases = {name for owner, name in times.seconds if owner == OWNER}
    assert not phases & {"lower", "schedule", "render LLVM IR", "LLVM parse + O3"}, phases
    got = again.run(INPUTS)["y"]
    np.testing.assert_array_equal(got, first.run(INPUTS)["y"])
    _check_conv_model(tmp_path, got)


def test_a_compile_reports_its_phases_under_the_backend() -> None:
    a = RNG.standard_normal((4, 6)).astype(np.float32)
    gb = GraphBuilder("tanh_model")
    gb.output(gb.Tanh(gb.input("a", (4, 6))))
    with timing.recording() as times:
        exe = hetero.compile(gb.build(), targets=["llvm_cpu"], num_threads=1)
    phases = {name for owner, name in times.seconds if owner == OWNER}
    assert {"graph passes", "lower", "schedule", "plan arena"} <= phases
    assert ("hetero", "partition") in times.seconds
    got = next(iter(exe.run({"a": a}).values()))
    # tanh through libm or a polynomial: a few ulps of float32.
    np.testing.assert_allclose(got, np.tanh(a), rtol=8 * EPS, atol=8 * EPS)
