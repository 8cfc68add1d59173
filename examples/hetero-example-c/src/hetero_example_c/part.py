"""The compile loop and the compiled part, behind one seam.

hetero's kit is gaining a shared step part and compile loop (``hetero.plugin.parts``).
Until they land, this module is example_c's own copy of both, shaped like them, so that
switching to the shared ones changes this file alone. What the backend supplies is small:

- to :func:`compile_region`, ``build(func, dump, file) -> name``: one kernel step's
  canonically named tensor-IR function made into a kernel of the program, and its name;
- to :class:`StepPart`, a :class:`Program`: the compiled kernels, called by name on
  arrays, and the artifact members it is built again from.

:func:`compile_region` is the loop every kernel-generating backend runs: epilogues fused
into their anchors, the region planned as kernel steps (reshapes of the region's own
values as views), each step lowered and built, every stage dumped in the kit's layout.
:class:`StepPart` runs the steps in order on host arrays: inputs checked, views as numpy
reshapes, run-time index checks before a kernel reads indices, outputs allocated per run,
each kernel timed (``last_profile``); its artifact is a zip of a manifest, the program's
members and the constants.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
import json
import time
from typing import Any, Protocol
import zipfile

import numpy as np

from hetero.plugin import (
    DamagedFileError, Graph, InputError, PluginError, as_dtype, constants_member, index_checks, index_problem,
    open_zip, progress, read_constants, read_manifest, read_member, saved_index_check, write_zip,
)
from hetero.plugin.lower import VIEW_OPS, fuse_epilogues, kernel_steps, region_constants
from hetero.plugin.parts import StageDump
from hetero.plugin.tir import PrimFunc, canonical_names, format_func

#: Tags the manifest, so that another backend's zip is refused with a clear message.
FORMAT = "hetero-example-c/1"


class Program(Protocol):
    """The backend's compiled kernels, as the part runs and saves them."""

    def call(self, name: str, arrays: Sequence[np.ndarray]) -> int:
        """Run kernel ``name`` on C-contiguous ``arrays``, one a parameter; 0 on success."""

    @property
    def members(self) -> list[tuple[str, str]]:
        """The artifact members the program is built again from."""

    @property
    def settings(self) -> dict[str, Any]:
        """How it was built, kept in the manifest."""


@dataclass(frozen=True)
class Step:
    """One kernel step: the graph values it reads and writes, in its kernel's parameter
    order, with each parameter's shape and dtype; or, with ``view`` set, its one output as
    its one input reshaped."""

    name: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    kernel: str | None = None
    params: tuple[tuple[tuple[int, ...], str], ...] = ()
    checks: tuple[tuple[str, int, Any, bool], ...] = ()
    view: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Region:
    """What the compile loop makes of a region: the interface, the steps and the constants."""

    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    outputs: tuple[str, ...]
    steps: tuple[Step, ...]
    constants: Mapping[str, np.ndarray]
    aliases: Mapping[str, str]


def compile_region(subgraph: Graph, build: Callable[[PrimFunc, StageDump, str], str],
                   dump: StageDump) -> Region:
    """The compile loop (see the module's docstring); ``build`` makes each kernel."""
    graph = fuse_epilogues(subgraph)
    steps = []
    plan = kernel_steps(graph, VIEW_OPS)
    for index, step in enumerate(plan):
        progress.step("kernel", index + 1, len(plan), step.node.name)
        if step.view is not None:
            steps.append(Step(step.label, step.names, step.inputs, step.outputs, view=step.view))
            continue
        func = canonical_names(step.lower())
        file = f"{index:03d}_{step.node.name}"
        dump.write("graph", file, "txt", "\n".join(
            f"{', '.join(v.name for v in n.outputs)} = {n.op}({', '.join(v.name if v else '_' for v in n.inputs)})"
            f" {n.attrs}" for n in step.members))
        dump.write("tir", file, "tir", format_func(func))
        name = build(func, dump, file)
        params = tuple((tuple(b.shape), np.dtype(b.dtype).name) for b in func.params)
        checks = tuple(c for n in step.members for c in index_checks(n))
        steps.append(Step(step.label, step.names, step.inputs, step.outputs, name, params, checks))
    progress.end("kernel")
    constants, aliases = region_constants(graph, (n for s in steps for n in s.inputs))
    inputs = tuple((v.name, tuple(v.shape), v.dtype.name) for v in graph.inputs)
    return Region(inputs, tuple(v.name for v in graph.outputs), tuple(steps), constants, aliases)


