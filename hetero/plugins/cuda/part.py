"""A compiled cuda region: its kernels launched in order on the GPU, values kept there.

:class:`CudaPart` is what :meth:`~hetero.plugins.cuda.backend.CudaBackend.compile`
returns: a :class:`~hetero.plugin.parts.StepPart` whose steps are graph nodes or fused
groups, each built as one kernel per stage (:func:`~hetero.plugins.cuda.build.build_function`,
kept as :class:`StepKernels`), or views (a Reshape of a value the part made: the same
device memory with another shape, no launch). Its
``device`` is the GPU (:class:`~hetero.plugins.cuda.driver.CudaDevice`), so its
``run`` takes and returns device arrays and the executable moves values in and out as
the partition's transfers say, leaving them on the GPU between consecutive cuda regions.
The region's constants (weights) are copied to the GPU once, on the first run.

With no GPU the part still compiles, saves and reports (its PTX is checked by ptxas);
copying to it or running it raises
:class:`~hetero.plugins.cuda.driver.NoCudaDeviceError` saying so. With the backend's
``cuda_emulate`` option, the part runs instead on :data:`EMULATOR`, which executes the
scheduled tensor IR of each kernel (the function its PTX was rendered from) in hetero's
interpreter, threads and barriers included: slow, and a check of the schedules and the
part's bookkeeping, not of the PTX or the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import math
import pickle
from typing import Any

import numpy as np

from hetero.plugin import GPU_PRESETS, Device, GpuSpec, NumpyDevice, as_dtype
from hetero.plugin.parts import ArrayType, Clock, Step, StepPart
from hetero.plugin.tir import Buffer, PrimFunc, run_func
from hetero.plugins.cuda.build import BuiltFunction
from hetero.plugins.cuda.driver import CudaDevice, EventTimer, LoadedKernel

#: The GPU every non-emulated part runs on (it reaches the driver on first use).
GPU = CudaDevice()
#: Where emulated parts keep their values: host memory standing for the GPU's.
EMULATOR = NumpyDevice("cuda_emulated")


@dataclass(frozen=True)
class Kernel:
    """One kernel as the part keeps it: PTX, launch, what ptxas reported, and (emulated
    parts only) the scheduled function it was rendered from."""

    name: str
    ptx: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    shared_bytes: int
    spill_bytes: int
    func: PrimFunc | None = None

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class StepKernels:
    """One step's kernels, launched in order on the step's inputs, outputs (of types
    ``outputs``) and then the ``workspaces`` they share, which a run allocates."""

    kernels: tuple[Kernel, ...]
    outputs: tuple[ArrayType, ...]
    workspaces: tuple[ArrayType, ...]


def step_kernels(built: BuiltFunction, inputs: int, emulate: bool) -> StepKernels:
    """The kernels of one built function whose first ``inputs`` parameters are the step's inputs."""
    kernels = tuple(Kernel(k.kernel.name, k.kernel.ptx, k.kernel.launch.grid, k.kernel.launch.block,
                           k.report.registers, k.report.shared_bytes,
                           k.report.spill_stores_bytes + k.report.spill_loads_bytes,
                           k.func if emulate else None) for k in built.kernels)
    return StepKernels(kernels, tuple(_type(b) for b in built.params[inputs:]),
                       tuple(_type(b) for b in built.workspaces))


def _type(buffer: Buffer) -> ArrayType:
    return tuple(int(d) for d in buffer.shape), np.dtype(buffer.dtype)


