"""The cuda backend: the shared tensor IR rendered to PTX for NVIDIA GPUs, run through the CUDA driver.

Its parts: the GPUs it declares (:mod:`.device`), its default schedules
(:mod:`.schedules`), the renderer from the tensor IR to PTX through LLVM's NVPTX target
(:mod:`.render`, with libdevice's math: :mod:`.libdevice`), ptxas's checks
(:mod:`.ptxas`), the compile that chains them against a device's limits, one kernel per
stage (:mod:`.build`), the backend (:mod:`.backend`), its compiled parts (:mod:`.part`)
and the CUDA driver through ``cuda-bindings`` (:mod:`.driver`). Without a GPU it
compiles and checks PTX; running needs one (or the ``cuda_emulate`` option).
"""

from hetero.plugin import hookimpl


@hookimpl
def hetero_backends() -> list:
    """The cuda backend, registered through the ``hetero.backends`` entry point."""
    from hetero.plugins.cuda.backend import CudaBackend

    return [CudaBackend()]


__all__ = ["hetero_backends"]
