"""A compiled region as kernel steps run in order: the part every codegen backend returns.

A :class:`StepPart` holds what :func:`~hetero.core.parts.compile.compile_steps` made of a
region: its inputs and outputs, its :class:`Step`\\ s (each a kernel over graph values,
or a view: a reshape of a value the part made, no kernel, no copy), the constants the
steps read and the outputs that are inputs or constants handed through (``aliases``).
It runs the steps (index checks before a kernel, views, intermediates), times them
(:attr:`StepPart.last_profile`), and writes and reads its artifact. A backend subclasses
it and says only what is its own, after TVM's ``runtime.Module`` and ONNX Runtime's
execution provider ``Compute``:

- :meth:`StepPart.launch`: run one step's kernel on its arrays (inputs, then outputs),
  timing it with the run's :class:`Clock`;
- :meth:`StepPart.kernel_output_types`: the shape and dtype of each array the kernel
  writes, which must be what the step declares (an extra or missing output, or another
  shape, is a :class:`~hetero.errors.PluginError` naming the step);
- :meth:`StepPart.save_kernel` and :meth:`StepPart.load_kernel`: a kernel as a JSON-ready
  dict and files of the artifact, and back;
- optionally :meth:`StepPart.saved_settings` and :meth:`StepPart.restore` (what the part
  keeps beyond its steps: the GPU, the FPGA part, the host CPU it was compiled for),
  :meth:`StepPart.clock` (a device's own timer) and a ``device``
  (:class:`~hetero.core.plugin.capabilities.OnDevice`); reports and timelines stay the
  backend's.

Intermediates: where the part's device is host memory (a
:class:`~hetero.core.exec.device.NumpyDevice`: the host, or a simulator's memory),
they are planned into one arena when the part is built (:attr:`StepPart.memory_plan`,
:mod:`hetero.core.parts.arena`) and each run allocates it once; elsewhere each kernel
output is the device's ``allocate``. The part's outputs are always allocated apart.

The artifact is a zip (fixed dates: the same part gives the same bytes) of
``manifest.json``, one layout for every backend::

    {"inputs": [...], "outputs": [...], "aliases": {...}, "constants": [...],
     "settings": {...the backend's...},
     "steps": [{"name", "inputs", "outputs", "nodes", "checks",
                "view": [...]  or  "types": [[shape, dtype], ...], "kernel": {...the backend's...}}]}

each kernel step's files as ``kernels/<step index>.<suffix>``, and ``constants.npz``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import json
import time
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from hetero.core.ir.graph import saved_index_check
from hetero.core.ir.opdef import index_problem
from hetero.core.ir.types import as_dtype
from hetero.core.memory import MemoryPlan
from hetero.core.parts.arena import ALIGNMENT, Slot, host_arena, plan_steps, unplanned_slots
from hetero.core.plugin.capabilities import device_of
from hetero.core.exec.archive import (
    constants_member, open_zip, read_constants, read_manifest, read_member, write_zip,
)
from hetero.core.exec.device import HOST, NumpyDevice
from hetero.errors import DamagedFileError, InputError, PluginError

K = TypeVar("K")
P = TypeVar("P", bound="StepPart[Any]")

#: A shape and a dtype.
ArrayType = tuple[tuple[int, ...], np.dtype]
#: A run-time index check: (value, axis, size, wraps), as :func:`~hetero.core.ir.graph.index_checks` gives.
IndexCheck = tuple[str, int, Any, bool]


@dataclass
class Step(Generic[K]):
    """One step of a part: a kernel over graph values, or a view.

    ``inputs`` and ``outputs`` are the values its kernel reads and writes, in parameter
    order; ``nodes`` the graph nodes it computes; ``kernel`` the backend's kernel
    object; ``checks`` the run-time index inputs checked before the kernel reads with
    them; ``output_types`` each output's shape and dtype. With ``view`` set there is
    no kernel: its one output is its one input reshaped to ``view``.
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[str, ...]
    kernel: K | None = None
    checks: tuple[IndexCheck, ...] = ()
    view: tuple[int, ...] | None = None
    output_types: tuple[ArrayType, ...] = ()


class Clock:
    """Times one run's launches on the host: :meth:`start` before a launch, :meth:`stop`
    with its name after. A device whose launches are asynchronous (timed by a GPU's
    events) subclasses it."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, float]] = []
        self._start = 0.0

    def start(self) -> None:
        """A launch begins."""
        self._start = time.perf_counter()

    def stop(self, label: str) -> None:
        """The launch begun last, called ``label`` in the profile, is over."""
        self._entries.append((label, time.perf_counter() - self._start))

    def profile(self) -> list[tuple[str, float]]:
        """Each launch's name and seconds, in order, once the run is over."""
        return self._entries


