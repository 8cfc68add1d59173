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
