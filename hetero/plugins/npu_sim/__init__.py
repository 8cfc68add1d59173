"""npu_sim: a simulated NPU — a systolic int8 matrix unit with int32 accumulation, a
vector unit, and a software-managed SRAM scratchpad fed by DMA.

The machine, in modules: ``config`` (the declared device, :class:`NpuConfig` and its
presets), ``isa`` (the instructions), ``asm`` (their assembly text), ``encoding``
(their binary form), ``program`` (a program with its DRAM image and I/O bindings,
and its artifact bytes), ``sim`` (exact execution on numpy) and ``cycles`` (the
timing model and race detection between the load, compute and store engines).
"""
