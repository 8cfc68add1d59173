"""One compile loop for every codegen backend: a region's kernel steps, each built by the backend.

:func:`compile_steps` takes a region after the backend's own graph passes, groups anchors
with their epilogues (:func:`~hetero.core.passes.fuse.fuse_epilogues`, unless the
backend did so before a pass of its own) and plans its steps
(:func:`~hetero.core.lower.steps.kernel_steps`, reshapes of the region's own values as
views). It asks the backend's :class:`KernelBuilder` for each kernel step's kernel,
collects the run-time index checks, the constants the steps read and the outputs that
are inputs or constants (aliases), and writes the dump stages the builder returns with
each kernel, plus the step's graph nodes, through :class:`~hetero.core.parts.dump.StageDump`,
so every backend dumps the same layout. What it returns builds the backend's
:class:`~hetero.core.parts.part.StepPart`::

    class MyBuilder(KernelBuilder[MyKernel]):
        def build(self, step):
            func = step.lower()
            kernel = my_render(func)
            return BuiltStep(kernel, lambda: [("tir", "txt", str(func)), ("code", "c", kernel.source)])

    def compile(self, subgraph, target):
        return MyPart(*compile_steps(subgraph, target, MyBuilder()))

A backend that compiles its kernels together (every step lowered and scheduled, then
the distinct functions compiled at once, in parallel) does that in
:meth:`KernelBuilder.prepare`, and each :meth:`~KernelBuilder.build` picks its kernel up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

from hetero.core import progress
from hetero.core.ir.graph import Graph, index_checks
from hetero.core.lower.steps import VIEW_OPS, KernelStep, kernel_steps, region_constants
from hetero.core.parts.dump import StageDump
from hetero.core.parts.part import Step
from hetero.core.passes.fuse import fuse_epilogues
from hetero.core.plugin.target import Target
from hetero.errors import HeteroError, PluginError

K = TypeVar("K")

#: One file of a dump: its stage (:data:`~hetero.core.parts.dump.STAGES`), its suffix
#: (``"ll"``, ``"0.ptx"``: the file is ``<stage>/<step>.<suffix>``) and its content.
StageFile = tuple[str, str, "str | bytes"]


@dataclass(frozen=True)
class BuiltStep(Generic[K]):
    """What a builder made of one kernel step.

    ``kernel`` is the backend's kernel object (the :class:`~hetero.core.parts.part.Step`'s);
    ``stages`` gives the step's dump files (:data:`StageFile`), called only when the
    compile dumps; ``inputs``, when set, are the values the kernel's parameters read
    instead of the step's (weights packed for the kernel, which the builder's
    :attr:`~KernelBuilder.constants` hold).
    """

    kernel: K
    stages: Callable[[], Iterable[StageFile]] = lambda: ()
    inputs: tuple[str, ...] | None = None


class KernelBuilder(Generic[K]):
    """How a backend turns the kernel steps of one region into kernels; :func:`compile_steps`
    calls :meth:`prepare` once, then :meth:`build` for each step in order."""

    #: The arrays a step may read by name, when not only the graph's constants
    #: (weights packed for a kernel); None: the graph's constants.
    constants: Mapping[str, np.ndarray] | None = None

    def prepare(self, steps: Sequence[KernelStep]) -> None:
        """Called with every kernel step before the first :meth:`build`: a backend that
        compiles its kernels together does it here (and reports its own progress)."""

    def build(self, step: KernelStep) -> BuiltStep[K]:
        """``step``'s kernel, and its dump stages. A HeteroError it raises becomes a
        PluginError naming the backend and the step, so the region falls back."""
        raise NotImplementedError(f"{type(self).__name__} does not say how to build a kernel")


class CompiledSteps(NamedTuple, Generic[K]):
    """A region as steps: what a :class:`~hetero.core.parts.part.StepPart` is built from,
    in its constructor's order (``MyPart(*compile_steps(...))``)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    steps: list[Step[K]]
    constants: dict[str, Any]
    aliases: dict[str, str]


def compile_steps(graph: Graph, target: Target, builder: KernelBuilder[K], *, fused: bool = False) -> CompiledSteps[K]:
    """``graph`` (a region after the backend's graph passes) as kernel steps, each kernel
    from ``builder``; ``fused`` when the backend grouped epilogues itself (before a
    pass that must see the groups), else :func:`fuse_epilogues` runs first. Dumps to
    ``target.dump_dir`` when it is set; progress as stage ``kernel``, one item a step."""
    if not fused:
        graph = fuse_epilogues(graph)
    plan = kernel_steps(graph, VIEW_OPS)
    builder.prepare([step for step in plan if step.view is None])
    dump = StageDump(target.dump_dir)
    steps: list[Step[K]] = []
    for index, step in enumerate(plan):
        progress.step("kernel", index + 1, len(plan), step.node.name)
        if step.view is not None:
            steps.append(Step(step.label, step.inputs, step.outputs, step.names, view=step.view))
            continue
        try:
            built = builder.build(step)
        except HeteroError as exc:
            raise PluginError(f"{target.name} could not build {step.label}: {exc}") from exc
        if dump:
            dump.nodes(step.node.name, step.members)
            for stage, suffix, content in built.stages():
                dump.write(stage, step.node.name, suffix, content)
        types = tuple((tuple(int(d) for d in graph.values[name].shape), graph.values[name].dtype)
                      for name in step.outputs)
        steps.append(Step(step.label, step.inputs if built.inputs is None else built.inputs, step.outputs,
                          step.names, built.kernel, tuple(c for n in step.members for c in index_checks(n)),
                          output_types=types))
    progress.end("kernel")
    used = {n for s in steps for n in s.inputs}
    constants, aliases = region_constants(graph, used)
    if builder.constants is not None:
        constants = {name: data for name, data in builder.constants.items() if name in used}
        constants.update((v.name, v.data) for v in graph.outputs if v.data is not None)
    return CompiledSteps(tuple(v.name for v in graph.inputs), tuple(v.name for v in graph.outputs), steps,
                         constants, aliases)


__all__ = ["BuiltStep", "CompiledSteps", "KernelBuilder", "StageFile", "compile_steps"]
