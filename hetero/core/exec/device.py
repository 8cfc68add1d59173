"""Devices: where a compiled part's values live at run time, and the copies between them.

After ONNX Runtime's allocator and ``IDataTransfer`` interfaces. A :class:`Device`
allocates its own arrays, copies a host (numpy) array in and one of its arrays out,
and says what one of its arrays is (shape and dtype); a device that can copy from
another device directly, without going through the host (peer to peer, or two
memories of one board), also implements :class:`CopiesFrom`. A compiled part that
runs on a device says so with its ``device`` attribute (the
:class:`~hetero.core.plugin.capabilities.OnDevice` capability); every other part is
on :data:`HOST`, whose arrays are numpy arrays.

The executable keeps each value on the device that produced it, hands a part the
arrays of its own device, and moves a value between devices with :func:`transfer`:
``dst.copy_from`` where it takes ``src``'s arrays, else ``src.copy_out`` then
``dst.copy_in``. A device is known by its :attr:`~Device.name`: parts whose devices
share a name share that memory, so their values never move between them. The name
``"host"`` is :data:`HOST`'s.

>>> a = HOST.copy_in(np.arange(6).reshape(2, 3).T)     # doctest: +SKIP
>>> a.flags.c_contiguous                               # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

#: What a device says one of its arrays is: its shape and dtype.
ArrayType = tuple[tuple[int, ...], np.dtype]


@runtime_checkable
class Device(Protocol):
    """A memory that compiled parts run on: its arrays, and copies to and from the host.

    ``name`` identifies the memory (parts on devices of one name share it);
    ``allocate`` returns an uninitialised array of the device; ``copy_in`` copies a
    host array onto the device, ``copy_out`` one of its arrays into a fresh,
    C-contiguous numpy array; ``describe`` gives an array's shape and dtype, or
    None for anything that is not an array of this device (which the executable
    reports as a bug in the part that returned it).
    """

    name: str

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """An uninitialised array of ``shape`` and ``dtype`` on this device."""
        ...

    def copy_in(self, array: np.ndarray) -> Any:
        """A copy of the host array ``array`` on this device."""
        ...

    def copy_out(self, array: Any) -> np.ndarray:
        """A copy of this device's ``array`` as a fresh C-contiguous numpy array."""
        ...

    def describe(self, array: Any) -> ArrayType | None:
        """``array``'s shape and dtype, or None if it is not an array of this device."""
        ...


@runtime_checkable
class CopiesFrom(Protocol):
    """A device that copies arrays of some other devices directly (device to device)."""

    def can_copy_from(self, source: Device) -> bool:
        """Whether :meth:`copy_from` takes arrays of ``source``."""
        ...

    def copy_from(self, array: Any, source: Device) -> Any:
        """A copy on this device of ``array``, an array of ``source``."""
        ...


class NumpyDevice:
    """A device whose arrays are numpy arrays in host memory.

    :data:`HOST` is one; a simulator stands for its device's separate memory with
    another of its own name, so that moving a value there is a copy, as on the
    hardware. Copies in and out are fresh C-contiguous arrays.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def copy_in(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, order="C", copy=True)

    def copy_out(self, array: Any) -> np.ndarray:
        return np.array(array, order="C", copy=True)

    def describe(self, array: Any) -> ArrayType | None:
        return (array.shape, array.dtype) if isinstance(array, np.ndarray) else None

    def __repr__(self) -> str:
        return f"NumpyDevice({self.name!r})"


#: The host: numpy arrays in the process's memory. Parts that declare no device run here.
HOST = NumpyDevice("host")


def transfer(array: Any, src: Device, dst: Device) -> Any:
    """A copy on ``dst`` of ``array``, an array of ``src``: directly where ``dst``
    copies from ``src``, else through the host (``src.copy_out``, then ``dst.copy_in``)."""
    if dst.name == HOST.name:
        return src.copy_out(array)
    if src.name == HOST.name:
        return dst.copy_in(array)
    if isinstance(dst, CopiesFrom) and dst.can_copy_from(src):
        return dst.copy_from(array, src)
    return dst.copy_in(src.copy_out(array))


def run_from_host(run: Callable[[Mapping[str, Any]], Mapping[str, Any]], device: Device,
                  inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``run`` (a part's ``run``, or its ``run_intermediates``) on host arrays, its results
    as host arrays: on a device other than the host, the inputs are copied in and the
    results copied out."""
    if device.name == HOST.name:
        return dict(run(inputs))
    results = run({name: device.copy_in(array) for name, array in inputs.items()})
    return {name: device.copy_out(value) for name, value in results.items()}
