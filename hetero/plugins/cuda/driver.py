"""The CUDA driver, through ``cuda-bindings`` (the ``cuda`` extra): the GPU as a hetero device.

:func:`probe` says whether this machine can run the backend's kernels, and if not, why,
in words for ``hetero plugins`` and for the error a run raises: the bindings are not
installed, the driver library is missing (``cuInit`` raises rather than returning an
error code when ``libcuda.so`` cannot be loaded), or the driver finds no GPU
(``CUDA_ERROR_NO_DEVICE``). :class:`CudaDevice` is the
:class:`~hetero.core.exec.device.Device` the cuda backend's parts run on: its arrays
are :class:`CudaArray` (device memory from ``cuMemAlloc``, freed when the array is
dropped), copies in and out are ``cuMemcpyHtoD``/``cuMemcpyDtoH``, and a reshape is the
same memory with another shape, as a numpy view. :meth:`CudaDevice.load` loads a
kernel's PTX as a module (the driver compiles it for the GPU it finds) and returns a
:class:`LoadedKernel` whose :meth:`~LoadedKernel.launch` passes device pointers as the
kernel's parameters.

Everything runs on the device's primary context on the default stream, in order;
:meth:`CudaDevice.synchronize` waits for it, and events time the kernels for the
profile. This module is the only one that touches the driver, so a machine without
one never imports the bindings' native parts unless asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
import math
from typing import Any

import numpy as np

from hetero.plugin import DeviceUnavailableError, HeteroError

#: What to install for the runtime.
INSTALL_HINT = "install hetero's cuda extra (pip install 'hetero[cuda]') for the CUDA driver bindings"


class NoCudaDeviceError(DeviceUnavailableError):
    """The machine has no GPU the CUDA driver can use (or no driver, or no bindings)."""


class CudaDriverError(HeteroError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


@dataclass(frozen=True)
class Probe:
    """What :func:`probe` found: a usable GPU (its name and compute capability) or why not."""

    ok: bool
    reason: str = ""
    name: str = ""
    arch: str = ""
    memory_bytes: int = 0

    @property
    def summary(self) -> str:
        """One line for ``hetero plugins``."""
        if self.ok:
            return f"{self.name} ({self.arch}, {self.memory_bytes / 2**30:.0f} GiB)"
        return f"no CUDA device found: {self.reason}; kernels compile to PTX, and running them needs a GPU"


def _bindings() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver


def _check(result: Any, call: str) -> Any:
    """The values a driver call returns after its CUresult; CudaDriverError naming ``call``."""
    driver = _bindings()
    err, *values = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(err)
        _, text = driver.cuGetErrorString(err)
        raise CudaDriverError(f"{call} failed: {_text(name)} ({_text(text)})")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _text(value: Any) -> str:
    return value.decode(errors="replace").rstrip("\0") if isinstance(value, bytes) else str(value)


@cache
def probe() -> Probe:
    """Whether this process can run kernels on GPU 0, and if not, why (cached)."""
    driver = _bindings()
    if driver is None:
        return Probe(False, f"the cuda-bindings package is not installed ({INSTALL_HINT})")
    try:
        result = driver.cuInit(0)
    except Exception as exc:  # noqa: BLE001 - the bindings raise when libcuda.so cannot be loaded
        return Probe(False, f"the NVIDIA driver library (libcuda.so) could not be loaded ({type(exc).__name__})")
    err = result[0] if isinstance(result, tuple) else result
    if err == driver.CUresult.CUDA_ERROR_NO_DEVICE:
        return Probe(False, "the NVIDIA driver is installed but sees no GPU (CUDA_ERROR_NO_DEVICE)")
    try:
        _check(result, "cuInit")
        if _check(driver.cuDeviceGetCount(), "cuDeviceGetCount") < 1:
            return Probe(False, "the NVIDIA driver reports no GPU")
        device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
        name = _text(_check(driver.cuDeviceGetName(128, device), "cuDeviceGetName"))
        attr = driver.CUdevice_attribute
        major = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                       "cuDeviceGetAttribute")
        minor = _check(driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
                       "cuDeviceGetAttribute")
        memory = _check(driver.cuDeviceTotalMem(device), "cuDeviceTotalMem")
    except CudaDriverError as exc:
        return Probe(False, str(exc))
    return Probe(True, name=name, arch=f"sm_{major}{minor}", memory_bytes=int(memory))


def require_device() -> Probe:
    """The probe of a usable GPU; NoCudaDeviceError saying plainly why there is none."""
    found = probe()
    if not found.ok:
        raise NoCudaDeviceError(f"cuda: no CUDA device found: {found.reason}. The part was compiled (its PTX "
                                "is in the artifact and in --dump); run it on a machine with an NVIDIA GPU, or "
                                "compile without the cuda target")
    return found


class CudaArray:
    """An array in GPU memory: a device pointer, a shape and a dtype.

    ``base`` keeps the allocation alive for a reshaped array that shares it; the
    allocation is freed when the last array holding it goes.
    """

    def __init__(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype, base: _Allocation) -> None:
        self.pointer = pointer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.base = base

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def reshape(self, shape: Sequence[int]) -> CudaArray:
        """The same memory with another shape of as many elements."""
        if math.prod(shape) != math.prod(self.shape):
            raise ValueError(f"cannot reshape an array of shape {self.shape} into {tuple(shape)}")
        return CudaArray(self.pointer, tuple(shape), self.dtype, self.base)

    def __repr__(self) -> str:
        return f"CudaArray({self.dtype}{list(self.shape)} at {self.pointer:#x})"


class _Allocation:
    """Device memory from ``cuMemAlloc``, freed with the object."""

    def __init__(self, nbytes: int) -> None:
        driver = _bindings()
        # cuMemAlloc refuses zero bytes; an empty array still needs a distinct pointer.
        self.pointer = int(_check(driver.cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc({nbytes} bytes)"))

    def __del__(self) -> None:
        driver = _bindings()
        if driver is not None and getattr(self, "pointer", 0):
            driver.cuMemFree(self.pointer)  # at interpreter exit the context may be gone: ignore the result
            self.pointer = 0


class LoadedKernel:
    """One kernel of a loaded PTX module, with its launch dimensions."""

    def __init__(self, module: Any, function: Any, name: str, grid: tuple[int, int, int],
                 block: tuple[int, int, int]) -> None:
        self.module = module
        self.function = function
        self.name = name
        self.grid = grid
        self.block = block

    def launch(self, args: Sequence[CudaArray]) -> None:
        """Launch on the default stream with ``args``' device pointers as the parameters."""
        driver = _bindings()
        pointers = [np.array([a.pointer], dtype=np.uint64) for a in args]
        params = np.array([p.ctypes.data for p in pointers], dtype=np.uint64)
        _check(driver.cuLaunchKernel(self.function, *self.grid, *self.block, 0, 0,
                                     params.ctypes.data if args else 0, 0), f"cuLaunchKernel({self.name})")


