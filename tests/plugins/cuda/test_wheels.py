"""The cuda extra's wheels stand in for a CUDA toolkit: ptxas and libdevice are found in
``nvidia/cu13`` (nvidia-cuda-nvcc, nvidia-nvvm) when nothing is on the PATH or under
/usr/local, and a kernel that calls libdevice renders and assembles with them."""

from __future__ import annotations

import glob
import shutil

import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.lower import lower_node
from hetero.plugins.cuda import libdevice, ptxas
from hetero.plugins.cuda.build import build_kernel
from hetero.plugin import GPU_PRESETS

WHEELS = libdevice.wheel_dirs()
pytestmark = pytest.mark.skipif(
    not any((d / "bin" / "ptxas").is_file() for d in WHEELS)
    or not any((d / "nvvm" / "libdevice" / "libdevice.10.bc").is_file() for d in WHEELS),
    reason="the cuda extra is not installed (pip install -e '.[cuda]': nvidia-cuda-nvcc, nvidia-nvvm)")


@pytest.fixture
def wheels_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ptxas on the PATH, no toolkit in /usr/local, no CUDA_HOME: only the wheels."""
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    monkeypatch.setattr(glob, "glob", lambda pattern, *a, **k: [])
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)


def test_ptxas_and_libdevice_come_from_the_wheels(wheels_only: None) -> None:
    assert ptxas.find_ptxas() in [d / "bin" / "ptxas" for d in WHEELS]
    assert libdevice.find_libdevice() in [d / "nvvm" / "libdevice" / "libdevice.10.bc" for d in WHEELS]


def test_a_libdevice_kernel_builds_with_the_wheels_alone(wheels_only: None) -> None:
    b = GraphBuilder("g")
    b.output(b.Tanh(b.input("x", (4096,)), name="tanh"))
    built = build_kernel(lower_node(b.build().node("tanh")), GPU_PRESETS["h200"])
    assert built.report.arch == "sm_90" and built.report.registers > 0
    assert len(built.kernel.ptx) < 64_000  # libdevice linked, internalised and inlined, not copied whole
