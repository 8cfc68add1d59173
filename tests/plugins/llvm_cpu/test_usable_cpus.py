"""How many threads llvm_cpu starts by default: the CPUs the process may use, not the host's."""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

import pytest

from hetero.plugins.llvm_cpu.host import cgroup_cpu_quota, usable_cpus


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_v2_quota_of_the_cgroup_or_an_ancestor_counts(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "cpu\n")
    _write(tmp_path / "cpu.max", "max 100000\n")
    _write(tmp_path / "kube" / "cpu.max", "150000 100000\n")
    _write(tmp_path / "kube" / "pod" / "cpu.max", "max 100000\n")
    assert cgroup_cpu_quota(tmp_path, "0::/kube/pod\n") == 1.5
    assert cgroup_cpu_quota(tmp_path, "0::/\n") is None


def test_a_v1_quota_counts_and_minus_one_is_none(tmp_path: Path) -> None:
    _write(tmp_path / "cpu,cpuacct" / "docker" / "cpu.cfs_quota_us", "50000\n")
    _write(tmp_path / "cpu,cpuacct" / "docker" / "cpu.cfs_period_us", "100000\n")
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_quota(tmp_path, "3:cpu,cpuacct:/docker\n2:memory:/docker\n") == 0.5
    assert cgroup_cpu_quota(tmp_path, "3:cpu,cpuacct:/\n") is None


def test_unreadable_or_malformed_limits_are_no_limit(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "")
    _write(tmp_path / "cpu.max", "garbage\n")
    assert cgroup_cpu_quota(tmp_path, "0::/\n") is None
    assert cgroup_cpu_quota(tmp_path / "missing", "0::/a/b\n") is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs an affinity mask of two CPUs or more to narrow")
def test_the_default_follows_the_affinity_mask() -> None:
    # As `taskset -c N`: a child pinned to one CPU counts one.
    cpu = min(os.sched_getaffinity(0))
    code = ("import os; os.sched_setaffinity(0, {%d}); "
            "from hetero.plugins.llvm_cpu.host import usable_cpus; print(usable_cpus())" % cpu)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(1, \"1 CPU(s) in this process's affinity mask\")"
    assert usable_cpus()[0] <= len(os.sched_getaffinity(0))


def _gram():
    import numpy as np

    from hetero.core.ir import GraphBuilder

    b = GraphBuilder("gram")
    x = b.input("x", (64, 64), "float32")
    b.output(b.Relu(b.MatMul(x, x)))
    return b.build(), np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)


def test_the_report_says_how_many_threads_and_why_and_keeps_it_saved(tmp_path: Path) -> None:
    import hetero

    graph, x = _gram()
    exe = hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)
    exe.run({"x": x})
    assert "on 1 thread(s) each: num_threads=1 was given" in exe.report()
    exe.save(tmp_path / "gram.hetero")
    assert hetero.load(tmp_path / "gram.hetero").placements[0].part.threads == (1, "num_threads=1 was given")
    count, why = usable_cpus()
    default = hetero.compile(graph, targets=["llvm_cpu"]).placements[0].part.threads
    assert default == (count, f"{why} (num_threads not given)")


def test_a_matmul_of_a_value_with_itself_compiles_and_matches() -> None:
    # x @ x reads x as both operands: packing it as the right operand's panels would
    # break the left operand's reads, so it is not packed (it was a ScheduleError).
    import numpy as np

    import hetero

    graph, x = _gram()
    (name,) = [v.name for v in graph.outputs]
    got = hetero.compile(graph, targets=["llvm_cpu"], strict=True).run({"x": x})[name]
    # 64-term float32 dot products: a few ulps of their magnitude.
    np.testing.assert_allclose(got, np.maximum(x.astype(np.float64) @ x, 0), rtol=1e-4, atol=1e-4)