class CudaDevice:
    """GPU 0 as a hetero :class:`~hetero.core.exec.device.Device` (name ``"cuda:0"``)."""

    name = "cuda:0"

    def __init__(self) -> None:
        self._context: Any = None

    def _ready(self) -> Any:
        """The driver's bindings, with GPU 0's primary context current (made on first use);
        NoCudaDeviceError where there is no GPU."""
        driver = _bindings()
        if self._context is None:
            require_device()
            device = _check(driver.cuDeviceGet(0), "cuDeviceGet")
            self._context = _check(driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        _check(driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")
        return driver

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> CudaArray:
        self._ready()
        dtype = np.dtype(dtype)
        memory = _Allocation(math.prod(shape) * dtype.itemsize)
        return CudaArray(memory.pointer, tuple(shape), dtype, memory)

    def copy_in(self, array: np.ndarray) -> CudaArray:
        host = np.asarray(array, order="C")  # ascontiguousarray would make a 0-d array 1-d
        out = self.allocate(host.shape, host.dtype)
        if host.nbytes:
            _check(self._ready().cuMemcpyHtoD(out.pointer, host.ctypes.data, host.nbytes), "cuMemcpyHtoD")
        return out

    def copy_out(self, array: CudaArray) -> np.ndarray:
        host = np.empty(array.shape, array.dtype)
        if host.nbytes:
            _check(self._ready().cuMemcpyDtoH(host.ctypes.data, array.pointer, host.nbytes), "cuMemcpyDtoH")
        return host

    def describe(self, array: Any) -> tuple[tuple[int, ...], np.dtype] | None:
        return (array.shape, array.dtype) if isinstance(array, CudaArray) else None

    def load(self, ptx: str, name: str, grid: tuple[int, int, int], block: tuple[int, int, int]) -> LoadedKernel:
        """Kernel ``name`` of ``ptx``, compiled by the driver for this GPU."""
        driver = self._ready()
        image = np.frombuffer(ptx.encode() + b"\0", dtype=np.uint8)
        module = _check(driver.cuModuleLoadData(image.ctypes.data), f"cuModuleLoadData({name})")
        function = _check(driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        return LoadedKernel(module, function, name, grid, block)

    def synchronize(self) -> None:
        """Wait for every launch and copy so far."""
        _check(self._ready().cuCtxSynchronize(), "cuCtxSynchronize")

    def timer(self) -> EventTimer:
        """A timer of launches on the default stream, by CUDA events."""
        self._ready()
        return EventTimer()

    def __repr__(self) -> str:
        return f"CudaDevice({probe().summary})"


class EventTimer:
    """Records an event before the first launch and after each; :meth:`seconds` gives the
    time between consecutive events once the stream has finished."""

    def __init__(self) -> None:
        self._events: list[Any] = []
        self.mark()

    def mark(self) -> None:
        driver = _bindings()
        event = _check(driver.cuEventCreate(0), "cuEventCreate")
        _check(driver.cuEventRecord(event, 0), "cuEventRecord")
        self._events.append(event)

    def seconds(self) -> list[float]:
        driver = _bindings()
        _check(driver.cuEventSynchronize(self._events[-1]), "cuEventSynchronize")
        times = [float(_check(driver.cuEventElapsedTime(a, b), "cuEventElapsedTime")) / 1e3
                 for a, b in zip(self._events, self._events[1:])]
        for event in self._events:
            driver.cuEventDestroy(event)
        self._events = []
        return times