class StepPart(Generic[K]):
    """A region's kernel steps run in order, with its constants bound (see the module
    docstring for what a backend supplies).

    A subclass that adds constructor parameters sets them, and what its ``device``
    reads, before calling ``super().__init__``: the arena is planned there, for the
    part's device.
    """

    #: The backend's name, in messages and the artifact's errors.
    backend: ClassVar[str] = "step part"
    #: Arena offsets and the arena's address are multiples of this.
    alignment: ClassVar[int] = ALIGNMENT

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], steps: Sequence[Step[K]],
                 constants: Mapping[str, Any], aliases: Mapping[str, str]) -> None:
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.steps = list(steps)
        self.constants = dict(constants)
        self.aliases = dict(aliases)  # graph outputs that are inputs or constants, by name
        self.last_profile: list[tuple[str, float]] = []
        for step in self.steps:
            if step.view is None:
                self._check_outputs(step)
        device = device_of(self)
        self._host_memory = isinstance(device, NumpyDevice)
        #: The arena plan of the intermediates (None on a device without a host arena).
        self.memory_plan: MemoryPlan | None = None
        if self._host_memory:
            self.memory_plan, self._slots = plan_steps(f"{self.backend} part", self.steps, self.outputs,
                                                       self.alignment)
        else:
            self._slots = unplanned_slots(self.steps)
        self._bound: dict[str, Any] | None = None

    # What a backend supplies.

    def launch(self, step: Step[K], arrays: list[Any], clock: Clock) -> None:
        """Run ``step``'s kernel on ``arrays`` (its inputs, then its outputs: arrays of the
        part's device, the outputs fresh and of the step's types), each launch between
        ``clock.start()`` and ``clock.stop(label)`` (the step's name for a one-kernel step)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to launch a kernel")

    def kernel_output_types(self, step: Step[K]) -> Sequence[ArrayType]:
        """The shape and dtype of each array ``step``'s kernel writes, in order."""
        raise NotImplementedError(f"{type(self).__name__} does not say what its kernels write")

    def save_kernel(self, step: Step[K]) -> tuple[dict[str, Any], dict[str, bytes | str]]:
        """``step``'s kernel as a JSON-ready dict and the files it needs beside the
        manifest, by suffix (saved as ``kernels/<step index>.<suffix>``)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to save a kernel")

    @classmethod
    def load_kernel(cls, saved: dict[str, Any], read: Callable[[str], bytes], settings: dict[str, Any]) -> K:
        """The kernel :meth:`save_kernel` saved as ``saved``; ``read(suffix)`` gives one of its
        files, ``settings`` what :meth:`saved_settings` saved. A malformed entry may raise
        KeyError, IndexError, TypeError or ValueError: the artifact is then damaged."""
        raise NotImplementedError(f"{cls.__name__} does not say how to load a kernel")

    def saved_settings(self) -> dict[str, Any]:
        """What the artifact keeps of the part beyond its steps, JSON-ready (none by default)."""
        return {}

    @classmethod
    def restore(cls, settings: dict[str, Any]) -> dict[str, Any]:
        """The constructor's own keyword arguments from :meth:`saved_settings`' dict; a
        named error for a part this machine cannot run."""
        return {}

    def clock(self) -> Clock:
        """A timer for one run's launches."""
        return Clock()

    # What every step part does.

    @property
    def kernel_count(self) -> int:
        """How many kernels a run launches (view steps launch none)."""
        return sum(step.view is None for step in self.steps)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The part's outputs on ``inputs`` (arrays of its device), by name."""
        env = self._execute(inputs, planned=True)
        return {name: env[self.aliases.get(name, name)] for name in self.outputs}

    def run_intermediates(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Every value a kernel writes (each step's outputs: fused groups expose their
        last node's), and the part's outputs, by name. Each is allocated apart, since
        values that share the arena overwrite each other."""
        env = self._execute(inputs, planned=False)
        values = {name: env[name] for step in self.steps for name in step.outputs}
        values.update((name, env[self.aliases.get(name, name)]) for name in self.outputs)
        return values

    def bound_constants(self) -> dict[str, Any]:
        """The constants as arrays of the part's device: copied there on the first run
        (on the host, the arrays themselves)."""
        if self._bound is None:
            device = device_of(self)
            self._bound = (dict(self.constants) if device.name == HOST.name
                           else {name: device.copy_in(array) for name, array in self.constants.items()})
        return self._bound

    def _execute(self, inputs: Mapping[str, Any], planned: bool) -> dict[str, Any]:
        device = device_of(self)
        env = dict(self.bound_constants())
        if self._host_memory:
            env.update({n: np.asarray(inputs[n], order="C") for n in self.inputs})
        else:
            env.update({n: inputs[n] for n in self.inputs})
        arena = (host_arena(self.memory_plan.arena_bytes, self.alignment)
                 if planned and self.memory_plan is not None else None)
        clock = self.clock()
        for step, slots in zip(self.steps, self._slots):
            if step.view is not None:
                env[step.outputs[0]] = env[step.inputs[0]].reshape(step.view)
                continue
            for value, axis, size, wraps in step.checks:
                found = env[value] if self._host_memory else device.copy_out(env[value])
                problem = index_problem(found, axis, size, wraps)
                if problem is not None:
                    raise InputError(f"{step.name}: {value}: {problem}")
            # Each output is an array of the step's type that no operand of the step
            # overlaps (the plan keeps a step's operands and results apart).
            outs = [device.allocate(shape, dtype) if offset is None or arena is None
                    else arena[offset:offset + size].view(dtype).reshape(shape)
                    for offset, size, shape, dtype in slots]
            self.launch(step, [*(env[n] for n in step.inputs), *outs], clock)
            env.update(zip(step.outputs, outs))
        self.last_profile = clock.profile()
        return env

    @property
    def slots(self) -> list[list[Slot]]:
        """Per step, where each kernel output goes (:data:`~hetero.core.parts.arena.Slot`)."""
        return self._slots

    def _check_outputs(self, step: Step[K]) -> None:
        """PluginError unless ``step``'s kernel writes exactly the outputs the step declares."""
        made = [(tuple(int(d) for d in shape), np.dtype(dtype)) for shape, dtype in self.kernel_output_types(step)]
        declared = [(tuple(shape), np.dtype(dtype)) for shape, dtype in step.output_types]
        if len(declared) != len(step.outputs):
            raise PluginError(f"{self.backend}: step {step.name} names {len(step.outputs)} outputs "
                              f"({', '.join(step.outputs)}) but declares the types of {len(declared)}")
        if made == declared:
            return
        if len(made) != len(declared):
            raise PluginError(f"{self.backend}: step {step.name}: its kernel writes {len(made)} arrays, the step "
                              f"declares {len(declared)} outputs ({', '.join(step.outputs)}); the kernel must "
                              "take the step's inputs, then exactly its outputs")
        for name, (shape, dtype), (want_shape, want_dtype) in zip(step.outputs, made, declared):
            if (shape, dtype) != (want_shape, want_dtype):
                raise PluginError(f"{self.backend}: step {step.name}: its kernel writes {name} as "
                                  f"{dtype.name}{list(shape)}, the step declares {want_dtype.name}{list(want_shape)}")

    @property
    def artifact(self) -> bytes:
        """The manifest, each kernel's files and the constants as one zip (see the module
        docstring); equal parts give equal bytes."""
        entries: list[dict[str, Any]] = []
        files: list[tuple[str, bytes | str]] = []
        for index, step in enumerate(self.steps):
            entry: dict[str, Any] = {"name": step.name, "inputs": list(step.inputs), "outputs": list(step.outputs),
                                     "nodes": list(step.nodes), "checks": [list(c) for c in step.checks]}
            if step.view is not None:
                entry["view"] = list(step.view)
            else:
                saved, members = self.save_kernel(step)
                entry["types"] = [[list(shape), np.dtype(dtype).name] for shape, dtype in step.output_types]
                entry["kernel"] = saved
                files += [(f"kernels/{index}.{suffix}", content) for suffix, content in members.items()]
            entries.append(entry)
        manifest = {"inputs": list(self.inputs), "outputs": list(self.outputs), "aliases": self.aliases,
                    "constants": list(self.constants), "settings": self.saved_settings(), "steps": entries}
        return write_zip([("manifest.json", json.dumps(manifest)), *files, constants_member(self.constants)])

    @classmethod
    def from_artifact(cls: type[P], artifact: bytes | memoryview) -> P:
        """The part whose :attr:`artifact` is ``artifact``; a DamagedFileError naming the
        backend's artifact for one that is truncated or malformed. From a ``memoryview``
        the constants are views of it, not copies."""
        source = f"{cls.backend} artifact"
        with open_zip(artifact, source) as zf:
            manifest = read_manifest(zf, source)
            try:
                settings = manifest["settings"]
                options = cls.restore(settings)
                steps: list[Step[Any]] = []
                for index, s in enumerate(manifest["steps"]):
                    names = tuple(s["inputs"]), tuple(s["outputs"]), tuple(s["nodes"])
                    checks = tuple(saved_index_check(c) for c in s["checks"])
                    if "view" in s:
                        steps.append(Step(s["name"], *names, checks=checks, view=tuple(int(d) for d in s["view"])))
                        continue

                    def read(suffix: str, index: int = index) -> bytes:
                        return read_member(zf, f"kernels/{index}.{suffix}", source)

                    types = tuple((tuple(int(d) for d in shape), as_dtype(dtype)) for shape, dtype in s["types"])
                    steps.append(Step(s["name"], *names, cls.load_kernel(s["kernel"], read, settings), checks,
                                      output_types=types))
                constants = read_constants(zf, source, manifest["constants"])
                pieces = (tuple(manifest["inputs"]), tuple(manifest["outputs"]), steps, constants,
                          dict(manifest["aliases"]))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
                raise DamagedFileError(f"{source}: its manifest is incomplete or malformed "
                                       f"({type(exc).__name__}: {exc}); recompile the model") from None
            try:
                return cls(*pieces, **options)
            except PluginError as exc:
                raise DamagedFileError(f"{source}: {exc}; recompile the model") from None


__all__ = ["ArrayType", "Clock", "IndexCheck", "Step", "StepPart"]
