"""The llvm_cpu backend: tensor IR → LLVM IR (llvmlite) → machine code for the host CPU.

Its stages, each inspectable: ``tir`` (the scheduled :class:`PrimFunc`) → ``llvm``
(:func:`render`, then :attr:`CompiledKernel.llvm_ir` after O3) → ``asm``
(:attr:`CompiledKernel.assembly`, or :func:`emit_assembly` for another target).
"""

from hetero.plugins.llvm_cpu.codegen import Entry, RenderedModule, render
from hetero.plugins.llvm_cpu.kernel import CompiledKernel, chunks, compile_kernel
from hetero.plugins.llvm_cpu.target import (
    AOT_TRIPLES, emit_assembly, emit_object, host_cpu, host_features, host_target_machine, host_triple,
    target_machine,
)

from hetero.plugin import hookimpl


@hookimpl
def hetero_backends() -> list:
    """The llvm_cpu backend, registered through the ``hetero.backends`` entry point."""
    from hetero.plugins.llvm_cpu.backend import LlvmCpuBackend

    return [LlvmCpuBackend()]


__all__ = [
    "AOT_TRIPLES", "CompiledKernel", "Entry", "RenderedModule", "chunks", "compile_kernel",
    "emit_assembly", "emit_object", "hetero_backends", "host_cpu", "host_features", "host_target_machine", "host_triple",
    "render", "target_machine",
]
