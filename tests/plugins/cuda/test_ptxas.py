"""ptxas checks: its resource report read into a PtxasReport, PTX it rejects as an error
naming the kernel and ptxas's first error, and the limit check naming the limit."""

from __future__ import annotations

import dataclasses

import pytest

from hetero.errors import CodegenError
from hetero.plugins.cuda.ptxas import INSTALL_HINT, PtxasReport, assemble, check_limits, find_ptxas, parse_report

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)

LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'other' for 'sm_80'
ptxas info    : Used 90 registers, used 0 barriers
ptxas info    : Compiling entry function 'k' for 'sm_80'
ptxas info    : Function properties for k
    24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 24 bytes cumulative stack size, 512 bytes smem
"""

PTX = """.version 7.8
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_p)
{
\t.reg .b64 %rd<3>;
\t.reg .b32 %r<2>;
\tld.param.u64 %rd1, [k_p];
\tcvta.to.global.u64 %rd2, %rd1;
\tmov.u32 %r1, 7;
\tst.global.u32 [%rd2], %r1;
\tret;
}
"""


def test_the_report_is_read_for_the_named_kernel() -> None:
    report = parse_report(LOG, "k", "sm_80")
    assert (report.registers, report.shared_bytes, report.stack_bytes) == (40, 512, 24)
    assert (report.spill_stores_bytes, report.spill_loads_bytes, report.local_bytes) == (8, 4, 0)
    assert report.max_threads is None


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptxas_assembles_and_reports(arch: str) -> None:
    report = assemble(PTX, arch, "k")
    assert report.arch == arch and report.registers > 0 and report.shared_bytes == 0


@needs_ptxas
def test_rejected_ptx_names_the_kernel_and_the_first_error() -> None:
    with pytest.raises(CodegenError, match=r"kernel k: ptxas rejects its PTX for sm_80: .*(error|fatal)"):
        assemble(PTX.replace("st.global.u32", "st.bogus.u32"), "sm_80", "k")


def test_limits_name_the_kernel_and_the_limit() -> None:
    report = parse_report(LOG, "k", "sm_80")
    check_limits(report, 256, 255, 48 * 1024, registers_per_block=65536)
    with pytest.raises(CodegenError, match=r"kernel k \(sm_80\) uses 40 registers per thread, over the limit of 32"):
        check_limits(report, 256, 32, 48 * 1024)
    with pytest.raises(CodegenError, match=r"40 x 2048 registers per block, over the limit of 65536"):
        check_limits(report, 2048, 255, 48 * 1024, registers_per_block=65536)
    with pytest.raises(CodegenError, match=r"512 bytes of shared memory per block, over the limit of 256"):
        check_limits(report, 256, 255, 256)
    capped: PtxasReport = dataclasses.replace(report, max_threads=128)
    with pytest.raises(CodegenError, match=r"runs at most 128 threads per block, but is launched with 256"):
        check_limits(capped, 256, 255, 48 * 1024)
