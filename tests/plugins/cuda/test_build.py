"""Lowered ops built into PTX kernels for each declared GPU: scheduled, rendered, assembled by
ptxas for the device's architecture and checked against its limits.

The kernels cannot run here (no GPU); their meaning is the scheduled function's, which
the interpreter checks in test_schedules.py and test_render.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir.stmt import seq
from hetero.core.lower import lower_node
from hetero.errors import CodegenError
from hetero.plugins.cuda.build import build_kernel
from hetero.plugins.cuda.device import PRESETS
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
    spec = PRESETS[device]
    built = build_kernel(_lowered(op, shape, **attrs), spec)
    assert built.report.arch == spec.arch and f".target {spec.arch}" in built.kernel.ptx
    assert 0 < built.report.registers <= spec.max_registers_per_thread
    assert built.report.spill_stores_bytes == 0
    launch = built.kernel.launch
    assert launch.block[0] % spec.warp_size == 0 and launch.grid[0] <= spec.sms * 32
    assert [i.kind for i in built.trace.instructions][-2:] == ["bind", "bind"]


def test_a_float16_op_assembles_too() -> None:
    built = build_kernel(_lowered("Relu", (4, 64), "float16"), PRESETS["h100"])
    assert built.report.registers > 0 and ".b16" in built.kernel.ptx


def test_a_function_of_several_stages_is_refused_by_name() -> None:
    relu, neg = _lowered("Relu", (4, 4)), _lowered("Neg", (4, 4))
    both = replace(relu, name="two", params=relu.params + neg.params[1:], body=seq(relu.body, neg.body))
    with pytest.raises(CodegenError, match=r"func two has 2 stages \(relu, neg\).*not done yet"):
        build_kernel(both, PRESETS["a100"])


def test_a_kernel_over_the_devices_register_limit_is_refused_at_compile_time() -> None:
    strict = replace(PRESETS["a100"], max_registers_per_thread=2)
    with pytest.raises(CodegenError, match=r"registers per thread, over the limit of 2"):
        build_kernel(_lowered("Erf", (256,)), strict)
