"""C simulation: the emitted HLS C++ compiled with g++ into a shared library and called
through ctypes on numpy arrays, as Vitis's csim runs a kernel's C++ on the host.

:func:`compile_kernel` compiles an :class:`~hetero.plugins.fpga_hls.emit.HlsKernel`
with :data:`GXX_FLAGS` (the pragmas are comments to g++; the warnings that remain are
errors, so the code HLS gets is clean) and returns a :class:`CsimKernel` to call.

Cache: a library is kept under the SHA-256 of the compiler's version, the flags and
the source, in ``$HETERO_CACHE_DIR/fpga_hls_csim`` when that is set, else
``$XDG_CACHE_HOME/hetero/fpga_hls_csim`` (``~/.cache/hetero/fpga_hls_csim``), so a
kernel is compiled once per distinct source on this machine. The folder is made
private (0700) and refused, as the compile cache refuses its own
(:func:`hetero.plugin.private_folder`), when another user owns
it or others can write it: what is loaded from it runs as this process. A library is
written to a temporary name and moved into place, so a concurrent reader sees the
whole file or none.

Fixed point: a kernel with formats (:mod:`.fixed`) is compiled with ``-isystem`` the
ap_types folder of the installed hls4ml (the headers' own warnings are silenced by
the ``-Wno-`` flags above and by ``-isystem``); the folder's path is among the flags, so
it is part of the cache key. Without hls4ml that is a CodegenError with the install hint.

Errors: g++ missing is a :class:`CodegenError` saying to install it; a compile error
is a CodegenError naming the kernel and the first line g++ reports an error on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import ctypes
from dataclasses import dataclass
import functools
import hashlib
import os
from pathlib import Path
import shutil
import subprocess
import tempfile

import numpy as np

from hetero.plugin import CodegenError, InputError, private_folder
from hetero.plugins.fpga_hls.emit import HlsKernel
from hetero.plugins.fpga_hls.fixed import ap_types_dir

#: The flags C simulation compiles with (the ``-Wno-`` ones silence what the ap_types
#: headers raise and what HLS idioms are: unknown pragmas, unused labels; and two that the
#: legalised IR writes on purpose: ``x != x``, the NaN test, and a range check of an
#: unsigned index against zero, which the IR makes for every integer type alike).
GXX_FLAGS = ("-std=c++14", "-O2", "-Wall", "-Wextra", "-Werror", "-Wno-unknown-pragmas", "-Wno-unused-label",
             "-Wno-uninitialized", "-Wno-maybe-uninitialized", "-Wno-tautological-compare", "-Wno-type-limits",
             "-fPIC", "-shared")
INSTALL_HINT = "g++ was not found on the PATH; install it (Debian/Ubuntu: apt-get install g++) for C simulation"


@functools.cache
def find_gxx() -> str | None:
    """The path of g++, or None."""
    return shutil.which("g++")


@functools.cache
def _gxx_version(gxx: str) -> str:
    done = subprocess.run([gxx, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


@dataclass(frozen=True)
class CsimKernel:
    """A compiled kernel: ``library`` is the shared object, ``kernel`` what it was built from."""

    kernel: HlsKernel
    library: Path
    _fn: ctypes._CFuncPtr

    def run(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Call the kernel as :func:`hetero.core.ir.tir.run_func` runs a function: ``arrays``
        gives every parameter by name; each is copied into a C-contiguous array of the
        parameter's dtype, the kernel writes the copies, and all are returned by name."""
        copies = []
        for b in self.kernel.params:
            if b.name not in arrays:
                raise InputError(f"kernel {self.kernel.top}: no array for parameter {b.name}")
            a = np.array(arrays[b.name], dtype=b.dtype, copy=True, order="C")
            if a.shape != b.shape:
                raise InputError(f"kernel {self.kernel.top}: {b.name} must have shape {b.shape}, got {a.shape}")
            copies.append(a)
        self(*copies)
        return {b.name: a for b, a in zip(self.kernel.params, copies)}

    def ranges(self) -> dict[str, float]:
        """A calibration kernel's (:class:`~hetero.plugins.fpga_hls.emit.RangeExprPrinter`)
        largest finite magnitude stored to each tracked buffer since :meth:`reset_ranges`."""
        return dict(zip(self.kernel.tracked, map(float, self._ranges())))

    def reset_ranges(self) -> None:
        """Forget the magnitudes :meth:`ranges` reports."""
        data = self._ranges()
        ctypes.memset(data, 0, ctypes.sizeof(data))

    def _ranges(self) -> ctypes.Array:
        if not self.kernel.tracked:
            raise InputError(f"kernel {self.kernel.top} tracks no ranges; emit it with RangeExprPrinter")
        return (ctypes.c_float * len(self.kernel.tracked)).in_dll(ctypes.CDLL(str(self.library)), "hetero_ranges")

    def __call__(self, *arrays: np.ndarray) -> None:
        """Call the kernel in place on ``arrays``, one a parameter in order, each C-contiguous
        of the parameter's dtype and shape (checked: a wrong one would be read out of bounds)."""
        params = self.kernel.params
        if len(arrays) != len(params):
            raise InputError(f"kernel {self.kernel.top} takes {len(params)} arrays, got {len(arrays)}")
        for b, a in zip(params, arrays):
            if a.dtype != b.dtype or a.shape != b.shape or not a.flags.c_contiguous or not a.flags.writeable:
                raise InputError(f"kernel {self.kernel.top}: {b.name} must be a writeable C-contiguous "
                                 f"{b.dtype} array of shape {b.shape}, got {a.dtype} {a.shape}")
        self._fn(*(ctypes.c_void_p(a.ctypes.data) for a in arrays))


