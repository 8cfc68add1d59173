"""Loop kinds reach the machine code, parallel stages run in chunks, and the kernel
runtime guards its inputs; ahead-of-time output for x86_64 and aarch64."""

from __future__ import annotations

import re

import numpy as np
import pytest

from hetero.core.ir.tir import Block, Buffer, For, ForKind, PrimFunc, Store, Var, compute, lower, placeholder
from hetero.errors import CodegenError, InputError
from hetero.plugins.llvm_cpu import (
    AOT_TRIPLES, CompiledKernel, chunks, compile_kernel, emit_assembly, emit_object, host_cpu, host_features,
    host_triple, render,
)
from hetero.plugins.llvm_cpu.kernel import CHUNKS_PER_THREAD, UNIT_CHUNKS_PER_THREAD

RNG = np.random.default_rng(11)


def _axpy(inner: ForKind = ForKind.SERIAL, outer: ForKind = ForKind.SERIAL, rows: int = 64,
          name: str = "axpy") -> PrimFunc:
    """C[i, j] = A[i, j] * B[j] + D[i, j] over a (rows, 16) grid with the given loop kinds."""
    a, b = Buffer("A", (rows, 16), "float32"), Buffer("B", (16,), "float32")
    d, c = Buffer("D", (rows, 16), "float32"), Buffer("C", (rows, 16), "float32")
    i, j = Var("i"), Var("j")
    body = For(i, rows, For(j, 16, Store(c, (i, j), a[i, j] * b[j] + d[i, j]), kind=inner), kind=outer)
    return PrimFunc(name, (a, b, d, c), Block("C", body, c))


def _axpy_inputs(rows: int = 64) -> dict[str, np.ndarray]:
    return {"A": RNG.standard_normal((rows, 16)).astype(np.float32),
            "B": RNG.standard_normal(16).astype(np.float32),
            "D": RNG.standard_normal((rows, 16)).astype(np.float32)}


def _check_axpy(got: np.ndarray, arrays: dict[str, np.ndarray]) -> None:
    product = arrays["A"] * arrays["B"]
    # A fused multiply-add skips the product's rounding: at most eps/2 * |a*b| apart from
    # numpy's two-step result, plus half an ulp of the sum each (eps * |result| covers both).
    bound = np.finfo(np.float32).eps * (np.abs(product) + np.abs(product + arrays["D"]))
    assert np.all(np.abs(got - (product + arrays["D"])) <= bound)


def test_vectorized_loop_becomes_vector_code_with_fma() -> None:
    func = _axpy(inner=ForKind.VECTORIZED, name="axpy_vec")
    assert "llvm.loop.vectorize.enable" in str(render(func).module)
    kernel = CompiledKernel(func)
    assert re.search(r"<(4|8|16) x float>", kernel.llvm_ir)
    features = host_features()
    if host_triple().startswith("x86_64") and features.get("fma"):
        assert re.search(r"\bvfmadd\w*ps\b", kernel.assembly)
    elif host_triple().startswith("aarch64"):
        assert re.search(r"\bfmla\b", kernel.assembly)
    arrays = _axpy_inputs()
    _check_axpy(kernel.run(**arrays)["C"], arrays)


def test_unrolled_loop_is_marked_and_still_correct() -> None:
    func = _axpy(inner=ForKind.UNROLLED, name="axpy_unroll")
    assert "llvm.loop.unroll.full" in str(render(func).module)
    arrays = _axpy_inputs()
    _check_axpy(CompiledKernel(func).run(**arrays)["C"], arrays)


def test_parallel_outer_loop_runs_in_chunks_with_serial_numbers() -> None:
    rows = 30
    parallel = CompiledKernel(_axpy(outer=ForKind.PARALLEL, rows=rows, name="axpy_par"), num_threads=3)
    serial = CompiledKernel(_axpy(rows=rows, name="axpy_ser"))
    arrays = _axpy_inputs(rows)
    out = np.full((rows, 16), np.nan, np.float32)  # any row no chunk covers stays NaN
    parallel(arrays["A"], arrays["B"], arrays["D"], out)
    [(symbol, parts)] = parallel.last_launches
    # CHUNKS_PER_THREAD pieces per thread, which threads claim as they come free.
    assert symbol.startswith("axpy_par") and parts == tuple(chunks(rows, CHUNKS_PER_THREAD * 3))
    assert len(parts) == 12
    np.testing.assert_array_equal(out, serial.run(**arrays)["C"])
    [(_, serial_parts)] = serial.last_launches
    assert serial_parts == ((0, 1),)


