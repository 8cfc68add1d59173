"""llvm_cpu on integer arithmetic: the ``shr`` primitive, and the int8 ops' kernels
(scheduled like their float counterparts, per-channel factors computed when compiling)."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import compute, const, lower, placeholder, run_func, shift_right
from hetero.core.lower import lower_node
from hetero.core.schedule.tree import block_names
from hetero.plugins.llvm_cpu import CompiledKernel
from hetero.plugins.llvm_cpu.schedules_tiled import plan_tile

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint64"])
def test_shr_floors_like_the_interpreter_for_every_amount(dtype: str) -> None:
    info = np.iinfo(dtype)
    n = 64
    values = RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    values[:2] = info.min, info.max
    # Every amount from 0 to past the width, including the ones LLVM leaves undefined.
    amounts = (np.arange(n) % (info.bits + 4)).astype(dtype)
    a, b = placeholder((n,), dtype, "A"), placeholder((n,), dtype, "B")
    by_var = compute((n,), lambda i: shift_right(a[i], b[i]), "V")
    by_const = compute((n,), lambda i: shift_right(a[i], const(info.bits - 1, dtype)), "C")
    func = lower("shr", [a, b], [by_var, by_const])
    got = CompiledKernel(func).run(A=values, B=amounts)
    want = run_func(func, {"A": values, "B": amounts, "V": np.zeros(n, dtype), "C": np.zeros(n, dtype)})
    np.testing.assert_array_equal(got["V"], want["V"])
    np.testing.assert_array_equal(got["C"], want["C"])
    np.testing.assert_array_equal(got["V"], [int(v) >> int(s) for v, s in zip(values, amounts)])


def _qconv_graph(channels: int) -> hetero.core.ir.Graph:
    b = GraphBuilder("qconv")
    x = b.input("x", (1, channels, 8, 9), np.int8)
    w = b.constant(RNG.integers(-128, 128, (channels, channels, 3, 3)).astype(np.int8), "w")
    bias = b.constant(RNG.integers(-999, 999, channels).astype(np.int32), "b")
    b.output(b.op("QConv", x, w, bias, pads=(1, 1, 1, 1), x_zero=3,
                  multiplier=tuple(range(2**30, 2**30 + channels)), shift=tuple(range(30, 30 + channels))))
    return b.build()


def test_a_qconv_gets_the_register_tiled_schedule() -> None:
    func = lower_node(_qconv_graph(16).nodes[0])
    assert plan_tile(func, block_names(func.body)[-1]) is not None


def test_per_channel_factors_are_computed_once_when_compiling() -> None:
    graph = _qconv_graph(8)
    exe = hetero.compile(graph, targets=["llvm_cpu"])
    (step,) = exe.placements[0].part.steps
    tables = sorted(name.split("/")[-1] for name in step.inputs if name.endswith(("multiplier", "shift", "rounding")))
    # Kernel inputs bound to constants: no stage of the kernel rebuilds them on each call.
    assert tables == ["qconv_multiplier", "qconv_rounding", "qconv_shift"]
    x = RNG.integers(-128, 128, (1, 8, 8, 9)).astype(np.int8)
    np.testing.assert_array_equal(exe.run({"x": x})["qconv"], hetero.run_reference(graph, {"x": x})["qconv"])
