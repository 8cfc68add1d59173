"""Lowered ops built into PTX kernels for each declared GPU: scheduled, rendered, assembled by
ptxas for the device's architecture and checked against its limits.

The kernels cannot run here (no GPU); their meaning is the scheduled function's, which
the interpreter checks in test_schedules.py and test_render.py.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hetero

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir.interp import run_func
from hetero.core.ir.tir.stmt import seq
from hetero.core.lower import lower_node
from hetero.errors import CodegenError
from hetero.plugins.cuda.build import build_function, build_kernel, split_stages
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda.ptxas import INSTALL_HINT, find_ptxas

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)

#: Ops whose lowering is one stage: elementwise, activations, reductions along an axis.
CASES = [
    ("Relu", (64, 130), {}), ("Sigmoid", (1000,), {}), ("Tanh", (3, 7, 11), {}), ("Erf", (256,), {}),
    ("Exp", (128,), {}), ("Neg", (5, 5), {}), ("LeakyRelu", (300,), {"alpha": 0.1}),
    ("ReduceSum", (32, 100), {"axes": [1]}), ("ReduceMax", (8, 16, 50), {"axes": [2], "keepdims": 0}),
    ("ReduceMean", (64, 64), {"axes": [0]}),
]


def _lowered(op: str, shape: tuple[int, ...], dtype: str = "float32", **attrs: object):  # noqa: ANN202
    b = GraphBuilder("g")
    b.output(getattr(b, op)(b.input("x", shape, dtype), name=op.lower(), **attrs))
    return lower_node(b.build().node(op.lower()))


@pytest.mark.parametrize("device", ["a100", "h200"])
@pytest.mark.parametrize("op, shape, attrs", CASES, ids=[c[0] for c in CASES])
def test_each_single_stage_op_assembles_for_the_device_within_its_limits(
        device: str, op: str, shape: tuple[int, ...], attrs: dict[str, object]) -> None:
    spec = GPU_PRESETS[device]
    built = build_kernel(_lowered(op, shape, **attrs), spec)
    assert built.report.arch == spec.arch and f".target {spec.arch}" in built.kernel.ptx
    assert 0 < built.report.registers <= spec.max_registers_per_thread
    assert built.report.spill_stores_bytes == 0
    launch = built.kernel.launch
    assert launch.block[0] % spec.warp_size == 0 and launch.grid[0] <= spec.sms * 32
    assert [i.kind for i in built.trace.instructions][-2:] == ["bind", "bind"]


def test_a_float16_op_assembles_too() -> None:
    built = build_kernel(_lowered("Relu", (4, 64), "float16"), GPU_PRESETS["h100"])
    assert built.report.registers > 0 and ".b16" in built.kernel.ptx


def test_a_function_of_several_stages_is_refused_by_build_kernel_by_name() -> None:
    relu, neg = _lowered("Relu", (4, 4)), _lowered("Neg", (4, 4))
    both = replace(relu, name="two", params=relu.params + neg.params[1:], body=seq(relu.body, neg.body))
    with pytest.raises(CodegenError, match=r"func two has 2 stages \(relu, neg\).*build_function"):
        build_kernel(both, GPU_PRESETS["a100"])


@pytest.mark.parametrize("op, shape, attrs", [
    ("Softmax", (5, 37), {"axis": 1}),
    ("LogSoftmax", (3, 4, 9), {"axis": -1}),
    ("LayerNormalization", (6, 16), {"axis": -1}),
])
def test_a_function_of_several_stages_is_one_kernel_per_stage_with_shared_workspaces(
        op: str, shape: tuple[int, ...], attrs: dict[str, object]) -> None:
    b = GraphBuilder("g")
    x = b.input("x", shape)
    if op == "LayerNormalization":
        out = b.LayerNormalization(x, np.linspace(0.5, 1.5, shape[-1]).astype(np.float32),
                                   np.linspace(-1, 1, shape[-1]).astype(np.float32), name="n", **attrs)
    else:
        out = getattr(b, op)(x, name="n", **attrs)
    b.output(out if not isinstance(out, tuple) else out[0])
    graph = b.build()
    func = lower_node(graph.node("n"))
    built = build_function(func, GPU_PRESETS["a100"])
    stages, workspaces = split_stages(func)
    assert len(built.kernels) == len(stages) > 1 and built.workspaces == workspaces
    assert all(k.report.arch == "sm_80" for k in built.kernels)
    # Run the scheduled stages in turn, as the launches would, with the workspaces shared.
    feed = {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}
    constants = {name: v.data for name, v in graph.values.items() if v.data is not None}
    memory = {**feed, **{p.name: constants.get(p.name, np.zeros(p.shape, p.dtype))
                         for p in stages[0].params if p.name not in feed}}
    for stage, kernel in zip(stages, built.kernels):
        memory = run_func(kernel.trace.apply(stage), memory)
    want = hetero.run_reference(graph, feed)[graph.outputs[0].name]
    np.testing.assert_allclose(memory[graph.outputs[0].name], want, rtol=1e-5, atol=1e-6)


def test_a_kernel_over_the_devices_register_limit_is_refused_at_compile_time() -> None:
    strict = replace(GPU_PRESETS["a100"], max_registers_per_thread=2)
    with pytest.raises(CodegenError, match=r"registers per thread, over the limit of 2"):
        build_kernel(_lowered("Erf", (256,)), strict)
