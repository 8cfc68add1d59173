"""Models compiled in stages, where shapes or control flow depend on data.

The importer splits such a model (:mod:`hetero.core.frontend.onnx.stages`): a prefix
it could import, host nodes, and a tail of what reads their outputs.
:class:`StagedExecutable` runs them in that order:

1. the prefix, compiled at once and partitioned across the targets like any graph;
2. the host nodes, on numpy arrays: the data-dependent ops by their host kernels
   (:mod:`hetero.core.exec.host_ops`), and control flow (If, Loop, Scan) by running
   its bodies, each compiled as a graph of its own with the same targets, so a body's
   regions land on an accelerator as any graph's would;
3. the tail, compiled at its first run as a model whose inputs are the host nodes'
   outputs with dynamic dims: it specialises on their shapes (and, where an operand
   such as TopK's ``k`` came from data, on that value), each specialisation compiled
   once and cached, bounded by ``max_specializations``. The tail may stage again.

Staging nests (a tail that stages, a body with host nodes of its own) at most
:data:`MAX_STAGE_DEPTH` deep.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import helper

from hetero.core.exec.host_ops import run_host_op
from hetero.core.exec.inputs import check_declared
from hetero.core.frontend.onnx.context import attribute_value
from hetero.core.frontend.onnx.loader import node_label
from hetero.core.frontend.onnx.stages import StageSplit, body_model, tail_model
from hetero.core.ir.graph import Graph
from hetero.core.runtime.executable import Interface
from hetero.errors import HeteroError, InputError, UnsupportedOpError

#: How deep staged executables may nest (tails that stage again, bodies with host nodes).
MAX_STAGE_DEPTH = 32

_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("hetero_stage_depth", default=0)


class Runnable(Protocol):
    """What hetero.compile returns: an Executable, or one that compiles on first sight."""

    @property
    def interface(self) -> Interface: ...

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]: ...

    def report(self) -> str: ...

    def timelines(self) -> dict[str, str]: ...


#: hetero.compile with the user's targets and settings.
Compile = Callable[[onnx.ModelProto | Graph], Runnable]


@contextlib.contextmanager
def _at_depth(depth: int) -> Iterator[None]:
    token = _DEPTH.set(depth)
    try:
        yield
    finally:
        _DEPTH.reset(token)


class StagedExecutable:
    """A model run as compiled prefix, host nodes and compiled tail (see the module).

    ``run``, ``report``, ``timelines`` and ``interface`` behave as an Executable's;
    the output shapes in ``interface`` are those of the last run.
    """

    def __init__(self, split: StageSplit, compile: Compile) -> None:
        self.depth = _DEPTH.get() + 1
        if self.depth > MAX_STAGE_DEPTH:
            raise UnsupportedOpError(
                f"model {split.name}: data-dependent stages nest more than {MAX_STAGE_DEPTH} deep "
                "(each NonZero-like op or data-driven loop inside another's tail or body adds one); "
                "simplify the model's post-processing, or run that part outside the model")
        self.name = split.name
        self.split = split
        self._compile = compile
        with _at_depth(self.depth):
            self.head = compile(split.prefix) if split.prefix is not None else None
        self.steps = [_host_step(node, split, compile) for node in split.host]
        self.tail: Runnable | None = None
        self._seconds: dict[str, list[Any]] = {}  # stage -> [calls, seconds] over all runs
        self._outputs: list[tuple[str, tuple[int, ...], str]] = []

    @property
    def interface(self) -> Interface:
        outputs = self._outputs or [(n, (), "float32") for n in self.split.outputs]
        return Interface(list(self.split.inputs), outputs)

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the stages on ``inputs`` (checked as an Executable checks them)."""
        split = self.split
        env: dict[str, np.ndarray] = {**split.constants,
                                      **check_declared(self.name, split.inputs, inputs)}
        with _at_depth(self.depth):
            if self.head is not None:
                self._timed("prefix", lambda: env.update(
                    self.head.run({n: env[n] for n, _, _ in self.head.interface.inputs})))
            for step in self.steps:
                self._timed(f"host {step.node.op_type}", lambda: env.update(step.run(env)))
            if split.tail:
                if self.tail is None:
                    produced = {o for n in split.host for o in n.output if o}
                    self.tail = self._compile(tail_model(split, {n: env[n] for n in produced if n in env}))
                tail = self.tail
                self._timed("tail", lambda: env.update(
                    tail.run({n: env[n] for n, _, _ in tail.interface.inputs})))
        missing = [o for o in split.outputs if o not in env]
        if missing:
            raise HeteroError(f"model {self.name}: no stage computed output(s) {missing}; "
                              "please report this with the model")
        self._outputs = [(o, env[o].shape, env[o].dtype.name) for o in split.outputs]
        return {o: env[o] for o in split.outputs}

    def _timed(self, what: str, fn: Callable[[], None]) -> None:
        start = time.perf_counter()
        fn()
        totals = self._seconds.setdefault(what, [0, 0.0])
        totals[0] += 1
        totals[1] += time.perf_counter() - start

    def report(self) -> str:
        """The stages with their time over the runs so far, then each compiled stage's report."""
        lines = [f"executable {self.name}: compiled in stages: "
                 f"{'a prefix, ' if self.head is not None else ''}{len(self.steps)} host node(s)"
                 f"{', a tail compiled at its first run' if self.split.tail else ''}",
                 *(f"  {line}" for line in self.split.describe().splitlines())]
        if not self._seconds:
            return "\n".join([*lines, "not run yet; call run() first"])
        lines.append(f"{'stage':<48}{'calls':>6}{'ms/call':>10}")
        for what, (calls, seconds) in self._seconds.items():
            lines.append(f"{what[:47]:<48}{calls:>6}{seconds / calls * 1e3:>10.3f}")
        for title, part in (("prefix", self.head), ("tail", self.tail)):
            if part is not None:
                lines += ["", f"stage {title}", part.report()]
        return "\n".join(lines)

    def timelines(self) -> dict[str, str]:
        """The compiled stages' timelines, keyed ``prefix/REGION`` and ``tail/REGION``."""
        pages: dict[str, str] = {}
        for title, part in (("prefix", self.head), ("tail", self.tail)):
            if part is not None:
                pages.update({f"{title}/{k}": v for k, v in part.timelines().items()})
        return pages

    def save(self, path: str | os.PathLike[str]) -> None:
        """Refused: later stages are compiled for the shapes each run's data gives."""
        raise HeteroError(
            f"executable {self.name} runs {len(self.steps)} node(s) on the host and compiles what "
            "follows them for the shapes the data gives, so it cannot be saved as one file; "
            "cache its compiles instead (hetero.compile(..., cache=DIR))")


