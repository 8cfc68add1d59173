"""The cuda backend's parts, built toward issue 14; not yet registered as a backend.

What exists: the GPUs it declares (:mod:`.device`), its default schedules
(:mod:`.schedules`), the renderer from the tensor IR to PTX through LLVM's NVPTX
target with ptxas checks (:mod:`.render`, :mod:`.ptxas`, :mod:`.libdevice`), and the
compile that chains them against a device's limits, one kernel per stage (:mod:`.build`). The
backend class, its entry point in the ``hetero.backends`` group and the runtime through
the CUDA driver come next; until then ``hetero plugins`` lists no cuda backend.
"""