def compile_kernel(kernel: HlsKernel, flags: Sequence[str] = (), cache: Path | None = None) -> CsimKernel:
    """``kernel`` compiled with :data:`GXX_FLAGS` (a fixed-point kernel with ``-isystem``
    the ap_types headers' folder, :func:`~hetero.plugins.fpga_hls.fixed.ap_types_dir`;
    ``flags`` after them) into a cached library, loaded."""
    gxx = find_gxx()
    if gxx is None:
        raise CodegenError(f"kernel {kernel.top}: {INSTALL_HINT}")
    if kernel.formats is not None:
        try:
            flags = ("-isystem", str(ap_types_dir()), *flags)
        except CodegenError as exc:
            raise CodegenError(f"kernel {kernel.top}: {exc}") from None
    all_flags = (*GXX_FLAGS, *flags)
    digest = hashlib.sha256("\0".join((_gxx_version(gxx), *all_flags, kernel.source)).encode()).hexdigest()
    folder = private_folder("fpga_hls_csim", cache)
    library = folder / f"{kernel.top}-{digest[:32]}.so"
    if not library.is_file():
        _build(gxx, kernel, all_flags, folder, library)
    return CsimKernel(kernel, library, _load(str(library), kernel.top, len(kernel.params)))


def _build(gxx: str, kernel: HlsKernel, flags: Sequence[str], folder: Path, library: Path) -> None:
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as work:
        source = Path(work) / f"{kernel.top}.cpp"
        source.write_text(kernel.source)
        (Path(work) / f"{kernel.top}.h").write_text(kernel.header)
        out = Path(work) / "kernel.so"
        done = subprocess.run([gxx, *flags, str(source), "-o", str(out)], capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            raise CodegenError(f"kernel {kernel.top}: g++ failed: {first_error(done.stderr)}")
        os.replace(out, library)


def first_error(stderr: str) -> str:
    """The first line of g++'s output that reports an error (else its first line)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return next((ln for ln in lines if "error" in ln), lines[0] if lines else "no message")


@functools.cache
def _load(path: str, top: str, arity: int) -> ctypes._CFuncPtr:
    fn = getattr(ctypes.CDLL(path), top)
    fn.argtypes = [ctypes.c_void_p] * arity
    fn.restype = None
    return fn