class _HostStep:
    """One host node: ``run`` maps the environment to the node's outputs."""

    def __init__(self, node: onnx.NodeProto) -> None:
        self.node = node
        self.label = node_label(node)
        self.attrs = {a.name: attribute_value(a) for a in node.attribute}

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _bind(self, results: list[np.ndarray]) -> dict[str, np.ndarray]:
        return {name: array for name, array in zip(self.node.output, results) if name}


class _Kernel(_HostStep):
    """A data-dependent op (NonZero, Unique, ...) run by its host kernel."""

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        arrays = [env[n] if n else None for n in self.node.input]
        return self._bind(run_host_op(self.node.op_type, self.attrs, arrays, self.label))


class _Body:
    """A control-flow body compiled as a model of its own, on first use."""

    def __init__(self, split: StageSplit, graph: onnx.GraphProto, what: str, compile: Compile) -> None:
        self.split, self.graph, self.what, self._compile = split, graph, what, compile
        self.declared = [i.name for i in graph.input]
        self.exe: Runnable | None = None
        self.outputs: list[str] = []

    def run(self, env: Mapping[str, np.ndarray], feeds: list[np.ndarray]) -> list[np.ndarray]:
        """The body's outputs, in order, for its declared inputs ``feeds`` and the outer
        values it reads from ``env``."""
        bound = dict(zip(self.declared, feeds))
        if self.exe is None:
            model, self.outputs = body_model(self.split, self.graph, self.what, bound)
            self.exe = self._compile(model)
        exe = self.exe
        results = exe.run({n: bound[n] if n in bound else env[n] for n, _, _ in exe.interface.inputs})
        return [results[o] for o in self.outputs]


