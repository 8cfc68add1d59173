"""NVVM IR to PTX: find libdevice, link it, internalise it, optimise, emit.

libdevice (``libdevice.10.bc``, shipped with CUDA and with the ``nvidia-cuda-nvcc``
wheel) holds the transcendental functions (``__nv_expf``, ``__nv_tanhf``, ...), which
LLVM's NVPTX target cannot select from ``llvm.exp`` or libm calls. :func:`emit_ptx`
links it into a kernel's module and makes every function but the kernels internal
before O3, so the optimiser drops what the kernel does not call (the PTX stays a few
KB instead of 700 KB).

This module imports nothing of hetero: the renderer runs it as a script in a child
process (``python libdevice.py`` reading a JSON request on stdin, writing the PTX on
stdout), so that an LLVM abort in instruction selection ends the child, not the
user's process, and the child starts in a tenth of a second instead of importing
hetero.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
from pathlib import Path
import sys

#: The triple of 64-bit NVPTX (CUDA's driver API).
TRIPLE = "nvptx64-nvidia-cuda"


def find_libdevice() -> Path | None:
    """The path of ``libdevice.10.bc``: under ``$CUDA_HOME`` or ``$CUDA_PATH``, then the
    CUDA toolkits in ``/usr/local``, then NVIDIA's wheels (``nvidia-nvvm`` for CUDA 13,
    ``nvidia-cuda-nvcc`` before it; found without importing them); None if there is none."""
    roots = [Path(os.environ[k]) for k in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(k)]
    roots += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*"), reverse=True)]
    roots += wheel_dirs()
    for root in roots:
        path = root / "nvvm" / "libdevice" / "libdevice.10.bc"
        if path.is_file():
            return path
    return None


def wheel_dirs() -> list[Path]:
    """The folders NVIDIA's CUDA wheels install into, newest layout first: ``nvidia/cu13``
    (CUDA 13: ``bin/ptxas`` from ``nvidia-cuda-nvcc``, ``nvvm/libdevice`` from
    ``nvidia-nvvm``), then ``nvidia/cuda_nvcc`` (CUDA 12). Found through the ``nvidia``
    namespace package without importing anything of CUDA."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    found = []
    for base in spec.submodule_search_locations:
        for sub in ("cu13", "cuda_nvcc"):
            if (Path(base) / sub).is_dir():
                found.append(Path(base) / sub)
    return found


def emit_ptx(llvm_ir: str, arch: str, ptx_version: int, libdevice: str | None, kernels: list[str]) -> str:
    """The PTX of the NVVM IR module ``llvm_ir`` for ``arch`` (``sm_80``) at PTX ISA
    ``ptx_version`` (78 for 7.8): libdevice linked when ``libdevice`` names it, every
    function but ``kernels`` internalised, O3. May abort the process on IR that NVPTX
    cannot select: the renderer calls it in a child process (:func:`main`)."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    tm = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=f"+ptx{ptx_version}", opt=3)
    module = llvm.parse_assembly(llvm_ir)
    module.triple = TRIPLE
    module.data_layout = str(tm.target_data)
    if libdevice is not None:
        lib = llvm.parse_bitcode(Path(libdevice).read_bytes())
        lib.triple = TRIPLE
        lib.data_layout = module.data_layout
        module.link_in(lib)
    for fn in module.functions:
        if not fn.is_declaration and fn.name not in kernels:
            fn.linkage = llvm.Linkage.internal
    for gv in module.global_variables:
        if not gv.is_declaration:
            gv.linkage = llvm.Linkage.internal
    module.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(module, pb)
    return tm.emit_assembly(module)


def main() -> None:
    """The child's entry: a JSON request on stdin (the arguments of :func:`emit_ptx`),
    the PTX on stdout."""
    request = json.load(sys.stdin)
    sys.stdout.write(emit_ptx(request["llvm_ir"], request["arch"], request["ptx_version"],
                              request["libdevice"], request["kernels"]))


if __name__ == "__main__":
    main()
