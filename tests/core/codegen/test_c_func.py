"""The C function printer: lowered, scheduled and legalised functions of real ops, printed as
C99, compiled by the system C compiler and called through ctypes, compute what the
interpreter computes on the same function, and what the op's reference computes.

Tolerances. Against the interpreter (``run_func`` on the legalised function) every result
is bit-exact except where a libm function is called: the printer's C evaluates each float
operation in its type, in the interpreter's order (an ISO mode contracts no multiply-add;
GCC reorders no float sum without -ffast-math; a parallel loop keeps each element's order),
and integers wrap as numpy's do. ``expf``, ``erff`` and ``tanhf`` of glibc and numpy's own
float32 functions are each within 1-2 ulp of the exact value, so results built from them
differ from the interpreter's by a few float32 ulp (rtol 4e-7 for a Sigmoid or a Softmax
of a few terms); for float16, where the C computes in float and rounds once, by at most one
float16 ulp. Against the op's reference (numpy, pairwise sums) float sums of k terms differ
by about k ulp of the largest partial sum: rtol 1e-5 for the short sums here.
"""

from __future__ import annotations

from collections.abc import Mapping
import ctypes
from pathlib import Path
import shutil
import subprocess

import numpy as np
import pytest

from hetero.core.codegen.c_func import STACK_LIMIT, CFunction, c_source, print_c_func
from hetero.core.ir import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.ir.tir import (
    Barrier, Buffer, Call, Evaluate, For, ForKind, IfThenElse, Load, PrimFunc, Store, Var, const, lt, run_func,
    seq,
)
from hetero.core.ir.tir.legalize import Native, legalize
from hetero.core.lower import lower_node
from hetero.core.exec.reference import run_reference
from hetero.core.schedule import LoopRef, Schedule
from hetero.errors import CodegenError

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc or gcc) on the PATH")

