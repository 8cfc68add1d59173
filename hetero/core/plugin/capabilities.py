"""The optional capabilities of a compiled part, each a runtime-checkable Protocol.

Every :class:`~hetero.core.plugin.backend.CompiledPart` has ``inputs``, ``outputs``,
``run`` and ``artifact``. A part may offer more; the core asks for each of these with
``isinstance(part, Capability)`` and never probes for attribute names, so this page
is the whole list. A part offers a capability by having its members (no base class
to inherit): ``isinstance`` checks that they are there.

- :class:`RunsIntermediates` (``run_intermediates(inputs)``): ``hetero compare``
  charges numerical errors to the node that made them;
- :class:`Reports` (``report()``): a section of :meth:`Executable.report` per part;
- :class:`DrawsTimeline` (``timeline_html()``): :meth:`Executable.timelines` and
  ``hetero run --timeline``;
- :class:`RecordsTimeline` (``record_timeline``): ``--timeline`` on a loaded file;
- :class:`Profiles` (``last_profile``): the executable's per-kernel times;
- :class:`CountsKernels` (``kernel_count``): ``hetero compile``'s summary line;
- :class:`OnDevice` (``device``): where the executable keeps the part's values
  (:mod:`hetero.core.exec.device`); :func:`device_of` answers for any part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from hetero.core.exec.device import HOST, Device


@runtime_checkable
class RunsIntermediates(Protocol):
    """A part that can show every value it materialises, not only its outputs.

    ``run_intermediates(inputs)`` runs like ``run`` and returns the outputs plus each
    intermediate value by its graph value name (a fused group's inner values stay in
    registers: only what the part writes to memory). ``hetero compare`` then charges
    a numerical error to the node that made it instead of to the whole region.
    Arrays are the part's device's, as ``run``'s are.
    """

    def run_intermediates(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The part's outputs and intermediates on ``inputs``, by value name."""
        ...


@runtime_checkable
class Reports(Protocol):
    """A part that describes its last run in its own terms (cycles, utilisation...).

    :meth:`~hetero.core.runtime.executable.Executable.report` appends ``report()``'s
    text as a section "region rN on BACKEND".
    """

    def report(self) -> str:
        """What the last run cost, as text (a line saying so before any run)."""
        ...


@runtime_checkable
class DrawsTimeline(Protocol):
    """A part that draws its last run's execution timeline.

    ``timeline_html()`` is a self-contained HTML page;
    :meth:`~hetero.core.runtime.executable.Executable.timelines` collects one per region.
    """

    def timeline_html(self) -> str:
        """The last run's timeline as one HTML page; a named error if none was recorded."""
        ...


@runtime_checkable
class RecordsTimeline(Protocol):
    """A part whose runs record a timeline while ``record_timeline`` is true.

    Recording costs time, so it is off unless asked for at compile time; ``hetero run
    --timeline`` turns it on for the parts of a loaded executable.
    """

    record_timeline: bool


@runtime_checkable
class Profiles(Protocol):
    """A part that times its own kernels.

    ``last_profile`` lists ``(kernel name, seconds)`` for the last run, in the order
    they ran; names are unique within the part. The executable adds them to its
    per-kernel times (prefixed by the region when there are several) instead of one
    entry for the whole part.
    """

    last_profile: Sequence[tuple[str, float]]


@runtime_checkable
class CountsKernels(Protocol):
    """A part made of compiled kernels: ``kernel_count`` is how many one run launches."""

    @property
    def kernel_count(self) -> int:
        """The number of kernels a run launches."""
        ...


@runtime_checkable
class OnDevice(Protocol):
    """A part that runs on a :class:`~hetero.core.exec.device.Device` other than the host.

    Its ``run`` takes and returns that device's arrays; the executable copies values
    in and out of it as the partition's transfers say, and leaves them there between
    consecutive parts on the same device. A part without ``device`` is on the host.
    """

    device: Device


def device_of(part: object) -> Device:
    """The device ``part`` runs on: the one it declares, else :data:`~hetero.core.exec.device.HOST`."""
    return part.device if isinstance(part, OnDevice) else HOST


__all__ = [
    "CountsKernels", "DrawsTimeline", "OnDevice", "Profiles", "RecordsTimeline", "Reports",
    "RunsIntermediates", "device_of",
]