class _If(_HostStep):
    def __init__(self, node: onnx.NodeProto, split: StageSplit, compile: Compile) -> None:
        super().__init__(node)
        self.branches = {key: _Body(split, self.attrs[key], key, compile)
                         for key in ("then_branch", "else_branch")}

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        cond = env[self.node.input[0]]
        if cond.size != 1:
            raise InputError(f"{self.label}: its condition has {cond.size} elements, not one")
        key = "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"
        return self._bind(self.branches[key].run(env, []))


class _Loop(_HostStep):
    def __init__(self, node: onnx.NodeProto, split: StageSplit, compile: Compile) -> None:
        super().__init__(node)
        self.body = _Body(split, self.attrs["body"], "body", compile)

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        inputs = list(self.node.input) + [""] * (2 - len(self.node.input))
        limit = int(env[inputs[0]].reshape(-1)[0]) if inputs[0] else None
        going = bool(env[inputs[1]].reshape(-1)[0]) if inputs[1] else True
        states = [env[n] for n in inputs[2:]]
        n = len(states)
        scans: list[list[np.ndarray]] = [[] for _ in range(len(self.attrs["body"].output) - 1 - n)]
        step = 0
        while going and (limit is None or step < limit):
            outs = self.body.run(env, [np.array(step, np.int64), np.array(going), *states])
            going = bool(np.asarray(outs[0]).reshape(-1)[0])
            states = outs[1:1 + n]
            for j, value in enumerate(outs[1 + n:]):
                scans[j].append(value)
            step += 1
        return self._bind([*states, *(_stacked(parts, 0, out) for parts, out in
                                      zip(scans, self.attrs["body"].output[1 + n:]))])


class _Scan(_HostStep):
    def __init__(self, node: onnx.NodeProto, split: StageSplit, compile: Compile) -> None:
        super().__init__(node)
        self.body = _Body(split, self.attrs["body"], "body", compile)

    def run(self, env: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        m = int(self.attrs["num_scan_inputs"])
        arrays = [env[n] for n in self.node.input if n]
        n = len(arrays) - m
        states, sequences = arrays[:n], arrays[n:]
        in_axes = [a % s.ndim for a, s in zip(self.attrs.get("scan_input_axes", [0] * m), sequences)]
        in_dirs = self.attrs.get("scan_input_directions", [0] * m)
        outputs = self.attrs["body"].output[n:]
        out_axes = self.attrs.get("scan_output_axes", [0] * len(outputs))
        out_dirs = self.attrs.get("scan_output_directions", [0] * len(outputs))
        lengths = {s.shape[a] for s, a in zip(sequences, in_axes)}
        if len(lengths) != 1:
            raise InputError(f"{self.label}: its scan inputs have different lengths {sorted(lengths)}")
        (length,) = lengths
        scans: list[list[np.ndarray]] = [[] for _ in outputs]
        for step in range(length):
            slices = [np.take(s, length - 1 - step if d else step, axis=a)
                      for s, a, d in zip(sequences, in_axes, in_dirs)]
            outs = self.body.run(env, [*states, *slices])
            states = outs[:n]
            for j, value in enumerate(outs[n:]):
                scans[j].append(value)
        stacked = [_stacked(parts[::-1] if d else parts, axis, out)
                   for parts, axis, d, out in zip(scans, out_axes, out_dirs, outputs)]
        return self._bind([*states, *stacked])


def _stacked(parts: list[np.ndarray], axis: int, declared: onnx.ValueInfoProto) -> np.ndarray:
    """Scan outputs stacked along a new ``axis``; none (zero iterations) as an empty
    tensor of the declared element type."""
    if not parts:
        return np.zeros((0,), helper.tensor_dtype_to_np_dtype(declared.type.tensor_type.elem_type))
    return np.stack(parts, axis=axis % (parts[0].ndim + 1))


def _host_step(node: onnx.NodeProto, split: StageSplit, compile: Compile) -> _HostStep:
    control = {"If": _If, "Loop": _Loop, "Scan": _Scan}.get(node.op_type)
    return control(node, split, compile) if control is not None else _Kernel(node)

