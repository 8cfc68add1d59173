"""The cuda backend as a hetero backend: its entry point, declarations under options, what it
takes, its compile (real PTX, assembled by ptxas), its artifact and dump, and how it behaves
on a machine without a GPU.

No GPU is lent to these machines, so a compiled part runs here only emulated (the
``cuda_emulate`` option: each kernel's scheduled tensor IR, the function its PTX was
rendered from, in the interpreter). That checks the schedules, the steps, the workspaces
and the transfers; the PTX itself is checked by ptxas, and on a GPU by test_on_gpu.py.
"""

from __future__ import annotations

from dataclasses import replace
import io
from pathlib import Path
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
from hetero.core.plugin.capabilities import OnDevice, Reports
from hetero.core.plugin.listing import format_plugins
from hetero.core.plugin.manager import load_plugins
from hetero.core.plugin.target import bind
from hetero.errors import CodegenError, OptionError
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda import backend as cuda_backend
from hetero.plugins.cuda.driver import NoCudaDeviceError, probe
from hetero.plugins.cuda.ptxas import INSTALL_HINT, find_ptxas

pytestmark = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)

NO_GPU = pytest.mark.skipif(probe().ok, reason="this machine has a GPU: the no-GPU behaviour is not what runs here")


def _small_net() -> hetero.core.ir.Graph:
    """Conv + Relu (a fused group), a Reshape (a view on the device), a Softmax (four kernels)."""
    b = GraphBuilder("net")
    x = b.input("x", (1, 3, 5, 5))
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    y = b.Relu(b.Conv(x, w, name="conv", pads=[1, 1, 1, 1]), name="relu")
    y = b.Reshape(y, name="flat", shape=[1, 100])
    b.output(b.Softmax(y, name="sm", axis=1))
    return b.build()


def _x() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(1).standard_normal((1, 3, 5, 5)).astype(np.float32)}


def test_the_backend_is_installed_through_its_entry_point_and_sound() -> None:
    plugins = load_plugins()
    assert "cuda" in plugins.backends and plugins.provided_by["cuda"].bundled
    backend = get_backend("cuda")
    assert validate_backend(backend) == [] and backend.device_kind == "gpu"
    assert not backend.takes_every_op  # never the fallback: llvm_cpu is


def test_declarations_follow_the_device_option() -> None:
    backend = get_backend("cuda")
    a100, h200 = bind(backend, {"cuda_device": "a100"}), bind(backend, {"cuda_device": "h200"})
    assert a100.memory.outermost.capacity_bytes == 80 * 2**30 and a100.peak_gflops == 19_500.0
    assert h200.memory.outermost.capacity_bytes == 141 * 2**30 and h200.settings.spec.arch == "sm_90"
    with pytest.raises(OptionError, match="cuda_threads_per_block must be a multiple of 32"):
        bind(backend, {"cuda_threads_per_block": 100})
    with pytest.raises(OptionError, match="one of"):
        bind(backend, {"cuda_device": "v100"})


def test_supports_takes_what_the_gpu_schedules_bind_and_refuses_the_rest_with_a_reason() -> None:
    target = bind(get_backend("cuda"))
    b = GraphBuilder("g")
    x = b.input("x", (4, 6))
    idx = b.input("i", (3,), "int64")
    relu = b.Relu(x, name="relu")
    gathered = b.Gather(relu, idx, name="gather", axis=0)
    b.output(gathered)
    g = b.build()
    assert target.supports(g.node("relu")).ok
    refusal = target.supports(g.node("gather"))
    assert not refusal.ok and "run-time indices" in refusal.reason


@NO_GPU
def test_without_a_gpu_the_listing_says_so_and_supports_refuses_nothing_for_that() -> None:
    text = format_plugins(load_plugins())
    assert "cuda: no CUDA device found:" in text and "running them needs a GPU" in text
    graph = _small_net()
    target = bind(get_backend("cuda"))
    assert all(target.supports(n).ok for n in graph.nodes)


@NO_GPU
def test_without_a_gpu_compiling_works_and_running_says_plainly_that_there_is_none() -> None:
    exe = hetero.compile(_small_net(), targets=["cuda", "llvm_cpu"], cuda_device="a100")
    assert {p.backend for p in exe.placements} == {"cuda"}
    with pytest.raises(NoCudaDeviceError, match="no CUDA device found"):
        exe.run(_x())


def test_the_compiled_part_is_ptx_for_the_declared_gpu_with_launches_and_ptxas_figures() -> None:
    part = bind(get_backend("cuda"), {"cuda_device": "a100"}).compile(_small_net())
    assert isinstance(part, OnDevice) and part.device.name == "cuda:0"
    # Conv+Relu one kernel, the Reshape a view, the Softmax's four stages four kernels.
    assert part.kernel_count == 5
    assert [s.view is not None for s in part.steps] == [False, True, False]
    with zipfile.ZipFile(io.BytesIO(part.artifact)) as zf:
        ptx = [zf.read(n).decode() for n in zf.namelist() if n.endswith(".ptx")]
    assert len(ptx) == 5 and all(".target sm_80" in p and ".entry" in p for p in ptx)
    report = part.report()
    assert isinstance(part, Reports) and "5 kernels for a100 (sm_80)" in report
    assert all(k.registers > 0 for s in part.steps if s.kernel is not None for k in s.kernel.kernels)


