"""npu_sim: a simulated NPU — a systolic int8 matrix unit with int32 accumulation, a
vector unit, and a software-managed SRAM scratchpad fed by DMA.

The machine, in modules: ``config`` (the declared device, :class:`NpuConfig` and its
presets), ``isa`` (the instructions), ``asm`` (their assembly text), ``encoding``
(their binary form), ``program`` (a program with its DRAM image and I/O bindings,
and its artifact bytes), ``sim`` (exact execution on numpy) and ``cycles`` (the
timing model and race detection between the load, compute and store engines).

The backend (``backend``: :class:`~hetero.plugins.npu_sim.backend.NpuSimBackend`),
built on the compiler (``compiler``: int8 graph → program), is registered through
the ``hetero.backends`` entry point like any third-party plugin; ``tuning`` makes each
convolution's tiling tunable by ``hetero tune``, measured in simulated cycles.
"""

from hetero.plugin import hookimpl


@hookimpl
def hetero_backends() -> list:
    """The npu_sim backend, registered through the ``hetero.backends`` entry point."""
    from hetero.plugins.npu_sim.backend import NpuSimBackend

    return [NpuSimBackend()]


__all__ = ["hetero_backends"]
