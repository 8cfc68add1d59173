"""Targets: the host CPU as LLVM sees it, target machines for named triples, and
ahead-of-time output (object files, assembly) of a rendered function.

Every module goes through LLVM's O3 pipeline with loop and SLP vectorisation on,
for the target machine it will run on, so the vector width follows the CPU (LLVM's
own loop unrolling only where a kernel reduces, :func:`unrolls`); code that
runs once (``quick``: a weight's packing, run while compiling) skips the pipeline and
is emitted by LLVM's fast instruction selector, since its compile would cost more than
all its runs. A module with ``vpdpbusd`` versions of ``dot4_u8s8`` (:mod:`.dot4`) gets
LLVM's always-inliner after the pipeline, to put the instructions the vectorizer
called into the loops.
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm
from llvmlite import ir

from hetero.plugin import CodegenError
from hetero.plugin.tir import Block, IterKind, PrimFunc, walk
from hetero.plugins.llvm_cpu.codegen import render
from hetero.plugins.llvm_cpu.dot4 import SCALAR

#: In a module's text where it has vector versions of dot4_u8s8 (hetero.plugins.llvm_cpu.dot4).
DOT4_VERSION = f"{SCALAR}.v"

#: Triples hetero produces ahead-of-time code for; LLVM may know more.
AOT_TRIPLES = ("x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu")
_OPT_LEVEL = 3
#: The codegen level of ``quick`` code. Measured on ResNet-50's 54 weight-packing stages
#: (AMD EPYC znver5): O3 pipeline and codegen 3.80 s to compile, 0.024 s to run; no
#: pipeline and codegen 0 (fast instruction selection) 0.16 s and 0.05 s.
_QUICK_OPT_LEVEL = 0


@functools.cache
def _initialise() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


def host_triple() -> str:
    """The triple of the running process."""
    _initialise()
    return llvm.get_process_triple()


@functools.cache
def host_cpu() -> str:
    """The host CPU's name as LLVM reports it ("znver4", "neoverse-v2", ...)."""
    _initialise()
    return llvm.get_host_cpu_name()


@functools.cache
def host_features() -> dict[str, bool]:
    """The host CPU's features as LLVM reports them ({"avx2": True, "fma": True, ...})."""
    _initialise()
    return dict(llvm.get_host_cpu_features())


def host_target_machine(quick: bool = False) -> llvm.TargetMachine:
    """A JIT target machine for this CPU, all of its features enabled; ``quick``: one that
    emits code fast rather than fast code (for code that runs once)."""
    _initialise()
    return _host_machine(_QUICK_OPT_LEVEL if quick else _OPT_LEVEL)


def engine_target_machine() -> llvm.TargetMachine:
    """A fresh host target machine for one execution engine, which takes ownership of it
    and frees it with itself (so a shared one would dangle once an engine is dropped)."""
    _initialise()
    return _host_machine.__wrapped__(_OPT_LEVEL)


@functools.cache
def _host_machine(level: int) -> llvm.TargetMachine:
    target = llvm.Target.from_triple(host_triple())
    return target.create_target_machine(cpu=host_cpu(), features=_host_feature_string(), opt=level,
                                        codemodel="jitdefault", jit=True)


@functools.cache
def _host_feature_string() -> str:
    # Asked once: every loaded kernel's engine gets a target machine of its own, and
    # LLVM's feature query took a third of making one.
    return llvm.get_host_cpu_features().flatten()


def target_machine(triple: str, cpu: str = "generic", features: str = "") -> llvm.TargetMachine:
    """A target machine producing position-independent code for ``triple`` and ``cpu``."""
    _initialise()
    try:
        target = llvm.Target.from_triple(triple)
    except RuntimeError as exc:
        raise CodegenError(f"target {triple!r}: LLVM does not know it ({exc}); "
                           f"hetero builds for {', '.join(AOT_TRIPLES)}") from exc
    return target.create_target_machine(cpu=cpu, features=features, opt=_OPT_LEVEL, reloc="pic",
                                        codemodel="default")


