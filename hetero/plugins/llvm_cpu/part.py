"""A compiled llvm_cpu region: its kernels run in graph order, with the subgraph's constants bound.

:class:`LlvmCpuPart` is what :meth:`~hetero.plugins.llvm_cpu.backend.LlvmCpuBackend.compile`
returns. Its artifact holds each kernel's host machine code, so a saved executable loads
without compiling.

Intermediates live in one arena: when a part is built (compiled or loaded: the plan is
recomputed from the steps, not saved) it plans its steps' values with
:mod:`hetero.core.memory` (:attr:`LlvmCpuPart.memory_plan`), and each run allocates
the arena once and hands every kernel views into it. A run's own arena makes runs
from several threads safe. The part's outputs, and the values they are views of, are
allocated apart, so what ``run`` returns never shares memory with anything a later
run writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
import json
import time
from typing import Any

import numpy as np

from hetero.plugin import (
    CodegenError, DamagedFileError, HOST, InputError, MemoryPlan, StepUse, analyze_step_liveness, constants_member,
    index_problem, open_zip, plan_arena, read_constants, read_manifest, read_member, saved_index_check, write_zip,
)
from hetero.plugins.llvm_cpu.kernel import CompiledKernel
from hetero.plugins.llvm_cpu.program import ALIGNMENT, Program, workspace_layout
from hetero.plugins.llvm_cpu.runtime import native_pool
from hetero.plugins.llvm_cpu.target import host_cpu


@dataclass
class Step:
    """One kernel launch: the graph values it reads and writes, in parameter order; or,
    with ``view`` set and no kernel, its one output as its one input reshaped."""

    name: str
    kernel: CompiledKernel | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[str, ...]  # the graph nodes this kernel computes
    # Run-time index inputs (value, axis, size), checked before the kernel reads with them.
    checks: tuple[tuple[str, int, Any, bool], ...] = ()
    view: tuple[int, ...] | None = None


#: Where a kernel's output goes: its arena offset (None: allocated apart), its bytes,
#: shape and dtype.
_Slot = tuple[int | None, int, tuple[int, ...], np.dtype]


class LlvmCpuPart:
    """Compiled kernels run in order, with the subgraph's constants bound and the
    intermediates in one planned arena (:attr:`memory_plan`)."""

    def __init__(self, inputs: tuple[str, ...], outputs: tuple[str, ...], steps: list[Step],
                 constants: dict[str, np.ndarray], aliases: dict[str, str]) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.steps = steps
        self.constants = constants
        self.aliases = aliases  # graph outputs that are inputs or constants, by name
        self.last_profile: list[tuple[str, float]] = []
        self.memory_plan, self._slots = _plan(steps, outputs)
        self._program: Program | None = None
        self._scratch: list[tuple[np.ndarray, np.ndarray]] = []  # (arena, workspace) of finished runs

    @property
    def workspace_bytes(self) -> int:
        """The bytes a run allocates besides the arena and its outputs: the region the
        stages of one kernel at a time pass their intermediates in."""
        return max((workspace_layout(s.kernel)[1] for s in self.steps if s.kernel is not None), default=0)

    @property
    def kernel_count(self) -> int:
        """How many kernels a run launches (view steps launch none)."""
        return sum(step.kernel is not None for step in self.steps)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        program = self._native_program()
        if program is None:
            env = self._execute(inputs, planned=True)
            return {name: env[self.aliases.get(name, name)] for name in self.outputs}
        # A run borrows an arena and a workspace region that an earlier run returned (fresh
        # ones where every one is in use by a concurrent run): memory the OS maps anew
        # faults in on first touch, page by page, some milliseconds a run for ResNet-50's
        # 7 MiB, and more where two threads fault at once. list.pop and append are atomic.
        scratch = self._scratch.pop() if self._scratch else (
            _arena(self.memory_plan.arena_bytes), _arena(program.workspace_bytes))
        try:
            arena, workspace = scratch
            env, self.last_profile = program.run(
                {n: np.asarray(inputs[n], order="C") for n in self.inputs}, workspace, HOST.allocate, arena)
            return {name: program.array(self.aliases.get(name, name), env, arena) for name in self.outputs}
        finally:
            self._scratch.append(scratch)

    def _native_program(self) -> Program | None:
        """The run as one native call (:mod:`.program`), built on first use; None where
        the native runtime has no port."""
        if self._program is None:
            pool = native_pool()
            if pool is None:
                return None
            types = {name: (tuple(b.shape), np.dtype(b.dtype)) for step in self.steps if step.kernel is not None
                     for name, b in zip(step.outputs, step.kernel.outputs)}
            self._program = Program(pool, self.steps, self._slots, self.inputs, self.constants, types)
        return self._program

    def run_intermediates(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Every value a kernel writes (each step's outputs: fused groups expose their
        last node's), and the part's outputs, by name. Each is allocated apart, since
        values that share the arena overwrite each other."""
        env = self._execute(inputs, planned=False)
        values = {name: env[name] for step in self.steps for name in step.outputs}
        values.update((name, env[self.aliases.get(name, name)]) for name in self.outputs)
        return values

    def _execute(self, inputs: Mapping[str, np.ndarray], planned: bool) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = dict(self.constants)
        env.update({n: np.asarray(inputs[n], order="C") for n in self.inputs})
        arena = _arena(self.memory_plan.arena_bytes) if planned else None
        profile = []
        for step, slots in zip(self.steps, self._slots):
            if step.kernel is None:
                env[step.outputs[0]] = env[step.inputs[0]].reshape(step.view)
                continue
            outs = [HOST.allocate(shape, dtype) if offset is None or arena is None
                    else arena[offset:offset + nbytes].view(dtype).reshape(shape)
                    for offset, nbytes, shape, dtype in slots]
            start = time.perf_counter()
            for value, axis, size, wraps in step.checks:
                problem = index_problem(env[value], axis, size, wraps)
                if problem is not None:
                    raise InputError(f"{step.name}: {value}: {problem}")
            # Inputs were checked against the interface and made C-contiguous above;
            # each step's outputs are arrays of its buffers' types that no operand of
            # the step overlaps (the plan keeps a step's operands and results apart).
            step.kernel.launch([*(env[n] for n in step.inputs), *outs])
            profile.append((step.name, time.perf_counter() - start))
            env.update(zip(step.outputs, outs))
        self.last_profile = profile
        return env

    @property
    def artifact(self) -> bytes:
        """A zip of the manifest, each kernel's object code and the constants, written with
        fixed dates (:mod:`hetero.core.runtime.archive`): the same part gives the same bytes."""
        manifest = {
            "inputs": list(self.inputs), "outputs": list(self.outputs), "aliases": self.aliases,
            "host_cpu": host_cpu(), "constants": list(self.constants),
            "steps": [{"name": s.name, "inputs": list(s.inputs), "outputs": list(s.outputs),
                       "nodes": list(s.nodes), "checks": [list(c) for c in s.checks],
                       **({"view": list(s.view)} if s.kernel is None else {"image": s.kernel.image()})}
                      for s in self.steps],
        }
        return write_zip([
            ("manifest.json", json.dumps(manifest)),
            *((f"kernels/{i}.o", s.kernel.module.object_code) for i, s in enumerate(self.steps)
              if s.kernel is not None),
            constants_member(self.constants),
        ])

    @classmethod
    def from_artifact(cls, artifact: bytes | memoryview) -> LlvmCpuPart:
        """The part whose :attr:`artifact` is ``artifact``; a named error for one that is damaged.

        From a ``memoryview`` the constants are views of it, not copies
        (:func:`~hetero.core.runtime.archive.read_constants`)."""
        source = "llvm_cpu artifact"
        with open_zip(artifact, source) as zf:
            manifest = read_manifest(zf, source)
            try:
                if manifest["host_cpu"] != host_cpu():
                    raise CodegenError(
                        f"this part was compiled for a {manifest['host_cpu']} CPU, the host is a "
                        f"{host_cpu()}; recompile the model here"
                    )
                steps = []
                for i, s in enumerate(manifest["steps"]):
                    names = tuple(s["inputs"]), tuple(s["outputs"]), tuple(s["nodes"])
                    if "view" in s:
                        steps.append(Step(s["name"], None, *names, view=tuple(int(d) for d in s["view"])))
                        continue
                    code = read_member(zf, f"kernels/{i}.o", source)
                    steps.append(Step(s["name"], CompiledKernel.from_image(s["image"], code), *names,
                                      tuple(saved_index_check(c) for c in s.get("checks", []))))
                constants = read_constants(zf, source, manifest["constants"])
                return cls(tuple(manifest["inputs"]), tuple(manifest["outputs"]), steps, constants,
                           dict(manifest["aliases"]))
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise DamagedFileError(f"{source}: its manifest is incomplete or malformed "
                                       f"({type(exc).__name__}: {exc}); recompile the model") from None


