"""Every bundled backend dumps one small model in the one layout: a folder a stage
(:data:`~hetero.core.parts.STAGES`), one file a step, so the same stage of any two
backends sits at the same path. npu_sim, which compiles graph nodes straight to its
instructions, writes the stages it has."""

from __future__ import annotations

from pathlib import Path
import warnings

import pytest

from hetero.core.parts import STAGES
from hetero.plugins.cuda.ptxas import find_ptxas
from hetero.plugins.fpga_hls.csim import find_gxx
import hetero
from plugins.npu_sim.npu_programs import int8_net

#: The stages each backend has, and the folders it adds of its own.
LAYOUT = {
    "llvm_cpu": (set(STAGES), set()),
    "cuda": (set(STAGES), set()),
    "fpga_hls": (set(STAGES), {"hls_projects"}),
    "npu_sim": ({"graph", "code", "report"}, set()),
}


@pytest.mark.parametrize("backend", list(LAYOUT))
def test_every_backend_dumps_its_stages_in_the_one_layout(backend: str, tmp_path: Path) -> None:
    if backend == "cuda" and find_ptxas() is None:
        pytest.skip("cuda compiles through ptxas, which is not installed")
    if backend == "fpga_hls" and find_gxx() is None:
        pytest.skip("fpga_hls checks its kernels with g++, which is not installed")
    graph = int8_net(4, 8, 8, 0)  # QConv, MaxPool, Flatten (a view), QMatMul: every backend takes it whole
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = hetero.compile(graph, targets=list(dict.fromkeys([backend, "llvm_cpu"])), dump=tmp_path)
    assert [p.backend for p in exe.placements] == [backend]
    stages, extra = LAYOUT[backend]
    folder = tmp_path / backend
    assert {p.name for p in folder.iterdir()} == stages | extra
    nodes = {f.name for f in (folder / "graph").iterdir()}
    assert {"conv.txt", "fc.txt"} <= nodes
    assert all((folder / stage).iterdir() for stage in stages)
    if backend != "npu_sim":  # a kernel step's every stage is a file named after it
        for stage in stages:
            assert any(f.name.startswith("conv.") for f in (folder / stage).iterdir()), stage
