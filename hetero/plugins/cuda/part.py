"""A compiled cuda region: its kernels launched in order on the GPU, values kept there.

:class:`CudaPart` is what :meth:`~hetero.plugins.cuda.backend.CudaBackend.compile`
returns. Each :class:`Step` is one graph node or fused group, built as one kernel per
stage (:func:`~hetero.plugins.cuda.build.build_function`), or a view (a Reshape of a
value the part made: the same device memory with another shape, no launch). Its
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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import json
import math
import pickle
import time
from typing import Any

import numpy as np

from hetero.plugin import (
    DamagedFileError, Device, GPU_PRESETS, GpuSpec, NumpyDevice, as_dtype, constants_member, open_zip,
    read_constants, read_manifest, read_member, write_zip,
)
from hetero.plugin.tir import Buffer, PrimFunc, run_func
from hetero.plugins.cuda.build import BuiltFunction
from hetero.plugins.cuda.driver import CudaDevice, LoadedKernel

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


@dataclass
class Step:
    """One node or fused group: its kernels in order, the graph values it reads and writes
    (in parameter order), the buffers its kernels share; or, with ``view`` set, its one
    output as its one input reshaped."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[str, ...]
    kernels: tuple[Kernel, ...] = ()
    output_types: tuple[tuple[tuple[int, ...], str], ...] = ()
    workspaces: tuple[tuple[tuple[int, ...], str], ...] = ()
    view: tuple[int, ...] | None = None


def make_step(name: str, built: BuiltFunction, inputs: tuple[str, ...], outputs: tuple[str, ...],
              nodes: tuple[str, ...], emulate: bool) -> Step:
    """The step of one built function whose parameters are ``inputs`` then ``outputs``."""
    kernels = tuple(Kernel(k.kernel.name, k.kernel.ptx, k.kernel.launch.grid, k.kernel.launch.block,
                           k.report.registers, k.report.shared_bytes,
                           k.report.spill_stores_bytes + k.report.spill_loads_bytes,
                           k.func if emulate else None) for k in built.kernels)
    outs = built.params[len(inputs):]
    return Step(name, inputs, outputs, nodes, kernels, tuple(_type(b) for b in outs),
                tuple(_type(b) for b in built.workspaces))


def _type(buffer: Buffer) -> tuple[tuple[int, ...], str]:
    return tuple(int(d) for d in buffer.shape), np.dtype(buffer.dtype).name