def test_an_emulated_run_matches_the_reference() -> None:
    graph = _small_net()
    exe = hetero.compile(graph, targets=["cuda", "llvm_cpu"], cuda_emulate=True)
    got, want = exe.run(_x()), run_reference(graph, _x())
    # Softmax over 100 float32 values: a few ulps of its max-shifted exponentials and sum.
    np.testing.assert_allclose(got["sm"], want["sm"], rtol=1e-5, atol=1e-7)
    part = exe.placements[0].part
    assert [name for name, _ in part.last_profile] == ["conv (Conv+Relu)", *(f"sm (Softmax) [{k}]" for k in range(4))]
    assert "last run emulated in the interpreter" in part.report()


def test_the_artifact_is_deterministic_and_reloads_into_the_same_computation() -> None:
    graph = _small_net()
    target = bind(get_backend("cuda"), {"cuda_emulate": True})
    part = target.compile(graph)
    assert part.artifact == target.compile(graph).artifact
    loaded = get_backend("cuda").load_artifact(part.artifact)
    assert (loaded.inputs, loaded.outputs, loaded.kernel_count) == (part.inputs, part.outputs, 5)
    x = _x()
    np.testing.assert_array_equal(loaded.run(x)["sm"], part.run(x)["sm"])


def test_values_stay_on_the_device_between_cuda_regions_and_move_only_where_the_partition_says() -> None:
    b = GraphBuilder("g")
    x, idx = b.input("x", (4, 6)), b.input("i", (4,), "int64")
    a = b.Relu(x, name="relu")                      # cuda (r0)
    g = b.Gather(a, idx, name="gather", axis=0)     # run-time indices: llvm_cpu (r1)
    b.output(b.Add(a, b.Neg(g, name="neg"), name="add"))  # cuda again (r2), reading r0's a
    graph = b.build()
    exe = hetero.compile(graph, targets=["cuda", "llvm_cpu"], cuda_emulate=True, min_ratio=0.0)
    assert [p.backend for p in exe.placements] == ["cuda", "llvm_cpu", "cuda"]
    inputs = {"x": np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32),
              "i": np.array([3, 0, 1, 1])}
    np.testing.assert_array_equal(exe.run(inputs)["add"], run_reference(graph, inputs)["add"])
    moves = sorted(line.split()[1] + " " + line.split()[2] for line in exe.report().splitlines()
                   if line.startswith("transfer "))
    # relu's output goes to the CPU for the Gather, but r2 reads it where r0 left it.
    assert moves == ["add cuda->llvm_cpu", "gather llvm_cpu->cuda", "relu cuda->llvm_cpu", "x llvm_cpu->cuda"]


def test_a_kernel_that_fails_to_build_is_a_plugin_error_and_its_region_falls_back(monkeypatch) -> None:
    def refuse(func, spec, threads):  # noqa: ANN001, ANN202 - stands for any renderer or ptxas failure
        raise CodegenError(f"func {func.name}: refused for the test")

    monkeypatch.setattr(cuda_backend, "build_function", refuse)
    graph = _small_net()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = hetero.compile(graph, targets=["cuda", "llvm_cpu"])
    assert {p.backend for p in exe.placements} == {"llvm_cpu"}
    assert any("cuda could not build conv (Conv+Relu)" in str(w.message) for w in caught)
    np.testing.assert_allclose(exe.run(_x())["sm"], run_reference(graph, _x())["sm"], rtol=1e-5, atol=1e-7)


def test_compile_dump_writes_every_stage_of_every_kernel(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    hetero.compile(_small_net(), targets=["cuda", "llvm_cpu"], dump=dump)
    stages = {p.name: sorted(f.name for f in p.iterdir()) for p in (dump / "cuda").iterdir()}
    assert set(stages) == set(STAGES)
    assert [f for f in stages["code"] if f.endswith(".ptx")] == ["conv.ptx", *(f"sm.{k}.ptx" for k in range(4))]
    assert stages["tir"] == stages["graph"] == ["conv.txt", "sm.txt"]
    assert stages["report"] == ["conv.txt", *(f"sm.{k}.txt" for k in range(4))]
    assert "blockIdx.x" in (dump / "cuda" / "scheduled" / "conv.txt").read_text()
    assert "ptx_kernel" in (dump / "cuda" / "code" / "conv.ll").read_text()
    assert "registers" in (dump / "cuda" / "report" / "conv.txt").read_text()


def test_a_kernel_over_the_declared_limits_is_refused_at_compile_time_and_the_report_says_why(monkeypatch) -> None:
    # A GPU declared with 16 registers a thread: every conv kernel ptxas makes needs more.
    tight = replace(GPU_PRESETS["a100"], max_registers_per_thread=16)
    monkeypatch.setitem(GPU_PRESETS, "a100", tight)
    graph = _small_net()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exe = hetero.compile(graph, targets=["cuda", "llvm_cpu"], cuda_device="a100")
    assert [f.backend for f in exe.fallbacks] == ["cuda"]
    assert "registers" in str(exe.fallbacks[0]) and "16" in str(exe.fallbacks[0])
    assert "registers" in exe.report()
    assert {p.backend for p in exe.placements} == {"llvm_cpu"}
