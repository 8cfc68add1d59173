"""A compiled llvm_cpu region: its kernels run in graph order, with the subgraph's constants bound.

:class:`LlvmCpuPart` is what :meth:`~hetero.plugins.llvm_cpu.backend.LlvmCpuBackend.compile`
returns: a :class:`~hetero.plugin.parts.StepPart` whose kernels are
:class:`~hetero.plugins.llvm_cpu.kernel.CompiledKernel`\\ s. Its artifact holds each
kernel's host machine code, so a saved executable loads without compiling.

Intermediates live in one arena, planned when the part is built (compiled or loaded:
the plan is recomputed from the steps, not saved; :attr:`LlvmCpuPart.memory_plan`).
A run is one native call (:mod:`.program`) that borrows an arena and a workspace
region an earlier run returned, so runs from several threads each have their own;
where the native runtime has no port, the shared step loop runs the kernels one by
one. The part's outputs, and the values they are views of, are allocated apart, so
what ``run`` returns never shares memory with anything a later run writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hetero.plugin import HOST, CodegenError
from hetero.plugin.parts import ArrayType, Clock, Step, StepPart, host_arena, value_types
from hetero.plugins.llvm_cpu.kernel import CompiledKernel
from hetero.plugins.llvm_cpu.program import ALIGNMENT, Program, workspace_layout
from hetero.plugins.llvm_cpu.runtime import native_pool
from hetero.plugins.llvm_cpu.target import host_cpu


class LlvmCpuPart(StepPart[CompiledKernel]):
    """Compiled kernels run in order, with the subgraph's constants bound and the
    intermediates in one planned arena (:attr:`memory_plan`)."""

    backend = "llvm_cpu"
    alignment = ALIGNMENT

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[Step[CompiledKernel]],
                 constants: Mapping[str, np.ndarray], aliases: Mapping[str, str],
                 threads: tuple[int, str] | None = None) -> None:
        super().__init__(inputs, outputs, steps, constants, aliases)
        #: The threads each kernel runs on and why that many (the backend's reading of
        #: num_threads, the affinity mask and a cgroup quota).
        self.threads = threads
        self._program: Program | None = None
        self._scratch: list[tuple[np.ndarray, np.ndarray]] = []  # (arena, workspace) of finished runs

    @property
    def workspace_bytes(self) -> int:
        """The bytes a run allocates besides the arena and its outputs: the region the
        stages of one kernel at a time pass their intermediates in."""
        return max((workspace_layout(s.kernel)[1] for s in self.steps if s.kernel is not None), default=0)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        program = self._native_program()
        if program is None:
            return super().run(inputs)
        # A run borrows an arena and a workspace region that an earlier run returned (fresh
        # ones where every one is in use by a concurrent run): memory the OS maps anew
        # faults in on first touch, page by page, some milliseconds a run for ResNet-50's
        # 7 MiB, and more where two threads fault at once. list.pop and append are atomic.
        scratch = self._scratch.pop() if self._scratch else (
            host_arena(self.memory_plan.arena_bytes, ALIGNMENT), host_arena(program.workspace_bytes, ALIGNMENT))
        try:
            arena, workspace = scratch
            env, self.last_profile = program.run(
                {n: np.asarray(inputs[n], order="C") for n in self.inputs}, workspace, HOST.allocate, arena)
            return {name: program.array(self.aliases.get(name, name), env, arena) for name in self.outputs}
        finally:
            self._scratch.append(scratch)

    def _native_program(self) -> Program | None:
        """The run as one native call (:mod:`.program`), built on first use; None where
        the native runtime has no port."""
        if self._program is None:
            pool = native_pool()
            if pool is None:
                return None
            self._program = Program(pool, self.steps, self.slots, self.inputs, self.constants, value_types(self.steps))
        return self._program

    def launch(self, step: Step[CompiledKernel], arrays: list[np.ndarray], clock: Clock) -> None:
        clock.start()
        # Inputs are C-contiguous and outputs fresh arrays of the kernel's buffers' types
        # that no operand of the step overlaps: the kernel's own checks are not needed.
        step.kernel.launch(arrays)
        clock.stop(step.name)

    def kernel_output_types(self, step: Step[CompiledKernel]) -> list[ArrayType]:
        return [(tuple(b.shape), np.dtype(b.dtype)) for b in step.kernel.outputs]

    def save_kernel(self, step: Step[CompiledKernel]) -> tuple[dict[str, Any], dict[str, bytes | str]]:
        return {"image": step.kernel.image()}, {"o": step.kernel.module.object_code}

    @classmethod
    def load_kernel(cls, saved: dict[str, Any], read: Callable[[str], bytes],
                    settings: dict[str, Any]) -> CompiledKernel:
        return CompiledKernel.from_image(saved["image"], read("o"))

    def report(self) -> str:
        """How many threads a run's kernels use, and why."""
        if self.threads is None:
            return f"{self.kernel_count} kernels"
        count, why = self.threads
        return f"{self.kernel_count} kernels on {count} thread(s) each: {why}"

    def saved_settings(self) -> dict[str, Any]:
        settings: dict[str, Any] = {"host_cpu": host_cpu()}
        if self.threads is not None:
            settings["threads"] = list(self.threads)
        return settings

    @classmethod
    def restore(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """The threads it was compiled for; refuses machine code compiled for another CPU."""
        if settings["host_cpu"] != host_cpu():
            raise CodegenError(f"this part was compiled for a {settings['host_cpu']} CPU, the host is a "
                               f"{host_cpu()}; recompile the model here")
        threads = settings.get("threads")
        return {"threads": (int(threads[0]), str(threads[1])) if threads else None}


__all__ = ["ALIGNMENT", "LlvmCpuPart"]