class CudaPart(StepPart[StepKernels]):
    """A cuda region's kernels, run in order on :attr:`device`."""

    backend = "cuda"

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[Step[StepKernels]],
                 constants: Mapping[str, np.ndarray], aliases: Mapping[str, str], spec: GpuSpec,
                 emulate: bool = False) -> None:
        self.spec = spec
        self.emulate = emulate
        self.device: Device = EMULATOR if emulate else GPU
        self._loaded: dict[str, LoadedKernel] = {}
        super().__init__(inputs, outputs, steps, constants, aliases)

    @property
    def kernel_count(self) -> int:
        """How many kernels a run launches."""
        return sum(len(step.kernel.kernels) for step in self.steps if step.kernel is not None)

    def clock(self) -> Clock:
        return Clock() if self.emulate else _EventClock(GPU.timer())

    def launch(self, step: Step[StepKernels], arrays: list[Any], clock: Clock) -> None:
        scratch = [self.device.allocate(shape, dtype) for shape, dtype in step.kernel.workspaces]
        args = [*arrays, *scratch]
        kernels = step.kernel.kernels
        for k, kernel in enumerate(kernels):
            clock.start()
            if self.emulate:
                _emulate(kernel, args)
            else:
                self._kernel(kernel).launch(args)
            clock.stop(step.name if len(kernels) == 1 else f"{step.name} [{k}]")

    def _kernel(self, kernel: Kernel) -> LoadedKernel:
        if kernel.name not in self._loaded:
            self._loaded[kernel.name] = GPU.load(kernel.ptx, kernel.name, kernel.grid, kernel.block)
        return self._loaded[kernel.name]

    def kernel_output_types(self, step: Step[StepKernels]) -> tuple[ArrayType, ...]:
        return step.kernel.outputs

    def save_kernel(self, step: Step[StepKernels]) -> tuple[dict[str, Any], dict[str, bytes | str]]:
        kernels = step.kernel.kernels
        saved = {"outputs": _saved_types(step.kernel.outputs), "workspaces": _saved_types(step.kernel.workspaces),
                 "kernels": [{"name": k.name, "grid": list(k.grid), "block": list(k.block), "registers": k.registers,
                              "shared_bytes": k.shared_bytes, "spill_bytes": k.spill_bytes} for k in kernels]}
        files: dict[str, bytes | str] = {f"{j}.ptx": k.ptx for j, k in enumerate(kernels)}
        if self.emulate:
            files["tir.pickle"] = pickle.dumps([k.func for k in kernels], protocol=4)
        return saved, files

    @classmethod
    def load_kernel(cls, saved: dict[str, Any], read: Callable[[str], bytes],
                    settings: dict[str, Any]) -> StepKernels:
        funcs = _unpickled(read("tir.pickle")) if settings["emulate"] else None
        kernels = tuple(
            Kernel(k["name"], read(f"{j}.ptx").decode(), _dims(k["grid"]), _dims(k["block"]), int(k["registers"]),
                   int(k["shared_bytes"]), int(k["spill_bytes"]), funcs[j] if funcs is not None else None)
            for j, k in enumerate(saved["kernels"]))
        return StepKernels(kernels, _loaded_types(saved["outputs"]), _loaded_types(saved["workspaces"]))

    def saved_settings(self) -> dict[str, Any]:
        return {"device": self.spec.name, "emulate": self.emulate}

    @classmethod
    def restore(cls, settings: dict[str, Any]) -> dict[str, Any]:
        return {"spec": GPU_PRESETS[settings["device"]], "emulate": bool(settings["emulate"])}

    def report(self) -> str:
        """Each kernel's launch and resources as ptxas reported them, with its occupancy on
        the declared GPU, and the last run's time per kernel."""
        times = dict(self.last_profile)
        where = ("not run yet" if not self.last_profile else
                 "last run emulated in the interpreter" if self.emulate else "last run on the GPU")
        lines = [f"{self.kernel_count} kernels for {self.spec.name} ({self.spec.arch}); {where}",
                 f"  {'kernel':<34} {'blocks':>6} {'block':>5} {'regs':>4} {'smem B':>7} {'spill B':>7} "
                 f"{'occupancy':>9} {'time':>10}"]
        for step in self.steps:
            kernels = step.kernel.kernels if step.kernel is not None else ()
            for k, kernel in enumerate(kernels):
                label = step.name if len(kernels) == 1 else f"{step.name} [{k}]"
                occupancy = self.spec.occupancy(kernel.threads_per_block, kernel.registers, kernel.shared_bytes)
                took = f"{times[label] * 1e6:.1f} us" if label in times else "-"
                lines.append(f"  {label[:34]:<34} {math.prod(kernel.grid):>6} {kernel.threads_per_block:>5} "
                             f"{kernel.registers:>4} {kernel.shared_bytes:>7} {kernel.spill_bytes:>7} "
                             f"{occupancy:>9.0%} {took:>10}")
        return "\n".join(lines)


class _EventClock(Clock):
    """Times a run's launches on the GPU by CUDA events, read once the run is over."""

    def __init__(self, timer: EventTimer) -> None:
        super().__init__()
        self._timer = timer
        self._labels: list[str] = []

    def start(self) -> None:
        """Nothing: the timer's last event marks the start of the next launch."""

    def stop(self, label: str) -> None:
        self._timer.mark()
        self._labels.append(label)

    def profile(self) -> list[tuple[str, float]]:
        return list(zip(self._labels, self._timer.seconds()))


def _saved_types(types: Sequence[ArrayType]) -> list[list[Any]]:
    return [[list(shape), np.dtype(dtype).name] for shape, dtype in types]


def _loaded_types(saved: Sequence[Sequence[Any]]) -> tuple[ArrayType, ...]:
    return tuple((tuple(int(d) for d in shape), as_dtype(dtype)) for shape, dtype in saved)


def _unpickled(data: bytes) -> list[PrimFunc]:
    # Artifacts are signed by this user's hetero before they are loaded
    # (hetero.core.runtime.signing), so unpickling one is no new trust.
    try:
        return pickle.loads(data)
    except pickle.UnpicklingError as exc:
        raise ValueError(f"tir.pickle: {exc}") from None


def _dims(values: Sequence[int]) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in values)
    return x, y, z


def _emulate(kernel: Kernel, args: Sequence[np.ndarray]) -> None:
    """Run ``kernel``'s scheduled function in the interpreter, writing into ``args``."""
    assert kernel.func is not None, "an emulated part keeps every kernel's scheduled function"
    results = run_func(kernel.func, {b.name: a for b, a in zip(kernel.func.params, args)})
    for b, a in zip(kernel.func.params, args):
        np.copyto(a, results[b.name])


__all__ = ["EMULATOR", "GPU", "CudaPart", "Kernel", "StepKernels", "step_kernels"]
