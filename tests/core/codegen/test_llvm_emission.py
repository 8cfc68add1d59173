"""The shared LLVM emission (hetero.core.codegen) on its own, with no plugin: legalised
functions run (through llvmlite's MCJIT) as the interpreter says; non-primitives,
unknown statements and missing math functions are refused by name."""

from __future__ import annotations

import ctypes
import itertools

import llvmlite.binding as llvm
from llvmlite import ir
import numpy as np
import pytest

from hetero.core.codegen import ExprEmitter, StmtEmitter
from hetero.core.ir.tir import Buffer, For, ForKind, PrimFunc, Stmt, Store, Var, call, maximum, run_func
from hetero.core.ir.tir.expr import binary, cast
from hetero.core.ir.tir.legalize import Native, legalize
from hetero.errors import CodegenError


def _emit(func: PrimFunc, native: Native = Native()) -> ir.Module:
    """``void @f(ptr ... params)`` running ``func``'s body, emitted with the default hooks."""
    module = ir.Module(name=func.name)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * len(func.params)), "f")
    em = ExprEmitter(module, f"func {func.name}", native)
    em.pointers = dict(zip(func.params, fn.args))
    emitter = StmtEmitter(em)
    emitter.begin_function(fn)
    emitter.stmt(func.body)
    emitter.end_function()
    return module


def _run_jit(module: ir.Module, arrays: list[np.ndarray]) -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # The host's features, so that float16 conversions are instructions, not runtime calls.
    target = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    engine = llvm.create_mcjit_compiler(parsed, target)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * len(arrays)))(engine.get_function_address("f"))
    fn(*(a.ctypes.data for a in arrays))


def _elementwise(op: str, dtype: str, n: int) -> PrimFunc:
    a, b, y = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype), Buffer("Y", (n,), dtype)
    i = Var("i")
    return PrimFunc("f", (a, b, y), For(i, n, Store(y, (i,), binary(op, a[i], b[i]))))


@pytest.mark.parametrize("op", ["div", "floordiv", "mod"])
def test_legalised_integer_division_runs_as_interpreted(op: str) -> None:
    edges = [-7, 7, 0, -1, 1, 3, -3, 2**31 - 1, -2**31]
    a, b = (np.array(v, np.int32) for v in zip(*itertools.product(edges, edges)))
    func = _elementwise(op, "int32", a.size)
    want = run_func(func, {"A": a, "B": b, "Y": np.zeros_like(a)})["Y"]
    got = np.zeros_like(a)
    _run_jit(_emit(legalize(func)), [a, b, got])
    np.testing.assert_array_equal(got, want)


def test_nan_propagating_max_without_native_minmax() -> None:
    values = [1.0, -2.0, np.nan, 0.5, np.inf]
    a, b = (np.array(v, np.float32) for v in zip(*itertools.product(values, values)))
    n = a.size
    x, y, out = Buffer("A", (n,), "float32"), Buffer("B", (n,), "float32"), Buffer("Y", (n,), "float32")
    i = Var("i")
    func = PrimFunc("f", (x, y, out), For(i, n, Store(out, (i,), maximum(x[i], y[i]))))
    got = np.zeros_like(a)
    _run_jit(_emit(legalize(func)), [a, b, got])
    np.testing.assert_array_equal(got, np.maximum(a, b))


def test_unlegalised_operations_are_refused_by_name() -> None:
    with pytest.raises(CodegenError, match="floordiv of int64 is not a primitive"):
        _emit(_elementwise("floordiv", "int64", 4))
    with pytest.raises(CodegenError, match="max of float32 is not a primitive"):
        _emit(_elementwise("max", "float32", 4))
    # Declared native, float max is a primitive (llvm.maximum).
    assert "llvm.maximum.f32" in str(_emit(_elementwise("max", "float32", 4), Native(ieee_minmax=True)))


def test_missing_math_function_and_statement_are_refused_by_name() -> None:
    x, y = Buffer("X", (4,), "float32"), Buffer("Y", (4,), "float32")
    i = Var("i")
    func = PrimFunc("f", (x, y), For(i, 4, Store(y, (i,), call("tanh", x[i]))))
    with pytest.raises(CodegenError, match="intrinsic tanh of float32"):
        _emit(func)

    class Fence(Stmt):
        pass

    with pytest.raises(CodegenError, match="cannot render a Fence statement"):
        _emit(PrimFunc("g", (x,), Fence()))
    bound = PrimFunc("h", (x, y), For(i, 4, Store(y, (i,), x[i]), ForKind.THREAD_BINDING, "threadIdx.x"))
    with pytest.raises(CodegenError, match="bound to threadIdx.x"):
        _emit(bound)


def test_casts_and_loops_emit_primitives() -> None:
    n = 8
    x, y = Buffer("X", (n,), "float64"), Buffer("Y", (n,), "float16")
    i = Var("i")
    func = PrimFunc("f", (x, y), For(i, n, Store(y, (i,), cast(x[i], "float16"))))
    data = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 65520.0, -0.0, 3.5, np.nan, 1e-8, 2.0 ** -25, 7.0])
    got = np.zeros(n, np.float16)
    _run_jit(_emit(legalize(func)), [data, got])
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, data.astype(np.float16))


def test_shared_operands_are_emitted_once() -> None:
    """Legalised floored divisions name their operands several times; nested twelve deep,
    each quotient is still one ``sdiv`` (a tree walk would emit thousands)."""
    i, n = Var("i"), Buffer("N", (1,), "int64")
    e = i
    for k in range(12):
        e = binary("floordiv", e, n[0]) + k
    out = Buffer("Y", (4,), "int64")
    func = PrimFunc("f", (n, out), For(i, 4, Store(out, (i,), e)))
    text = str(_emit(legalize(func)))
    assert text.count(" sdiv ") == 12 and text.count(" srem ") == 12
    got = np.zeros(4, np.int64)
    divisor = np.array([-3], np.int64)
    _run_jit(_emit(legalize(func)), [divisor, got])
    np.testing.assert_array_equal(got, run_func(func, {"N": divisor, "Y": np.zeros(4, np.int64)})["Y"])
