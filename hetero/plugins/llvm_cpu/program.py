"""A planned llvm_cpu part's run as one native call: every kernel stage of every step a
record ``{packed entry, arguments, extent, chunks}`` that the runtime
(:mod:`~hetero.plugins.llvm_cpu.runtime`) runs in order.

Why: a part of ShuffleNet launches 274 kernels; through Python each launch costs some
10 us of argument lists and ctypes calls, a fifth of the model's time at one thread.
Here everything that does not change between runs is worked out once, when the part
is built: which value every argument of every stage is, and where it lives, as a
(*base*, offset) pair. The bases are what a run supplies: 0 for constants (their
absolute addresses), the run's arena, the run's workspace region, each input and
each output allocated apart. A run then computes every pointer with one numpy
expression, offsets the records' argument addresses into its own pointer table and
makes one call, so runs from several threads each have their own tables.

Run-time index checks (a Gather's indices) are the exception: a check on a value a
kernel of the part computes must run after that kernel and before its reader, so the
program is cut into segments at those steps and the checks run between them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hetero.plugin import InputError, index_problem
from hetero.plugins.llvm_cpu.runtime import NativePool

#: Base index of absolute addresses (constants), the run's arena and its workspace region;
#: inputs, then values allocated apart, follow from FIRST_OWN.
ABSOLUTE, ARENA, WORKSPACE, FIRST_OWN = 0, 1, 2, 3
#: Arena and workspace offsets are multiples of this, and so are the regions'
#: addresses: a cache line.
ALIGNMENT = 64

#: A run-time index check: (value, axis, size, wraps).
Check = tuple[str, int, Any, bool]


@dataclass(frozen=True)
class Segment:
    """Records ``[start, stop)`` of the program, after ``checks`` pass."""

    checks: tuple[tuple[str, Check], ...]  # (step name, check)
    start: int
    stop: int


class Program:
    """The native form of a planned part's run (see the module docstring).

    ``steps`` are the part's steps (:class:`~hetero.plugin.parts.Step`);
    ``slots`` the arena offset of each kernel output (None: allocated apart), as the
    part planned them; ``types`` the shape and dtype of every value a step writes.
    """

    def __init__(self, pool: NativePool, steps: list[Any], slots: list[list[Any]], inputs: tuple[str, ...],
                 constants: Mapping[str, np.ndarray], types: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> None:
        self.pool = pool
        self.inputs = inputs
        # asarray, not ascontiguousarray: that makes a 0-d array 1-d.
        self._held = {n: np.asarray(a, order="C") for n, a in constants.items()}
        self.types = dict(types)
        root: dict[str, str] = {}  # a view's value -> the value it views
        self.view_shapes: dict[str, tuple[int, ...]] = {}
        for step in steps:
            if step.kernel is None:
                root[step.outputs[0]] = root.get(step.inputs[0], step.inputs[0])
                self.view_shapes[step.outputs[0]] = tuple(step.view)
        self.root = root
        apart: list[str] = []
        where: dict[str, tuple[int, int]] = {}
        for name in inputs:
            where[name] = (FIRST_OWN + len(where), 0)
        for name, array in self._held.items():
            where.setdefault(name, (ABSOLUTE, array.ctypes.data))
        for step, step_slots in zip(steps, slots):
            if step.kernel is None:
                continue
            for name, (offset, *_rest) in zip(step.outputs, step_slots):
                if offset is None:
                    apart.append(name)
                    where[name] = (FIRST_OWN + len(inputs) + len(apart) - 1, 0)
                else:
                    where[name] = (ARENA, offset)
        self.apart = tuple(apart)
        self.where = where
        kinds: list[int] = []
        offsets: list[int] = []
        records: list[tuple[int, int, int, int]] = []
        segments: list[Segment] = []
        pending: list[tuple[str, Check]] = []
        self.record_steps: list[tuple[str, int, int]] = []  # (step name, first record, end)
        self._kernels: list[Any] = []  # whose last_launches a run sets, as their own call would
        self.workspace_bytes = 0
        computed: set[str] = set()
        start = 0
        for step in steps:
            if step.kernel is None:
                continue
            late = [(step.name, c) for c in step.checks if self.root.get(c[0], c[0]) in computed]
            if late:
                segments.append(Segment(tuple(pending), start, len(records)))
                pending, start = late, len(records)
            pending += [(step.name, c) for c in step.checks if (step.name, c) not in late]
            table_at = len(kinds)
            for name in (*step.inputs, *step.outputs):
                kind, offset = where[self.root.get(name, name)]
                kinds.append(kind)
                offsets.append(offset)
            places, space = workspace_layout(step.kernel)
            kinds += [WORKSPACE] * len(places)
            offsets += places
            self.workspace_bytes = max(self.workspace_bytes, space)
            first = len(records)
            records += [(r.fn, r.args, r.extent, r.chunks) for r in step.kernel.launches(table_at * 8)]
            self.record_steps.append((step.name, first, len(records)))
            self._kernels.append(step.kernel)
            computed.update(step.outputs)
        segments.append(Segment(tuple(pending), start, len(records)))
        self.segments = tuple(segments)
        self._kinds = np.array(kinds, np.int64)
        self._offsets = np.array(offsets, np.int64)
        self._records = np.array(records, np.int64).reshape(-1, 4)
        # Each step's seconds from the records' nanoseconds in one reduceat (every step
        # has at least one record): a Python sum per step cost 1.5 us, a millisecond a
        # run on ShuffleNet's 400 steps.
        self._step_names = [name for name, _, _ in self.record_steps]
        self._step_starts = np.array([a for _, a, _ in self.record_steps], np.intp)

    def run(self, inputs: Mapping[str, np.ndarray], workspace: np.ndarray,
            allocate_apart: Callable[[tuple[int, ...], np.dtype], np.ndarray],
            arena: np.ndarray | None) -> tuple[dict[str, np.ndarray], list[tuple[str, float]]]:
        """One run: the part's inputs, intermediates and outputs by name (what the step loop
        of the part returns, for the names outside the arena), and each step's seconds.
        ``workspace`` is the run's workspace region (at least :attr:`workspace_bytes`),
        ``arena`` its arena; ``allocate_apart`` makes each value allocated apart."""
        env: dict[str, np.ndarray] = dict(self._held)
        env.update({n: inputs[n] for n in self.inputs})
        for name in self.apart:
            env[name] = allocate_apart(*self.types[name])
        bases = np.empty(FIRST_OWN + len(self.inputs) + len(self.apart), np.int64)
        bases[ABSOLUTE] = 0
        bases[ARENA] = 0 if arena is None else arena.ctypes.data
        bases[WORKSPACE] = workspace.ctypes.data
        for k, name in enumerate((*self.inputs, *self.apart)):
            bases[FIRST_OWN + k] = env[name].ctypes.data
        table = bases[self._kinds] + self._offsets
        records = self._records.copy()
        if len(records):
            records[:, 1] += table.ctypes.data
        ns = np.zeros(len(records), np.int64)
        for segment in self.segments:
            for step_name, (value, axis, size, wraps) in segment.checks:
                problem = index_problem(self.array(value, env, arena), axis, size, wraps)
                if problem is not None:
                    raise InputError(f"{step_name}: {value}: {problem}")
            if segment.stop > segment.start:
                self.pool.program(records[segment.start:].ctypes.data, segment.stop - segment.start,
                                  ns[segment.start:].ctypes.data)
        seconds = (np.add.reduceat(ns, self._step_starts) * 1e-9).tolist() if len(ns) else []
        profile = list(zip(self._step_names, seconds))
        for kernel in self._kernels:
            kernel.last_launches = kernel.launch_plan
        return env, profile

    def array(self, name: str, env: Mapping[str, np.ndarray], arena: np.ndarray | None) -> np.ndarray:
        """The array of value ``name`` in a run: a view into the arena for an intermediate."""
        base = self.root.get(name, name)
        if base in env:
            found = env[base]
        else:
            assert arena is not None
            shape, dtype = self.types[base]
            offset = self.where[base][1]
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            found = arena[offset:offset + nbytes].view(dtype).reshape(shape)
        return found.reshape(self.view_shapes.get(name, found.shape))


def workspace_layout(kernel: Any) -> tuple[list[int], int]:
    """Where each of ``kernel``'s workspaces sits in a run's workspace region, and the
    bytes they take (each starts on a cache line)."""
    places, space = [], 0
    for buffer in kernel.module.workspaces:
        places.append(space)
        space += -(-max(buffer.nbytes, 1) // ALIGNMENT) * ALIGNMENT
    return places, space