class StepPart:
    """A compiled region: its steps run in order on host arrays by ``program``'s kernels."""

    def __init__(self, region: Region, program: Program, backend: str) -> None:
        self.region = region
        self.program = program
        self.backend = backend
        self.inputs = tuple(name for name, _, _ in region.inputs)
        self.outputs = region.outputs
        self.steps = region.steps
        self.last_profile: list[tuple[str, float]] = []

    @property
    def kernel_count(self) -> int:
        return sum(step.kernel is not None for step in self.steps)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = self._execute(inputs)
        return {name: env[self.region.aliases.get(name, name)] for name in self.outputs}

    def run_intermediates(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env = self._execute(inputs)
        values = {name: env[name] for step in self.steps for name in step.outputs}
        values.update((name, env[self.region.aliases.get(name, name)]) for name in self.outputs)
        return values

    def _checked(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The inputs as C-contiguous arrays, or InputError naming the first wrong one: a C
        kernel would read a wrong shape out of bounds."""
        unknown = sorted(set(inputs) - set(self.inputs))
        if unknown:
            raise InputError(f"{self.backend} part: no input {unknown[0]!r}; it takes {', '.join(self.inputs)}")
        arrays = {}
        for name, shape, dtype in self.region.inputs:
            if name not in inputs:
                raise InputError(f"{self.backend} part: missing input {name!r}")
            a = np.asarray(inputs[name])
            if a.dtype != np.dtype(as_dtype(dtype)) or a.shape != shape:
                raise InputError(f"{self.backend} part: input {name!r} must be {dtype}{list(shape)}, "
                                 f"got {a.dtype}{list(a.shape)}")
            arrays[name] = np.asarray(a, order="C")
        return arrays

    def _execute(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {**self.region.constants, **self._checked(inputs)}
        profile = []
        for step in self.steps:
            if step.view is not None:
                env[step.outputs[0]] = env[step.inputs[0]].reshape(step.view)
                continue
            for value, axis, size, wraps in step.checks:
                problem = index_problem(env[value], axis, size, wraps)
                if problem is not None:
                    raise InputError(f"{step.name}: {value}: {problem}")
            arrays = [np.asarray(env[n], order="C") for n in step.inputs]
            arrays += [np.empty(shape, as_dtype(dtype)) for shape, dtype in step.params[len(step.inputs):]]
            for a, (shape, dtype) in zip(arrays, step.params):
                if a.shape != shape or a.dtype != np.dtype(as_dtype(dtype)):
                    raise PluginError(f"{self.backend}: {step.name} expects {dtype}{list(shape)}, "
                                      f"got {a.dtype}{list(a.shape)}")
            start = time.perf_counter()
            status = self.program.call(step.kernel, arrays)
            profile.append((step.name, time.perf_counter() - start))
            if status != 0:
                raise PluginError(f"{self.backend}: {step.name} could not allocate its working memory")
            env.update(zip(step.outputs, arrays[len(step.inputs):]))
        self.last_profile = profile
        return env

    @property
    def artifact(self) -> bytes:
        """A zip of the manifest, the program's members and the constants."""
        r = self.region
        manifest = {
            "format": FORMAT, "backend": self.backend, "program": self.program.settings,
            "inputs": [[n, list(s), d] for n, s, d in r.inputs], "outputs": list(r.outputs),
            "aliases": dict(r.aliases), "constants": list(r.constants),
            "steps": [{"name": s.name, "nodes": list(s.nodes), "inputs": list(s.inputs), "outputs": list(s.outputs),
                       **({"view": list(s.view)} if s.view is not None else {
                           "kernel": s.kernel, "params": [[list(shape), d] for shape, d in s.params],
                           "checks": [list(c) for c in s.checks]})}
                      for s in r.steps],
        }
        return write_zip([("manifest.json", json.dumps(manifest)), *self.program.members,
                          constants_member(r.constants)])

    @classmethod
    def from_artifact(cls, artifact: bytes | memoryview, backend: str,
                      load: Callable[[zipfile.ZipFile, Mapping[str, Any], str], Program]) -> StepPart:
        """The part whose :attr:`artifact` is ``artifact``; ``load`` builds its program from the
        zip and the manifest's settings. A damaged or foreign artifact is a named error."""
        source = f"{backend} artifact"
        with open_zip(artifact, source) as zf:
            manifest = read_manifest(zf, source)
            if manifest.get("format") != FORMAT:
                raise PluginError(f"{source}: not an artifact of {backend} (format {manifest.get('format')!r}, "
                                  f"expected {FORMAT!r}); recompile the model")
            try:
                steps = tuple(Step(
                    str(s["name"]), tuple(s["nodes"]), tuple(s["inputs"]), tuple(s["outputs"]),
                    s.get("kernel"), tuple((tuple(int(d) for d in shape), str(d)) for shape, d in s.get("params", [])),
                    tuple(saved_index_check(c) for c in s.get("checks", [])),
                    tuple(int(d) for d in s["view"]) if "view" in s else None) for s in manifest["steps"])
                region = Region(tuple((str(n), tuple(int(d) for d in shape), str(dt))
                                      for n, shape, dt in manifest["inputs"]),
                                tuple(manifest["outputs"]), steps,
                                read_constants(zf, source, manifest["constants"]), dict(manifest["aliases"]))
                program = load(zf, manifest["program"], source)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise DamagedFileError(f"{source}: its manifest is incomplete or malformed "
                                       f"({type(exc).__name__}: {exc}); recompile the model") from None
        return cls(region, program, backend)


def read_text(zf: zipfile.ZipFile, name: str, source: str) -> str:
    """Member ``name`` of an artifact as text."""
    return read_member(zf, name, source).decode()


__all__ = ["FORMAT", "Program", "Region", "Step", "StepPart", "compile_region", "read_text"]