#: Warnings are errors, so the printed C is clean (-Wall -Wextra, ISO C99).
FLAGS = ("-std=c99", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared")


def build(folder: Path, *kernels: CFunction, openmp: bool = False) -> ctypes.CDLL:
    """``kernels`` as one translation unit, compiled into a library in ``folder``, loaded."""
    source = folder / "kernels.c"
    source.write_text(c_source(kernels, "test kernels"))
    library = folder / f"kernels{len(list(folder.glob('*.so')))}.so"
    flags = (*FLAGS, "-fopenmp") if openmp else FLAGS
    done = subprocess.run([CC, *flags, str(source), "-o", str(library), "-lm"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + source.read_text()
    return ctypes.CDLL(str(library))


def call(lib: ctypes.CDLL, kernel: CFunction, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``kernel`` as ``run_func`` runs a function: every parameter by name, copied."""
    copies = [np.array(arrays[b.name], dtype=b.dtype, order="C", copy=True) for b in kernel.params]
    status = getattr(lib, kernel.name)(*(ctypes.c_void_p(a.ctypes.data) for a in copies))
    assert status == 0
    return {b.name: a for b, a in zip(kernel.params, copies)}


def sample(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 3).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)


def one_node(graph: Graph) -> PrimFunc:
    (node,) = graph.nodes
    return lower_node(node)


def params_of(func: PrimFunc, graph: Graph, rng: np.random.Generator,
              feeds: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """An array for every parameter: the graph's constants and ``feeds`` where they name one,
    seeded samples for the other inputs, zeros for the outputs."""
    (node,) = graph.nodes
    names = [v.name for v in node.inputs if v is not None] + [v.name for v in node.outputs]
    arrays = {}
    for b, name in zip(func.params, names):
        value = graph.values[name]
        if value.data is not None:
            arrays[b.name] = np.asarray(value.data)
        elif feeds is not None and name in feeds:
            arrays[b.name] = feeds[name]
        elif value.producer is None:
            arrays[b.name] = sample(b.shape, b.dtype, rng)
        else:
            arrays[b.name] = np.zeros(b.shape, b.dtype)
    return arrays


def check(tmp_path: Path, graph: Graph, rtol: float = 0.0, *, schedule=None, openmp: bool = False,  # noqa: ANN001
          stack_limit: int = STACK_LIMIT, ref_rtol: float | None = 1e-5, feeds=None) -> CFunction:  # noqa: ANN001
    """Lower the graph's one node, schedule it (``schedule(Schedule)``), legalise, print,
    compile and run it; compare with the interpreter (``rtol``, exact at 0) and, unless
    ``ref_rtol`` is None, with the op's reference."""
    func = one_node(graph)
    if schedule is not None:
        sch = Schedule(func)
        schedule(sch)
        func = sch.func
    func = legalize(func, Native())
    kernel = print_c_func(func, "kernel", openmp=openmp, stack_limit=stack_limit)
    arrays = params_of(func, graph, np.random.default_rng(0), feeds)
    got = call(build(tmp_path, kernel, openmp=openmp), kernel, arrays)
    want = run_func(func, arrays)
    out = func.params[-1].name
    if rtol == 0.0:
        np.testing.assert_array_equal(got[out], want[out])
    else:
        np.testing.assert_allclose(got[out], want[out], rtol=rtol, atol=0)
    if ref_rtol is not None:
        (node,) = graph.nodes
        inputs = {v.name: arrays[b.name] for v, b in zip([v for v in node.inputs if v is not None], func.params)
                  if v.data is None}
        reference = run_reference(graph, inputs)[graph.outputs[0].name]
        np.testing.assert_allclose(got[out].astype(np.float64), reference.astype(np.float64), rtol=ref_rtol,
                                   atol=ref_rtol * float(np.abs(reference.astype(np.float64)).max(initial=1.0)))
    return kernel


def graph_of(op: str, shapes: list[tuple[int, ...]], dtype: str = "float32", consts: Mapping[int, np.ndarray] = {},
             **attrs: object) -> Graph:
    b = GraphBuilder(op.lower())
    args = [consts[k] if k in consts else b.input(f"x{k}", s, dtype) for k, s in enumerate(shapes)]
    b.output(getattr(b, op)(*args, name="n", **attrs))
    return b.build()


def test_broadcast_add_is_exact_with_restrict_and_const_parameters(tmp_path: Path) -> None:
    kernel = check(tmp_path, graph_of("Add", [(3, 1, 5), (4, 1)]))
    assert kernel.code.startswith("int kernel(const float* restrict x0, const float* restrict x1, "
                                  "float* restrict n) {")
    assert kernel.prototype == kernel.code.split(" {")[0] + ";"


def test_sigmoid_calls_libm_within_a_few_ulp(tmp_path: Path) -> None:
    kernel = check(tmp_path, graph_of("Sigmoid", [(64,)]), rtol=4e-7)
    assert "expf(" in kernel.code


def test_reduce_mean_sums_in_the_interpreters_order(tmp_path: Path) -> None:
    check(tmp_path, graph_of("ReduceMean", [(4, 6, 5)], axes=[1], keepdims=1))


def test_matmul_parallel_with_openmp_is_exact(tmp_path: Path) -> None:
    def schedule(sch: Schedule) -> None:
        sch.parallel(sch.get_loops(sch.get_block("n"))[0])

    rng = np.random.default_rng(1)
    kernel = check(tmp_path, graph_of("MatMul", [(2, 33, 17), (17, 9)],
                                      consts={1: rng.standard_normal((17, 9)).astype(np.float32)}),
                   schedule=schedule, openmp=True)
    assert kernel.code.count("#pragma omp parallel for") == 1


def test_conv_with_padding_and_stride_is_exact(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    check(tmp_path, graph_of("Conv", [(1, 3, 9, 8), (), ()], consts={1: w, 2: bias}, pads=[1, 0, 1, 2],
                             strides=[2, 1]))


def test_softmax_with_its_intermediates_on_the_heap(tmp_path: Path) -> None:
    kernel = check(tmp_path, graph_of("Softmax", [(3, 40)]), rtol=4e-7, stack_limit=0)
    assert "calloc(" in kernel.code and "free(" in kernel.code and "return hetero_status;" in kernel.code
    on_stack = print_c_func(legalize(one_node(graph_of("Softmax", [(3, 40)])), Native()), "k")
    assert "calloc(" not in on_stack.code and "return 0;" in on_stack.code


def test_heap_allocation_inside_a_parallel_loop_reports_failure_atomically(tmp_path: Path) -> None:
    def schedule(sch: Schedule) -> None:
        sch.parallel(sch.get_loops(sch.get_block("n"))[0])

    kernel = check(tmp_path, graph_of("ReduceMax", [(8, 16)], axes=[1], keepdims=0), schedule=schedule,
                   openmp=True, stack_limit=0)
    assert "#pragma omp atomic write" in kernel.code


@pytest.mark.parametrize("op", ["Add", "Mul", "Sub"])
def test_int8_arithmetic_wraps_as_numpy_does(tmp_path: Path, op: str) -> None:
    check(tmp_path, graph_of(op, [(7, 9), (9,)], "int8"))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # the interpreter's numpy, on NaN
def test_float_to_int8_cast_out_of_range_is_defined(tmp_path: Path) -> None:
    feeds = {"x0": np.array([1e10, -1e10, np.nan, 127.9, -128.9, 3.5, -3.5, 0.0], np.float32)}
    check(tmp_path, graph_of("Cast", [(8,)], to=np.dtype("int8")), feeds=feeds, ref_rtol=None)


def test_integer_floor_division_and_modulo(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    divisor = rng.integers(-9, 9, (6, 5)).astype(np.int32)
    divisor[divisor == 0] = 3
    check(tmp_path, graph_of("Mod", [(6, 5), (6, 5)], "int32", consts={1: divisor}))
    check(tmp_path, graph_of("Div", [(6, 5), (6, 5)], "int32", consts={1: divisor}))


def test_float16_arithmetic_is_exact_and_its_exp_within_one_ulp(tmp_path: Path) -> None:
    check(tmp_path, graph_of("Mul", [(5, 8), (8,)], "float16"), ref_rtol=None)
    rng = np.random.default_rng(4)
    feeds = {"x0": rng.uniform(-4, 4, (64,)).astype(np.float16)}
    check(tmp_path, graph_of("Exp", [(64,)], "float16"), rtol=2.0 ** -10, feeds=feeds, ref_rtol=2.0 ** -10)


def test_bfloat16_conversion_goes_through_a_bitcast_helper(tmp_path: Path) -> None:
    import ml_dtypes

    kernel = check(tmp_path, graph_of("Cast", [(16,)], to=np.dtype(ml_dtypes.bfloat16)), ref_rtol=None)
    assert "memcpy(" in c_source([kernel])


def test_gather_and_where_over_int64_and_bool(tmp_path: Path) -> None:
    table = np.random.default_rng(5).standard_normal((10, 4)).astype(np.float32)
    feeds = {"x1": np.array([[0, 9, -1], [3, -10, 4]], np.int64)}
    b = GraphBuilder("gather")
    b.output(b.Gather(table, b.input("x1", (2, 3), "int64"), axis=0, name="n"))
    check(tmp_path, b.build(), feeds=feeds)
    b = GraphBuilder("where")
    b.output(b.Where(b.input("c", (4, 5), "bool"), b.input("x", (4, 5)), b.input("y", (5,)), name="n"))
    check(tmp_path, b.build())


def test_vectorized_loops_get_ivdep_or_omp_simd(tmp_path: Path) -> None:
    def schedule(sch: Schedule) -> None:
        sch.vectorize(sch.get_loops(sch.get_block("n"))[-1])

    serial = check(tmp_path, graph_of("Relu", [(4, 32)]), schedule=schedule)
    assert "#pragma GCC ivdep" in serial.code and "omp" not in serial.code
    simd = check(tmp_path, graph_of("Relu", [(4, 32)]), schedule=schedule, openmp=True)
    assert "#pragma omp simd" in simd.code


def test_parallel_loops_are_serial_without_openmp_and_only_the_outermost_is_a_region() -> None:
    x, y = Buffer("x", (4, 8), np.dtype(np.float32)), Buffer("y", (4, 8), np.dtype(np.float32))
    i, j = Var("i"), Var("j")
    store = Store(y, (i, j), Load(x, (i, j), x.dtype))
    nest = For(i, 4, For(j, 8, store, ForKind.PARALLEL), ForKind.PARALLEL)
    func = PrimFunc("nest", (x, y), nest)
    assert "#pragma" not in print_c_func(func).code
    assert print_c_func(func, openmp=True).code.count("#pragma omp parallel for") == 1


def test_a_vectorized_loop_reading_another_iterations_store_gets_no_pragma() -> None:
    y = Buffer("y", (9,), np.dtype(np.float32))
    j = Var("j")
    shifted = Store(y, (j,), Load(y, (j + 1,), y.dtype))
    func = PrimFunc("shift", (y,), For(j, 8, shifted, ForKind.VECTORIZED))
    assert "#pragma" not in print_c_func(func).code


def test_unrolled_if_evaluate_and_barrier_statements(tmp_path: Path) -> None:
    x, y = Buffer("x", (6,), np.dtype(np.float32)), Buffer("y", (6,), np.dtype(np.float32))
    i, k = Var("i"), Var("k")
    value = Load(x, (i,), x.dtype)
    body = seq(
        Evaluate(Call("exp", (value,), x.dtype)),
        Barrier("shared"),
        IfThenElse(lt(i, 3), Store(y, (i,), value * const(2.0, np.float32)),
                   Store(y, (i,), value - const(1.0, np.float32))),
    )
    twice = Store(y, (k,), Load(y, (k,), y.dtype) + Load(y, (k,), y.dtype))
    func = PrimFunc("branches", (x, y), seq(For(i, 6, body, ForKind.UNROLLED),
                                            For(k, 6, twice, annotations=(("unroll_factor", 2),))))
    kernel = print_c_func(legalize(func, Native()))
    assert "#pragma GCC unroll 6" in kernel.code and "#pragma GCC unroll 2" in kernel.code
    assert "(void)expf(" in kernel.code and "} else {" in kernel.code
    arrays = {"x": np.arange(6, dtype=np.float32), "y": np.zeros(6, np.float32)}
    got = call(build(tmp_path, kernel), kernel, arrays)
    np.testing.assert_array_equal(got["y"], run_func(func, arrays)["y"])


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")
def test_helpers_shared_by_two_functions_are_defined_once(tmp_path: Path) -> None:
    to_int = legalize(one_node(graph_of("Cast", [(4,)], to=np.dtype("int32"))), Native())
    a, b = print_c_func(to_int, "first"), print_c_func(to_int, "second")
    source = c_source([a, b])
    assert source.count("static inline int32_t hetero_ftoi_i32") == 1
    lib = build(tmp_path, a, b)
    src, dst = (p.name for p in to_int.params)
    arrays = {src: np.array([1.5, -2.5, 1e12, np.nan], np.float32), dst: np.zeros(4, np.int32)}
    want = run_func(to_int, arrays)[dst]
    np.testing.assert_array_equal(call(lib, a, arrays)[dst], want)
    np.testing.assert_array_equal(call(lib, b, arrays)[dst], want)


def test_what_c_cannot_print_is_a_codegen_error() -> None:
    func = one_node(graph_of("Mod", [(4,), (4,)], "int32"))
    with pytest.raises(CodegenError, match="not a primitive operation"):
        print_c_func(func)  # not legalised: floored modulo is not a C operator
    x = Buffer("x", (4,), np.dtype(np.float32))
    i = Var("i")
    bound = For(i, 4, Store(x, (i,), const(0.0, np.float32)), ForKind.THREAD_BINDING, "threadIdx.x")
    with pytest.raises(CodegenError, match="bound to threadIdx.x"):
        print_c_func(PrimFunc("bound", (x,), bound))
    with pytest.raises(CodegenError, match="not a C identifier"):
        print_c_func(PrimFunc("f", (x,), For(i, 4, Store(x, (i,), const(0.0, np.float32)))), "2f")


def test_a_buffer_named_like_a_c_keyword_or_libm_function_is_renamed(tmp_path: Path) -> None:
    x, y = Buffer("restrict", (4,), np.dtype(np.float32)), Buffer("expf", (4,), np.dtype(np.float32))
    i = Var("i")
    func = PrimFunc("f", (x, y), For(i, 4, Store(y, (i,), Call("exp", (Load(x, (i,), x.dtype),), x.dtype))))
    kernel = print_c_func(func, "k")
    assert "const float* restrict restrict_2" in kernel.code and "float* restrict expf_2" in kernel.code
    arrays = {"restrict": np.arange(4, dtype=np.float32), "expf": np.zeros(4, np.float32)}
    got = call(build(tmp_path, kernel), kernel, arrays)
    np.testing.assert_allclose(got["expf"], np.exp(arrays["restrict"]), rtol=4e-7)