def optimise(module: ir.Module, machine: llvm.TargetMachine, quick: bool = False,
             unroll: bool = True) -> llvm.ModuleRef:
    """Parse ``module`` for ``machine`` and run the O3 pipeline on it (none when ``quick``;
    without LLVM's own loop unrolling unless ``unroll``: loops the schedule marked
    unrolled still are)."""
    return optimise_text(module_text(module, machine), module.name, machine, quick, unroll)


def module_text(module: ir.Module, machine: llvm.TargetMachine) -> str:
    """``module``'s LLVM IR text, for ``machine``'s triple and data layout."""
    module.triple = machine.triple
    module.data_layout = str(machine.target_data)
    return str(module)


def optimise_text(text: str, name: str, machine: llvm.TargetMachine, quick: bool = False,
                  unroll: bool = True) -> llvm.ModuleRef:
    """:func:`optimise` of module ``name`` given as :func:`module_text`: what a process
    that has no ``ir.Module`` (a compile worker) runs."""
    try:
        parsed = llvm.parse_assembly(text)
        parsed.verify()
    except RuntimeError as exc:
        raise CodegenError(f"module {name}: LLVM rejected the generated IR: {exc}") from exc
    if quick:
        return parsed
    tuning = llvm.create_pipeline_tuning_options(speed_level=_OPT_LEVEL)
    tuning.loop_vectorization = True
    tuning.slp_vectorization = True
    tuning.loop_unrolling = unroll
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(parsed, builder)
    if DOT4_VERSION in text:
        # The vectorizer called dot4's vpdpbusd versions after the pipeline's inliner ran.
        inline = llvm.create_new_module_pass_manager()
        inline.add_always_inliner_pass()
        inline.run(parsed, builder)
    return parsed


def unrolls(func: PrimFunc) -> bool:
    """Whether LLVM's own loop unrolling runs on ``func``: not where every stage is
    injective (each iteration writes its own element and folds nothing), whose loops
    the schedule vectorized and LLVM's unrolling only multiplies (a blocked Mul: 19.6 KB
    of optimised IR, 3.7 KB without; loops the schedule marked unrolled still are).

    Measured on this project's 2-core AMD EPYC (znver5), 1 thread, both in one process:
    LLVM's time on DenseNet-121 8.11 to 5.67 s, ShuffleNet 1.92 to 1.43 s, Inception v1
    8.25 to 6.84 s, with bit-identical outputs and the same run time (DenseNet-121 31.6 /
    31.4 ms, ShuffleNet 5.92 / 5.95 ms, ResNet-50 47.3 / 47.9 ms medians). Kernels that
    reduce keep it: with it off everywhere ShuffleNet ran 10.4 ms instead of 6.9 (fastest
    runs) and ResNet-50 some 4% slower.
    """
    blocks = [s for s in walk(func.body) if isinstance(s, Block)]
    return not blocks or any(not b.iters or any(it.kind is IterKind.REDUCTION for it in b.iters) for b in blocks)


def _compiled(func: PrimFunc, triple: str, cpu: str) -> tuple[llvm.TargetMachine, llvm.ModuleRef]:
    machine = target_machine(triple, cpu)
    host = triple == host_triple() and cpu == host_cpu()
    return machine, optimise(render(func, host=host).module, machine, unroll=unrolls(func))


def emit_object(func: PrimFunc, triple: str, cpu: str = "generic") -> bytes:
    """An ELF object file of ``func`` for ``triple``/``cpu``.

    It defines ``void <func.name>(ptr ... params)`` (plus one symbol per stage); the
    caller links the C library, which provides ``malloc``, ``free`` and libm.
    """
    machine, module = _compiled(func, triple, cpu)
    return machine.emit_object(module)


def emit_assembly(func: PrimFunc, triple: str, cpu: str = "generic") -> str:
    """The assembly text of :func:`emit_object`'s object."""
    machine, module = _compiled(func, triple, cpu)
    return machine.emit_assembly(module)
