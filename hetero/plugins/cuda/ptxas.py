"""ptxas, NVIDIA's PTX assembler, as the check of rendered PTX: what a kernel uses.

:func:`assemble` runs ``ptxas -v`` on a kernel's PTX for one architecture and reads
its resource report (registers per thread, shared memory, spills, stack) into a
:class:`PtxasReport`; PTX that does not assemble is a :class:`CodegenError` naming the
kernel and ptxas's first error line. :func:`check_limits` compares a report with a
device's limits. ptxas is found on the PATH, then in the ``nvidia-cuda-nvcc`` wheel
(``pip install nvidia-cuda-nvcc``, the cuda extra), without importing CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import re
import shutil
import subprocess
import tempfile

from hetero.plugin import CodegenError
from hetero.plugins.cuda.libdevice import wheel_dirs

#: What to tell a user who has no ptxas.
INSTALL_HINT = "no ptxas found (pip install nvidia-cuda-nvcc, the cuda extra)"


@dataclass(frozen=True)
class PtxasReport:
    """One kernel's resources as ptxas reports them for ``arch``."""

    kernel: str
    arch: str
    registers: int
    shared_bytes: int
    local_bytes: int
    spill_stores_bytes: int
    spill_loads_bytes: int
    stack_bytes: int
    max_threads: int | None
    log: str


def find_ptxas() -> Path | None:
    """ptxas on the PATH, else the ``nvidia-cuda-nvcc`` wheel's ``bin/ptxas``; None if neither."""
    found = shutil.which("ptxas")
    if found:
        return Path(found)
    for folder in wheel_dirs():
        if (folder / "bin" / "ptxas").is_file():
            return folder / "bin" / "ptxas"
    return None


def assemble(ptx: str, arch: str, kernel: str = "kernel") -> PtxasReport:
    """Assemble ``ptx`` for ``arch`` (``sm_80``) with ``ptxas -v`` and report ``kernel``'s
    resources; CodegenError naming ``kernel`` when ptxas is missing or rejects the PTX."""
    ptxas = find_ptxas()
    if ptxas is None:
        raise CodegenError(f"kernel {kernel}: {INSTALL_HINT}")
    with tempfile.TemporaryDirectory(prefix="hetero-ptxas-") as tmp:
        source = Path(tmp) / f"{kernel}.ptx"
        source.write_text(ptx)
        done = subprocess.run([str(ptxas), "-v", f"-arch={arch}", str(source), "-o", str(Path(tmp) / "out.cubin")],
                              capture_output=True, text=True, check=False)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        errors = [line for line in log.splitlines() if "error" in line.lower() or "fatal" in line.lower()]
        first = (errors or log.splitlines() or [f"exit status {done.returncode}"])[0]
        raise CodegenError(f"kernel {kernel}: ptxas rejects its PTX for {arch}: {first.strip()}")
    return parse_report(log, kernel, arch)


def _number(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    return int(match.group(1)) if match else 0


def parse_report(log: str, kernel: str, arch: str) -> PtxasReport:
    """The resources ``ptxas -v``'s ``log`` reports for ``kernel`` (zero where it says nothing)."""
    section = log
    start = log.find(f"Compiling entry function '{kernel}'")
    if start >= 0:
        rest = log[start + 1:]
        end = rest.find("Compiling entry function")
        section = log[start:] if end < 0 else log[start:start + 1 + end]
    threads = re.search(r"Max threads per block\D*(\d+)", section)
    return PtxasReport(
        kernel=kernel, arch=arch,
        registers=_number(r"Used (\d+) registers", section),
        shared_bytes=_number(r"(\d+) bytes smem", section),
        local_bytes=_number(r"(\d+) bytes lmem", section),
        spill_stores_bytes=_number(r"(\d+) bytes spill stores", section),
        spill_loads_bytes=_number(r"(\d+) bytes spill loads", section),
        stack_bytes=_number(r"(\d+) bytes stack frame", section),
        max_threads=int(threads.group(1)) if threads else None,
        log=log)


def check_limits(report: PtxasReport, threads_per_block: int, max_registers_per_thread: int,
                 max_shared_per_block: int, registers_per_block: int | None = None) -> None:
    """Raise CodegenError naming the kernel and the limit it exceeds: registers per
    thread, registers of the whole block (``registers_per_block``, when given), shared
    memory per block, or the threads per block ptxas says the kernel can run."""
    where = f"kernel {report.kernel} ({report.arch})"
    if report.registers > max_registers_per_thread:
        raise CodegenError(f"{where} uses {report.registers} registers per thread, over the limit of "
                           f"{max_registers_per_thread}; schedule it with less work per thread")
    if registers_per_block is not None and report.registers * threads_per_block > registers_per_block:
        raise CodegenError(f"{where} needs {report.registers} x {threads_per_block} registers per block, over "
                           f"the limit of {registers_per_block}; launch fewer threads per block")
    if report.shared_bytes > max_shared_per_block:
        raise CodegenError(f"{where} uses {report.shared_bytes} bytes of shared memory per block, over the "
                           f"limit of {max_shared_per_block}; schedule it with smaller shared tiles")
    if report.max_threads is not None and threads_per_block > report.max_threads:
        raise CodegenError(f"{where} runs at most {report.max_threads} threads per block, but is launched "
                           f"with {threads_per_block}; launch fewer threads per block")
