"""The system C compiler: a region's C source built into a shared library, cached, loaded.

The compiler is ``$CC`` (split like a shell word list, so ``CC="ccache gcc"`` works) or
``cc`` on the PATH; none is a :class:`~hetero.plugin.CodegenError` that says to install
one. Flags: :data:`FLAGS`, and ``-fopenmp`` for a program printed for OpenMP.
``-ffp-contract=off`` keeps the compiler from fusing a multiply and an add (GCC's ISO
modes do not anyway; Clang's default would where the hardware has FMA), so every float
operation rounds as the interpreter's does (the C printer's contract); ``-O2`` still
vectorises the loops the printer marks independent.

Cache: a library is kept in ``private_folder("example_c")`` (under ``$HETERO_CACHE_DIR``
or ``~/.cache/hetero``) as ``<sha256>.so``, the digest of the compiler's version, the
flags and the source, so a source is compiled once per machine; it is built under a
temporary name and moved into place, so a concurrent reader sees all of it or nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
import ctypes
import functools
import hashlib
import os
from pathlib import Path
import shlex
import shutil
import subprocess
import tempfile

import numpy as np

from hetero.plugin import CodegenError, private_folder

FLAGS = ("-std=c99", "-O2", "-ffp-contract=off", "-fPIC", "-shared")
INSTALL_HINT = ("example_c needs a C compiler: none was found ($CC is unset and there is no cc on the PATH); "
                "install one (Debian/Ubuntu: apt-get install gcc; macOS: xcode-select --install) or set CC")


def find_compiler() -> tuple[str, ...] | None:
    """The compiler's command: ``$CC``'s words, or ``cc`` on the PATH; None without one."""
    words = tuple(shlex.split(os.environ.get("CC", "")))
    if words:
        return words if shutil.which(words[0]) else None
    found = shutil.which("cc")
    return (found,) if found else None


@functools.cache
def compiler_version(command: tuple[str, ...]) -> str:
    """What ``command --version`` says (part of every cache key)."""
    done = subprocess.run([*command, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def build_library(source: str, openmp: bool) -> Path:
    """The shared library of ``source``, from the cache or compiled into it."""
    command = find_compiler()
    if command is None:
        raise CodegenError(INSTALL_HINT)
    flags = (*FLAGS, "-fopenmp") if openmp else FLAGS
    digest = hashlib.sha256("\0".join((compiler_version(command), *flags, source)).encode()).hexdigest()
    folder = private_folder("example_c")
    library = folder / f"{digest}.so"
    if not library.is_file():
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as work:
            path, out = Path(work) / "region.c", Path(work) / "region.so"
            path.write_text(source)
            done = subprocess.run([*command, *flags, str(path), "-o", str(out), "-lm"],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                lines = [ln.strip() for ln in done.stderr.splitlines() if "error" in ln] or [done.stderr.strip()]
                raise CodegenError(f"example_c: {' '.join(command)} failed on the region's C: {lines[0]}")
            os.replace(out, library)
    return library


class CProgram:
    """A region's C source, compiled and loaded: its kernels by name, called on arrays."""

    def __init__(self, source: str, openmp: bool) -> None:
        self.source = source
        self.openmp = openmp
        self._library = ctypes.CDLL(str(build_library(source, openmp)))
        self._kernels: dict[str, ctypes._CFuncPtr] = {}

    def kernel(self, name: str, arity: int) -> ctypes._CFuncPtr:
        """The C function ``name`` taking ``arity`` pointers and returning a status."""
        if name not in self._kernels:
            fn = getattr(self._library, name)
            fn.argtypes = [ctypes.c_void_p] * arity
            fn.restype = ctypes.c_int
            self._kernels[name] = fn
        return self._kernels[name]

    def call(self, name: str, arrays: Sequence[np.ndarray]) -> int:
        """Run kernel ``name`` on ``arrays`` (C-contiguous, one a parameter); its status."""
        return int(self.kernel(name, len(arrays))(*(a.ctypes.data for a in arrays)))

    @property
    def members(self) -> list[tuple[str, str]]:
        """What an artifact keeps to build the program again."""
        return [("region.c", self.source)]

    @property
    def settings(self) -> dict[str, bool]:
        """How it was built, for the artifact's manifest."""
        return {"openmp": self.openmp}


__all__ = ["FLAGS", "INSTALL_HINT", "CProgram", "build_library", "compiler_version", "find_compiler"]