class CudaPart:
    """A cuda region's kernels, run in order on :attr:`device`."""

    def __init__(self, inputs: tuple[str, ...], outputs: tuple[str, ...], steps: Sequence[Step],
                 constants: Mapping[str, np.ndarray], aliases: Mapping[str, str], spec: GpuSpec,
                 emulate: bool = False) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.steps = list(steps)
        self.constants = dict(constants)
        self.aliases = dict(aliases)  # graph outputs that are inputs or constants, by name
        self.spec = spec
        self.emulate = emulate
        self.device: Device = EMULATOR if emulate else GPU
        self.last_profile: list[tuple[str, float]] = []
        self._on_device: dict[str, Any] | None = None
        self._loaded: dict[str, LoadedKernel] = {}

    @property
    def kernel_count(self) -> int:
        """How many kernels a run launches."""
        return sum(len(step.kernels) for step in self.steps)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        env = self._execute(inputs)
        return {name: env[self.aliases.get(name, name)] for name in self.outputs}

    def run_intermediates(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Every value a step writes (a fused group's last node's), and the outputs."""
        env = self._execute(inputs)
        values = {name: env[name] for step in self.steps for name in step.outputs}
        values.update((name, env[self.aliases.get(name, name)]) for name in self.outputs)
        return values

    def _execute(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        device = self.device
        if self._on_device is None:
            self._on_device = {name: device.copy_in(array) for name, array in self.constants.items()}
        env: dict[str, Any] = dict(self._on_device)
        env.update({name: inputs[name] for name in self.inputs})
        profile: list[tuple[str, float]] = []
        timer = None if self.emulate else GPU.timer()
        for step in self.steps:
            if step.view is not None:
                env[step.outputs[0]] = env[step.inputs[0]].reshape(step.view)
                continue
            outs = [device.allocate(shape, as_dtype(dtype)) for shape, dtype in step.output_types]
            scratch = [device.allocate(shape, as_dtype(dtype)) for shape, dtype in step.workspaces]
            args = [*(env[n] for n in step.inputs), *outs, *scratch]
            for k, kernel in enumerate(step.kernels):
                label = step.name if len(step.kernels) == 1 else f"{step.name} [{k}]"
                if timer is None:
                    start = time.perf_counter()
                    _emulate(kernel, args)
                    profile.append((label, time.perf_counter() - start))
                else:
                    self._kernel(kernel).launch(args)
                    timer.mark()
                    profile.append((label, 0.0))
            env.update(zip(step.outputs, outs))
        if timer is not None:
            profile = [(label, seconds) for (label, _), seconds in zip(profile, timer.seconds())]
        self.last_profile = profile
        return env

    def _kernel(self, kernel: Kernel) -> LoadedKernel:
        if kernel.name not in self._loaded:
            self._loaded[kernel.name] = GPU.load(kernel.ptx, kernel.name, kernel.grid, kernel.block)
        return self._loaded[kernel.name]

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
            for k, kernel in enumerate(step.kernels):
                label = step.name if len(step.kernels) == 1 else f"{step.name} [{k}]"
                occupancy = self.spec.occupancy(kernel.threads_per_block, kernel.registers, kernel.shared_bytes)
                took = f"{times[label] * 1e6:.1f} us" if label in times else "-"
                lines.append(f"  {label[:34]:<34} {math.prod(kernel.grid):>6} {kernel.threads_per_block:>5} "
                             f"{kernel.registers:>4} {kernel.shared_bytes:>7} {kernel.spill_bytes:>7} "
                             f"{occupancy:>9.0%} {took:>10}")
        return "\n".join(lines)

    @property
    def artifact(self) -> bytes:
        """A zip of the manifest (steps, launches, ptxas figures), every kernel's PTX, the
        constants and, for an emulated part, the scheduled functions; fixed dates, so the
        same part gives the same bytes."""
        manifest = {
            "inputs": list(self.inputs), "outputs": list(self.outputs), "aliases": self.aliases,
            "device": self.spec.name, "emulate": self.emulate, "constants": list(self.constants),
            "steps": [{"name": s.name, "inputs": list(s.inputs), "outputs": list(s.outputs), "nodes": list(s.nodes),
                       **({"view": list(s.view)} if s.view is not None else {
                           "output_types": [[list(shape), dtype] for shape, dtype in s.output_types],
                           "workspaces": [[list(shape), dtype] for shape, dtype in s.workspaces],
                           "kernels": [{"name": k.name, "grid": list(k.grid), "block": list(k.block),
                                        "registers": k.registers, "shared_bytes": k.shared_bytes,
                                        "spill_bytes": k.spill_bytes} for k in s.kernels]})}
                      for s in self.steps],
        }
        members: list[tuple[str, bytes | str]] = [("manifest.json", json.dumps(manifest))]
        for i, step in enumerate(self.steps):
            for j, kernel in enumerate(step.kernels):
                members.append((f"ptx/{i}_{j}.ptx", kernel.ptx))
        if self.emulate:
            funcs = [[k.func for k in s.kernels] for s in self.steps]
            members.append(("tir.pickle", pickle.dumps(funcs, protocol=4)))
        members.append(constants_member(self.constants))
        return write_zip(members)

    @classmethod
    def from_artifact(cls, artifact: bytes) -> CudaPart:
        """The part whose :attr:`artifact` is ``artifact``; a named error for one that is damaged."""
        source = "cuda artifact"
        with open_zip(artifact, source) as zf:
            manifest = read_manifest(zf, source)
            try:
                emulate = bool(manifest["emulate"])
                # Artifacts are signed by this user's hetero before they are loaded
                # (hetero.core.runtime.signing), so unpickling one is no new trust.
                funcs = pickle.loads(read_member(zf, "tir.pickle", source)) if emulate else None
                steps = []
                for i, s in enumerate(manifest["steps"]):
                    names = tuple(s["inputs"]), tuple(s["outputs"]), tuple(s["nodes"])
                    if "view" in s:
                        steps.append(Step(s["name"], *names, view=tuple(int(d) for d in s["view"])))
                        continue
                    kernels = tuple(
                        Kernel(k["name"], read_member(zf, f"ptx/{i}_{j}.ptx", source).decode(),
                               _dims(k["grid"]), _dims(k["block"]), int(k["registers"]), int(k["shared_bytes"]),
                               int(k["spill_bytes"]), funcs[i][j] if funcs is not None else None)
                        for j, k in enumerate(s["kernels"]))
                    steps.append(Step(s["name"], *names, kernels,
                                      tuple((tuple(shape), str(dtype)) for shape, dtype in s["output_types"]),
                                      tuple((tuple(shape), str(dtype)) for shape, dtype in s["workspaces"])))
                constants = read_constants(zf, source, manifest["constants"])
                return cls(tuple(manifest["inputs"]), tuple(manifest["outputs"]), steps, constants,
                           dict(manifest["aliases"]), GPU_PRESETS[manifest["device"]], emulate)
            except (KeyError, IndexError, TypeError, ValueError, pickle.UnpicklingError) as exc:
                raise DamagedFileError(f"{source}: its manifest is incomplete or malformed "
                                       f"({type(exc).__name__}: {exc}); recompile the model") from None


def _dims(values: Sequence[int]) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in values)
    return x, y, z


def _emulate(kernel: Kernel, args: Sequence[np.ndarray]) -> None:
    """Run ``kernel``'s scheduled function in the interpreter, writing into ``args``."""
    assert kernel.func is not None, "an emulated part keeps every kernel's scheduled function"
    results = run_func(kernel.func, {b.name: a for b, a in zip(kernel.func.params, args)})
    for b, a in zip(kernel.func.params, args):
        np.copyto(a, results[b.name])


__all__ = ["EMULATOR", "GPU", "CudaPart", "Kernel", "Step", "make_step"]
