"""The fpga_hls backend as a hetero backend: its entry point, declarations under options, what
it takes, its compile (real C++ compiled by g++ and run as C simulation), its report and
artifact, its project export (a testbench that g++ builds and that passes), and fallback.
"""

from __future__ import annotations

from dataclasses import replace
import io
from pathlib import Path
import shutil
import subprocess
import warnings
import zipfile

import numpy as np
import pytest

import hetero
from hetero.core.exec.reference import run_reference
from hetero.core.ir import GraphBuilder
from hetero.core.parts import STAGES
from hetero.core.plugin import get_backend
from hetero.core.plugin.backend import validate_backend
from hetero.core.plugin.capabilities import Reports
from hetero.core.plugin.manager import load_plugins
from hetero.core.plugin.target import bind
from hetero.plugins.fpga_hls import backend as hls_backend
from hetero.plugins.fpga_hls.csim import GXX_FLAGS, find_gxx
from hetero.plugins.fpga_hls.device import PRESETS
from hetero.plugins.fpga_hls.emit import HlsKernel

pytestmark = pytest.mark.skipif(find_gxx() is None, reason="C simulation needs g++ (apt install g++)")


def _small_net() -> hetero.core.ir.Graph:
    """Conv + Relu (one kernel), MaxPool, a Reshape (a view), a Softmax (one kernel of four stages)."""
    b = GraphBuilder("net")
    x = b.input("x", (1, 3, 8, 8))
    w = np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32)
    y = b.Relu(b.Conv(x, w, name="conv", pads=[1, 1, 1, 1]), name="relu")
    y = b.MaxPool(y, name="pool", kernel_shape=[2, 2], strides=[2, 2])
    y = b.Reshape(y, name="flat", shape=[1, 128])
    b.output(b.Softmax(y, name="sm", axis=1))
    return b.build()


def _x() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def test_the_backend_is_installed_through_its_entry_point_and_sound() -> None:
    plugins = load_plugins()
    assert "fpga_hls" in plugins.backends and plugins.provided_by["fpga_hls"].bundled
    backend = get_backend("fpga_hls")
    assert validate_backend(backend) == [] and backend.device_kind == "fpga" and not backend.takes_every_op


def test_declarations_follow_the_part_option() -> None:
    backend = get_backend("fpga_hls")
    small, large = bind(backend, {"fpga_part": "zu7ev"}), bind(backend, {"fpga_part": "u280"})
    assert small.memory.outermost.name == "DDR" and large.memory.outermost.name == "HBM"
    assert [level.scope for level in large.memory.levels] == ["global", "uram", "bram", "local"]
    assert large.peak_gflops == pytest.approx(9024 * 2 * 0.3)


def test_supports_refuses_what_cpp_has_no_type_for_and_designs_that_do_not_fit(monkeypatch) -> None:
    target = bind(get_backend("fpga_hls"))
    b = GraphBuilder("g")
    x = b.input("x", (4, 6), "float8_e4m3fn")
    b.output(b.Cast(x, name="cast", to="float32"))
    refusal = target.supports(b.build().node("cast"))
    assert not refusal.ok and "no C++ type for float8_e4m3fn" in refusal.reason
    # A part with 2 DSPs: no multiply-accumulate of a Conv fits.
    monkeypatch.setitem(PRESETS, "zu7ev", replace(PRESETS["zu7ev"], dsp=2))
    tiny = bind(get_backend("fpga_hls"), {"fpga_part": "zu7ev"})
    verdict = tiny.supports(_small_net().node("conv"))
    assert not verdict.ok and "does not fit zu7ev" in verdict.reason and "DSP" in verdict.reason


def test_a_region_runs_by_c_simulation_and_matches_the_reference() -> None:
    graph = _small_net()
    exe = hetero.compile(graph, targets=["fpga_hls", "llvm_cpu"])
    assert [p.backend for p in exe.placements] == ["fpga_hls"]
    got, want = exe.run(_x()), run_reference(graph, _x())
    # The reference sums the convolution's 27 terms in numpy's order and takes numpy's exp;
    # the kernels sum in the lowering's order with glibc's expf: a few float32 ulps (1.2e-7
    # each) through the conv and the 128-term normalisation.
    np.testing.assert_allclose(got["sm"], want["sm"], rtol=1e-5, atol=1e-9)
    part = exe.placements[0].part
    assert isinstance(part, Reports) and part.kernel_count == 3
    report = part.report()
    assert "3 HLS kernels for u50" in report and "conv (Conv+Relu)" in report and "BRAM_18K" in report
    assert part.cycles > 0 and all(s.kernel.figures.dsp > 0 for s in part.steps if s.name.startswith("conv"))


