"""Whole networks compiled for the GPU: ResNet-50 (as onnx ships it), a MobileNetV2-style
network and a BERT-style encoder, with ``targets=["cuda", "llvm_cpu"]``. Every kernel's PTX
is assembled by ptxas during the compile (a failure would fall the region back, which
these tests refuse), and the report shows each kernel's registers, shared memory and
occupancy. Running them needs a GPU (test_on_gpu.py); their schedules' meaning is checked
op by op in the emulated conformance run.
"""

from __future__ import annotations

import os
import re
import warnings

import onnx
import pytest

import hetero
from hetero.testing.networks import bert_style_encoder, mobilenet_v2_style
from hetero.plugins.cuda.ptxas import INSTALL_HINT, find_ptxas

pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)]

RESNET50 = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_resnet50.onnx")
ROW = re.compile(r"^  (?P<label>.+?)\s+(?P<blocks>\d+)\s+(?P<block>\d+)\s+(?P<regs>\d+)\s+(?P<smem>\d+)\s+"
                 r"(?P<spill>\d+)\s+(?P<occ>\d+)%\s+-$")


@pytest.mark.parametrize("name, model, cuda_nodes", [
    ("resnet50", lambda: RESNET50, 120),
    ("mobilenet_v2_style", mobilenet_v2_style, 41),
    ("bert_style_encoder", bert_style_encoder, 60),
])
def test_the_network_compiles_for_the_gpu_and_the_report_shows_every_kernels_resources(
        name: str, model, cuda_nodes: int) -> None:  # noqa: ANN001
    with warnings.catch_warnings():
        warnings.simplefilter("error", hetero.core.compiler.CompileFallbackWarning)
        exe = hetero.compile(model(), targets=["cuda", "llvm_cpu"], cuda_device="h200")
    assert not exe.fallbacks
    cuda = [p for p in exe.placements if p.backend == "cuda"]
    assert cuda, f"{name}: nothing placed on cuda"
    report = "\n".join(p.part.report() for p in cuda)  # before any run: resources, no times
    rows = [ROW.match(line) for line in report.splitlines()]
    rows = [r for r in rows if r is not None]
    assert len(rows) == sum(p.part.kernel_count for p in cuda)
    assert all(int(r["regs"]) > 0 and int(r["spill"]) == 0 and 0 < int(r["occ"]) <= 100 for r in rows), report
    # The matrix products are tiled through shared memory: the convolutions' or matmuls' kernels hold some.
    assert any(int(r["smem"]) > 0 for r in rows)
    nodes = sum(len(step.nodes) for p in cuda for step in p.part.steps)
    assert nodes >= cuda_nodes, f"{name}: cuda took {nodes} nodes"