def _plan(steps: list[Step], outputs: tuple[str, ...]) -> tuple[MemoryPlan, list[list[_Slot]]]:
    """The arena plan of ``steps``' intermediates and, per step, where each kernel
    output goes: the arena for all but the part's outputs and the values they view."""
    types = {name: (tuple(b.shape), np.dtype(b.dtype)) for step in steps if step.kernel is not None
             for name, b in zip(step.outputs, step.kernel.outputs)}
    viewed = {step.outputs[0]: step.inputs[0] for step in steps if step.kernel is None}
    apart = set()
    for name in outputs:
        while name in viewed:
            name = viewed[name]
        apart.add(name)
    liveness = analyze_step_liveness(
        "llvm_cpu part", [StepUse(s.name, s.inputs, s.outputs, s.kernel is None) for s in steps],
        {name: _nbytes(*t) for name, t in types.items()})
    plan = plan_arena(liveness, [iv for iv in liveness.intervals if iv.name not in apart],
                      space="host", alignment=ALIGNMENT)
    offsets = {a.name: a.offset for a in plan.allocations}
    slots = [[(offsets.get(name), _nbytes(*types[name]), *types[name]) for name in step.outputs]
             if step.kernel is not None else [] for step in steps]
    return plan, slots


def _nbytes(shape: tuple[int, ...], dtype: np.dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def _arena(nbytes: int) -> np.ndarray:
    """``nbytes`` uninitialised bytes on the host, starting at a multiple of :data:`ALIGNMENT`."""
    raw = HOST.allocate((nbytes + ALIGNMENT,), np.dtype(np.uint8))
    skip = -raw.ctypes.data % ALIGNMENT
    return raw[skip:skip + nbytes]
