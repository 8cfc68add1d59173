"""The scope and intrinsic registries: a plugin's scope verifies once registered, an
unregistered one is named with how to register it; intrinsics carry arity, dtype rule
and a reference the interpreter runs."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir.tir import Allocate, Buffer, For, PrimFunc, Store, Var, func_problems, run_func, seq
from hetero.core.ir.tir import buffer as buffer_module
from hetero.core.ir.tir import expr as expr_module
from hetero.core.ir.tir import registry
from hetero.core.ir.tir.compute import compute, lower, placeholder
from hetero.core.ir.tir.expr import Call, call
from hetero.core.schedule import Schedule
from hetero.errors import PluginError, VerificationError, did_you_mean

A = Buffer("A", (4,), "float32")
B = Buffer("B", (4,), "float32")


def through(scope: str) -> PrimFunc:
    t = Buffer("T", (4,), "float32", scope)
    i, j = Var("i"), Var("j")
    return PrimFunc("f", (A, B), Allocate(t, seq(For(i, 4, Store(t, (i,), A[i])),
                                                 For(j, 4, Store(B, (j,), t[j] + 1.0)))))


def test_a_plugin_scope_verifies_once_registered() -> None:
    (problem,) = func_problems(through("test_bram"))
    # A did-you-mean names 'bram' where the fpga_hls plugin has registered it in this process.
    hint = did_you_mean("test_bram", registry.SCOPES)
    assert problem == (f"func f: allocation T: unknown memory scope 'test_bram'{hint}; known: "
                       f"{', '.join(registry.SCOPES)} (a plugin adds one with "
                       "hetero.core.ir.tir.registry.register_scope('test_bram', ...))")
    registry.register_scope("test_bram", "an FPGA kernel's block RAM (tests)")
    assert "test_bram" in registry.SCOPES and "test_bram" in buffer_module.SCOPES
    assert func_problems(through("test_bram")) == []
    out = run_func(through("test_bram"), {"A": np.arange(4, dtype=np.float32), "B": np.zeros(4, np.float32)})
    np.testing.assert_array_equal(out["B"], np.arange(4) + 1.0)


def test_schedules_stage_through_a_registered_scope() -> None:
    registry.register_scope("test_uram", "an FPGA's UltraRAM (tests)")
    x = placeholder((4,), "float32", "X")
    y = compute((4,), lambda i: x[i] * 2.0, "Y")
    sch = Schedule(lower("double", [x], [y]))
    sch.cache_read(sch.get_block("Y"), "X", "test_uram")
    assert "alloc X_test_uram: f32[4] test_uram {" in str(sch.func)
    assert func_problems(sch.func) == []


def test_the_built_ins_are_registered_and_the_old_names_are_views() -> None:
    assert list(buffer_module.SCOPES)[:3] == ["global", "shared", "local"]
    assert registry.scope("local").per_thread and not registry.scope("shared").per_thread
    for name in ("exp", "erf", "bitcast", "fence", "round_even"):
        assert name in expr_module.INTRINSICS
    assert expr_module.INTRINSICS is registry.INTRINSICS and buffer_module.SCOPES is registry.SCOPES


def test_registering_again_is_a_no_op_and_redefining_is_refused() -> None:
    registry.register_scope("test_hbm", "high-bandwidth memory (tests)")
    registry.register_scope("test_hbm", "high-bandwidth memory (tests)")
    with pytest.raises(PluginError, match="memory scope 'test_hbm' is already registered"):
        registry.register_scope("test_hbm", "something else")
    with pytest.raises(PluginError, match="level must be 'block' or 'thread'"):
        registry.register_thread_axis("test.lane", "warp")


def test_a_registered_intrinsic_builds_verifies_and_runs() -> None:
    registry.register_intrinsic("test_fma", 3, lambda a, b, c: a * b + c, doc="a * b + c (tests)")
    i = Var("i")
    func = PrimFunc("fma", (A, B), For(i, 4, Store(B, (i,), call("test_fma", A[i], A[i], 1.0))))
    assert func_problems(func) == []
    a = np.array([1, 2, 3, 4], np.float32)
    np.testing.assert_array_equal(run_func(func, {"A": a, "B": np.zeros(4, np.float32)})["B"], a * a + 1)
    with pytest.raises(TypeError, match="intrinsic test_fma takes 3 arguments, got 2"):
        call("test_fma", A[i], A[i])
    with pytest.raises(VerificationError, match="unknown intrinsic 'test_fmaa' \\(did you mean 'test_fma'\\?\\)"):
        call("test_fmaa", A[i])


def test_the_dtype_rule_is_the_registrys_and_the_verifier_checks_it() -> None:
    registry.register_intrinsic("test_is_nan", 1, np.isnan, result_dtype=lambda dtypes: np.dtype(bool))
    i = Var("i")
    assert call("test_is_nan", A[i]).dtype == np.dtype(bool)
    wrong = Call("test_is_nan", (A[i],), np.dtype("float32"))
    func = PrimFunc("f", (A, B), For(i, 4, Store(B, (i,), wrong)))
    assert func_problems(func) == ["func f: intrinsic test_is_nan of ['float32'] is bool, the call says float32"]
    short = Call("exp", (), np.dtype("float32"))
    func = PrimFunc("f", (A, B), For(i, 4, Store(B, (i,), short)))
    assert func_problems(func) == ["func f: intrinsic exp takes 1 arguments, got 0"]


def test_bitcast_states_its_dtype_and_runs_through_its_reference() -> None:
    from hetero.core.ir.tir.expr import bitcast

    i = Var("i")
    ints = Buffer("I", (4,), "int32")
    func = PrimFunc("bits", (A, ints), For(i, 4, Store(ints, (i,), bitcast(A[i], "int32"))))
    a = np.array([1.5, -0.0, np.inf, np.nan], np.float32)
    out = run_func(func, {"A": a, "I": np.zeros(4, np.int32)})["I"]
    np.testing.assert_array_equal(out, a.view(np.int32))
    with pytest.raises(TypeError, match="has no dtype rule"):
        call("bitcast", A[i])
