"""The machinery every codegen backend shares around its kernels (part of the kit).

A backend that lowers a region to kernels writes three things: a builder, a part and a
``compile`` of two lines::

    class MyBuilder(KernelBuilder[MyKernel]):
        def build(self, step):                        # one kernel step (a KernelStep)
            func = step.lower()
            kernel = my_render(func)
            return BuiltStep(kernel, lambda: [("tir", "txt", str(func)), ("code", "c", kernel.source)])

    class MyPart(StepPart[MyKernel]):
        backend = "my_backend"
        def launch(self, step, arrays, clock): ...            # run step.kernel on inputs + outputs
        def kernel_output_types(self, step): ...              # what the kernel writes
        def save_kernel(self, step): ...                      # (JSON dict, {suffix: file})
        @classmethod
        def load_kernel(cls, saved, read, settings): ...      # and back

    def compile(self, subgraph, target):
        return MyPart(*compile_steps(subgraph, target, MyBuilder()))

- The part: :class:`StepPart` runs its :class:`Step`\\ s in order (views, run-time index
  checks before a kernel, intermediates in one arena on host memory or from the device,
  each kernel's outputs checked against its step's types, ``last_profile`` per launch
  timed by a :class:`Clock`, ``run_intermediates``, ``kernel_count``) and writes and
  reads its artifact in one manifest layout; the arena's pieces (:data:`ALIGNMENT`,
  :data:`Slot`, :func:`host_arena`, :func:`value_types`) serve a backend with a run
  path of its own (llvm_cpu's native program). :data:`ArrayType` and
  :data:`IndexCheck` are the shapes of its fields.
- The compile loop: :func:`compile_steps` plans a region's steps, asks a
  :class:`KernelBuilder` for each kernel (a :class:`BuiltStep`, with its dump files,
  :data:`StageFile`), and returns the :class:`CompiledSteps` a part is built from.
- Dumps: :class:`StageDump` writes a backend's compile stages in the one layout
  ``--dump`` gives every backend (:data:`STAGES`: graph, tir, scheduled, legalized, code,
  report); :func:`compile_steps` writes them for a codegen backend.
- :func:`lowerable`, the support check of a backend that compiles what lowers to the
  tensor IR.
"""

from __future__ import annotations

from hetero.core.parts import (
    ALIGNMENT, STAGES, ArrayType, BuiltStep, Clock, CompiledSteps, IndexCheck, KernelBuilder, Slot, StageDump,
    StageFile, Step, StepPart, compile_steps, host_arena, lowerable, value_types,
)

__all__ = [
    "ALIGNMENT", "STAGES", "ArrayType", "BuiltStep", "Clock", "CompiledSteps", "IndexCheck", "KernelBuilder", "Slot",
    "StageDump", "StageFile", "Step", "StepPart", "compile_steps", "host_arena", "lowerable", "value_types",
]