def test_the_artifact_is_deterministic_and_reloads_into_the_same_computation() -> None:
    graph = _small_net()
    target = bind(get_backend("fpga_hls"))
    part = target.compile(graph)
    assert part.artifact == target.compile(graph).artifact
    with zipfile.ZipFile(io.BytesIO(part.artifact)) as zf:
        sources = [zf.read(n).decode() for n in zf.namelist() if n.endswith(".cpp")]
    assert len(sources) == 3 and all("#pragma HLS INTERFACE s_axilite port=return" in s for s in sources)
    loaded = get_backend("fpga_hls").load_artifact(part.artifact)
    np.testing.assert_array_equal(loaded.run(_x())["sm"], part.run(_x())["sm"])
    assert loaded.report() == part.report()


def test_the_emitted_kernels_carry_the_pragmas_their_schedules_ask_for() -> None:
    part = bind(get_backend("fpga_hls")).compile(_small_net())
    conv = part.steps[0].kernel.hls.source
    tokens = conv.split()
    assert "PIPELINE" in tokens and "II=1" in tokens
    assert any(t.startswith("factor=") for t in tokens) and "ARRAY_PARTITION" in tokens


def test_compile_dump_exports_a_vitis_project_per_kernel_whose_testbench_passes(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    hetero.compile(_small_net(), targets=["fpga_hls", "llvm_cpu"], dump=dump)
    assert {p.name for p in (dump / "fpga_hls").iterdir()} == {*STAGES, "hls_projects"}
    assert sorted(p.name for p in (dump / "fpga_hls" / "code").iterdir())[:2] == ["conv.cpp", "conv.h"]
    assert "DSP" in (dump / "fpga_hls" / "report" / "conv.txt").read_text()
    projects = sorted(p for p in (dump / "fpga_hls" / "hls_projects").iterdir() if p.is_dir())
    assert len(projects) == 3
    project = projects[0]
    top = project.name
    files = sorted(p.name for p in project.iterdir())
    assert files == sorted(["data", f"{top}.cpp", f"{top}.h", f"tb_{top}.cpp", "run_hls.tcl", "estimate.txt"])
    tcl = (project / "run_hls.tcl").read_text()
    assert f"set_top {top}" in tcl and "csim_design" in tcl and "csynth_design" in tcl and "xcu50" in tcl
    # The testbench is real: g++ builds it with the kernel, and it replays the captured data.
    flags = [f for f in GXX_FLAGS if f not in ("-shared", "-fPIC")]
    exe = project / "tb"
    subprocess.run([shutil.which("g++") or "g++", *flags, f"tb_{top}.cpp", f"{top}.cpp", "-o", str(exe)],
                   cwd=project, check=True, capture_output=True, text=True)
    done = subprocess.run([str(exe)], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("PASS: 0 mismatches"), done.stdout + done.stderr


def test_a_kernel_that_fails_to_compile_is_a_plugin_error_and_its_region_falls_back(monkeypatch) -> None:
    emit = hls_backend.emit_hls

    def broken(func):  # noqa: ANN001, ANN202 - stands for any C++ the compiler rejects
        kernel = emit(func)
        return HlsKernel(kernel.top, kernel.source.replace("{", "{ undeclared_name;", 1), kernel.header,
                         kernel.params)

    monkeypatch.setattr(hls_backend, "emit_hls", broken)
    graph = _small_net()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = hetero.compile(graph, targets=["fpga_hls", "llvm_cpu"])
    assert {p.backend for p in exe.placements} == {"llvm_cpu"}
    message = str(exe.fallbacks[0])
    assert "fpga_hls could not build conv (Conv+Relu)" in message and "undeclared_name" in message
    np.testing.assert_allclose(exe.run(_x())["sm"], run_reference(graph, _x())["sm"], rtol=1e-5, atol=1e-7)