def test_a_short_parallel_range_runs_one_iteration_a_chunk() -> None:
    """Up to UNIT_CHUNKS_PER_THREAD iterations a thread, each iteration is a chunk of its
    own (12 rows in 8 chunks would be chunks of 1 and 2 rows, unevenly claimed)."""
    rows = 12
    assert rows <= UNIT_CHUNKS_PER_THREAD * 2 and rows > CHUNKS_PER_THREAD * 2
    kernel = CompiledKernel(_axpy(outer=ForKind.PARALLEL, rows=rows, name="axpy_short"), num_threads=2)
    arrays = _axpy_inputs(rows)
    out = np.full((rows, 16), np.nan, np.float32)
    kernel(arrays["A"], arrays["B"], arrays["D"], out)
    [(_, parts)] = kernel.last_launches
    assert parts == tuple((r, r + 1) for r in range(rows))
    np.testing.assert_array_equal(out, CompiledKernel(_axpy(rows=rows, name="axpy_short_ser")).run(**arrays)["C"])


def test_chunks_cover_the_range_once() -> None:
    for extent, parts in [(10, 3), (2, 8), (1, 1), (17, 4)]:
        cut = chunks(extent, parts)
        assert len(cut) == min(extent, parts)
        assert [i for lo, hi in cut for i in range(lo, hi)] == list(range(extent))


def test_compile_cache_returns_the_same_kernel_for_equal_functions() -> None:
    first, again = _axpy(name="axpy_cached"), _axpy(name="axpy_cached")
    assert first is not again and first == again
    assert compile_kernel(first) is compile_kernel(again)
    assert CompiledKernel(first).module is CompiledKernel(again).module
    assert compile_kernel(_axpy(inner=ForKind.VECTORIZED, name="axpy_cached")) is not compile_kernel(first)


@pytest.mark.parametrize("triple", AOT_TRIPLES)
def test_ahead_of_time_object_and_assembly(triple: str) -> None:
    func = _axpy(inner=ForKind.VECTORIZED, name="axpy_aot")
    obj = emit_object(func, triple)
    assert obj[:4] == b"\x7fELF" and len(obj) > 200
    asm = emit_assembly(func, triple)
    assert re.search(r"^axpy_aot:", asm, re.MULTILINE)
    # Vector FMAs: baseline NEON has fmla; generic x86-64 has SSE only, so mulps/addps.
    assert re.search(r"\bfmla\b" if triple.startswith("aarch64") else r"\bmulps\b", asm)


def test_unknown_triple_is_a_codegen_error() -> None:
    with pytest.raises(CodegenError, match="nonsense-triple"):
        emit_object(_axpy(), "nonsense-triple")


def test_thread_binding_loop_is_a_codegen_error_naming_the_loop() -> None:
    x = Buffer("X", (4,), "float32")
    i = Var("tx")
    func = PrimFunc("gpuish", (x,), Block("X", For(i, 4, Store(x, (i,), x[i] + 1.0),
                                                  kind=ForKind.THREAD_BINDING, thread_axis="threadIdx.x"), x))
    with pytest.raises(CodegenError, match=r"gpuish.*tx.*threadIdx\.x"):
        render(func)


def test_dtype_without_llvm_rendering_is_a_codegen_error() -> None:
    x_t = placeholder((3,), "complex64", "Z")
    y_t = compute((3,), lambda i: x_t[i], "W")
    with pytest.raises(CodegenError, match="complex64"):
        render(lower("cplx", [x_t], [y_t]))


def test_inputs_are_checked_against_parameters() -> None:
    kernel = compile_kernel(_axpy(rows=4, name="axpy_checked"))
    arrays = _axpy_inputs(4)
    with pytest.raises(InputError, match="A must be float32\\[4, 16\\]"):
        kernel.run(**{**arrays, "A": arrays["A"][:2]})
    with pytest.raises(InputError, match="float64"):
        kernel.run(**{**arrays, "B": arrays["B"].astype(np.float64)})
    with pytest.raises(InputError, match="input D is missing"):
        kernel.run(A=arrays["A"], B=arrays["B"])
    with pytest.raises(InputError, match="takes 4 arrays"):
        kernel(arrays["A"], arrays["B"])
    with pytest.raises(InputError, match="shares memory"):
        kernel(arrays["A"], arrays["B"], arrays["D"], arrays["D"])
    with pytest.raises(InputError, match="C-contiguous"):
        kernel(arrays["A"], arrays["B"], arrays["D"], np.zeros((16, 4), np.float32).T)


def test_strided_inputs_are_made_contiguous() -> None:
    kernel = compile_kernel(_axpy(rows=4, name="axpy_strided"))
    arrays = _axpy_inputs(4)
    wide = np.zeros((4, 32), np.float32)
    wide[:, ::2] = arrays["A"]
    got = kernel.run(**{**arrays, "A": wide[:, ::2]})["C"]
    _check_axpy(got, arrays)


def test_host_description_comes_from_llvm() -> None:
    assert host_cpu() and host_triple().count("-") >= 2
    features = host_features()
    assert features and all(isinstance(v, bool) for v in features.values())
