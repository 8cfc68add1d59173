"""The fpga_hls backend: the shared tensor IR rendered as Vitis-HLS C++, checked by C simulation.

Its parts: the FPGA parts it declares (:mod:`.device`), its default HLS schedules
(:mod:`.schedules`), latency and resource estimates (:mod:`.estimate`), the emitter of
HLS C++ with pragmas (:mod:`.emit`, over the shared C printer
:mod:`hetero.core.codegen.c_expr`), C simulation with g++ (:mod:`.csim`), the backend and
its project export (:mod:`.backend`) and its compiled parts (:mod:`.part`). No synthesis
tool runs here: C simulation and estimates are the checks.
"""

from hetero.plugin import hookimpl


@hookimpl
def hetero_backends() -> list:
    """The fpga_hls backend, registered through the ``hetero.backends`` entry point."""
    from hetero.plugins.fpga_hls.backend import FpgaHlsBackend

    return [FpgaHlsBackend()]


__all__ = ["hetero_backends"]
