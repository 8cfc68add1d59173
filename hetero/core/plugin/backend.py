"""The Backend contract: what a plugin declares and what it must do.

A backend *declares* (ARCHITECTURE.md, rule 5): its name and device kind, the
compile options it reads, its memory hierarchy, its peak compute throughput, the
canonical ops it implements (or that it takes every one: then it can be the
fallback) and the composite patterns it wants whole. The core *decides*: it binds
each selected backend to the user's options once (a
:class:`~hetero.core.plugin.target.Target`), and the partitioner asks
:meth:`Backend.supports` about each node and :meth:`Backend.estimate` about each
candidate region under that target, then hands every region it assigns to
:meth:`Backend.compile` with the same target.

A minimal backend::

    class MyCpu(Backend):
        name = "my_cpu"
        version = "1.0"
        device_kind = "cpu"
        peak_gflops = 50.0
        memory = MemoryHierarchy([MemoryLevel("DRAM", 2**34, bandwidth_gbps=20)])
        supported_ops = frozenset({"Relu", "Add", "Conv"})
        options = (Option("my_threads", "worker threads", default=None, types=(int,)),)

        def compile(self, subgraph, target):
            ...  # read target.options["my_threads"]; return a CompiledPart

        def load_artifact(self, artifact):
            ...  # rebuild the CompiledPart that produced `artifact`

:func:`validate_backend` checks a declaration; the plugin manager runs it on every
backend a plugin provides and skips (and reports) those that fail. A backend whose
hooks are in plugin API 1's forms is not a failure: the manager adapts it
(:mod:`hetero.core.plugin.compat`) and warns.
"""

from __future__ import annotations

import math
import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.opdef import get_op, op_names
from hetero.core.ir.pattern import Match, Op
from hetero.core.memory.hierarchy import MemoryHierarchy
from hetero.core.plugin.target import Declarations, Option, Target
from hetero.errors import HeteroError, PluginError, did_you_mean

if TYPE_CHECKING:
    from hetero.core.schedule import Trace
    from hetero.core.schedule.tune.task import TuningTask

#: The version of the plugin API. 2: ``supports``, ``estimate``, ``compile`` and
#: pattern checks take the backend's :class:`~hetero.core.plugin.target.Target`;
#: backends declare ``options`` and may declare ``takes_every_op``. 3: the kit — the
#: tensor IR, lowering, schedules, legalisation, the kernel-step plan, the shared
#: emitters and the step part — is exported from hetero.plugin; the hooks are version 2's.
#: A backend whose hooks are in version 1's forms runs adapted
#: (:mod:`hetero.core.plugin.compat`).
API_VERSION = 3

#: Backend names and device kinds: lower-case identifiers such as ``my_npu``.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class Support:
    """A backend's answer to "can you take this node?"; a refusal always says why.

    The reason reaches the partition report, so write it for the user:
    ``Support.no("Conv with group=3 is not implemented (only 1 or depthwise)")``.
    A Support is truthy when ``ok``.
    """

    ok: bool
    reason: str = ""

    def __post_init__(self) -> None:
        if not self.ok and not self.reason.strip():
            raise PluginError("Support.no() needs a reason: the partition report shows it to the user")

    @classmethod
    def yes(cls) -> Support:
        """The backend takes the node."""
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> Support:
        """The backend refuses the node, for ``reason``."""
        return cls(False, reason)

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class Pattern:
    """A composite a backend wants to take whole, such as a Conv followed by its Relu.

    ``pattern`` is written in the graph pattern language
    (:mod:`hetero.core.ir.pattern`) and rooted at the composite's last node;
    ``check``, when given, accepts a match or refuses it with a reason (an NPU
    refusing a fusion whose weights overflow its scratchpad), exactly as
    :meth:`Backend.supports` does for one node; it receives the match and the
    backend's target, whose ``memory`` is the device the options describe. The
    partitioner keeps each accepted match in one region instead of splitting it::

        Pattern("conv_relu", Op("Relu", Op("Conv", Var("x"), Const("w"), ..., name="conv")),
                check=lambda m, target: Support.yes()
                if m.const("w").nbytes <= target.memory.levels[1].capacity_bytes
                else Support.no("weights exceed the scratchpad"))

    ``example``, when given, builds a small graph the pattern matches, for the
    conformance suite (:mod:`hetero.testing`), which checks the composite on it;
    the suite fails a pattern that has none.
    """

    name: str
    pattern: Op
    check: Callable[[Match, Target], Support] | None = None
    example: Callable[[], Graph] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PluginError(f"a Pattern needs a name, got {self.name!r}")
        if not isinstance(self.pattern, Op):
            raise PluginError(
                f"pattern {self.name!r}: the pattern must be an Op from "
                f"hetero.core.ir.pattern, rooted at the composite's last node; got {self.pattern!r}"
            )

    def match(self, node: Node, target: Target) -> Iterator[tuple[Match, Support]]:
        """Every way the composite fits with ``node`` as its root, with the check's verdict
        under ``target``."""
        for found in self.pattern.match(node):
            verdict = Support.yes() if self.check is None else self.check(found, target)
            if not isinstance(verdict, Support):
                raise PluginError(
                    f"pattern {self.name!r}: check returned {verdict!r} at node {node.name}; "
                    "it must return Support.yes() or Support.no(reason)"
                )
            yield found, verdict


@runtime_checkable
class CompiledPart(Protocol):
    """What :meth:`Backend.compile` returns: a runnable, saveable piece of a model.

    ``inputs`` and ``outputs`` are the value names of the subgraph it was compiled
    from, in order; ``run`` maps input arrays by name to output arrays by name;
    ``artifact`` is everything :meth:`Backend.load_artifact` needs to rebuild the
    part in another process (machine code, PTX, an instruction stream...).

    A part may offer more, each an optional capability listed in
    :mod:`hetero.core.plugin.capabilities` as a runtime-checkable Protocol that the
    core asks for with ``isinstance``: :class:`~hetero.core.plugin.capabilities.RunsIntermediates`
    (``run_intermediates``, for ``hetero compare`` per node),
    :class:`~hetero.core.plugin.capabilities.Reports` (``report()``),
    :class:`~hetero.core.plugin.capabilities.DrawsTimeline` (``timeline_html()``),
    :class:`~hetero.core.plugin.capabilities.RecordsTimeline` (``record_timeline``),
    :class:`~hetero.core.plugin.capabilities.Profiles` (``last_profile``),
    :class:`~hetero.core.plugin.capabilities.CountsKernels` (``kernel_count``) and
    :class:`~hetero.core.plugin.capabilities.OnDevice` (``device``: a part on a
    :class:`~hetero.core.exec.device.Device` takes and returns that device's
    arrays, and the executable moves values between devices; any other part is on
    the host and takes and returns numpy arrays).
    """

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def artifact(self) -> bytes:
        """The saveable form of this part."""
        ...

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the part on ``inputs`` (name → array); return its outputs by name."""
        ...


class Backend(ABC):
    """Base class of every backend; subclass it and set the declarations.

    Declarations (class or instance attributes):

    - ``name``: a lower-case identifier, unique among installed backends.
    - ``version``: the backend's version string.
    - ``device_kind``: ``"cpu"``, ``"gpu"``, ``"npu"``, ``"fpga"``... (lower case).
    - ``options``: the compile :class:`~hetero.core.plugin.target.Option` s it reads;
      the core refuses any other, so a misspelt option is an error, not ignored.
    - ``memory``: the device's :class:`~hetero.core.memory.MemoryHierarchy` (under
      default options; :meth:`declare` gives it under others).
    - ``peak_gflops``: peak compute throughput, used by the default :meth:`estimate`.
    - ``supported_ops``: the canonical op names it implements.
    - ``takes_every_op``: true for a backend that implements every canonical op; the
      core picks the fallback (what takes the nodes no target does) among those.
    - ``patterns``: the :class:`Pattern` composites it wants whole.
    - ``artifact_views``: true for a backend whose :meth:`load_artifact` takes a
      ``memoryview`` as well as ``bytes`` (and keeps no more of it than it
      needs): the compile cache then hands it a view of the mapped entry instead of a
      copy, so weights load without being copied.

    Behaviour: :meth:`compile` and :meth:`load_artifact` must be implemented;
    :meth:`declare`, :meth:`supports` and :meth:`estimate` have defaults worth
    refining. Every hook that plans or builds receives the
    :class:`~hetero.core.plugin.target.Target`: the backend bound to the user's
    options, built once per compile.
    """

    name: str = ""
    version: str = ""
    device_kind: str = ""
    options: Sequence[Option] = ()
    memory: MemoryHierarchy | None = None
    peak_gflops: float = 0.0
    supported_ops: Collection[str] = frozenset()
    takes_every_op: bool = False
    patterns: Sequence[Pattern] = ()
    artifact_views: bool = False

    def declare(self, options: Mapping[str, Any]) -> Declarations:
        """The device as ``options`` (every declared option, set or default) describe it.

        By default the class declarations, whatever the options. Override when an
        option changes the machine (an NPU's SRAM size): what the partitioner plans
        with is then what :meth:`compile` builds for. Raise a
        :class:`~hetero.errors.HeteroError` naming the option to refuse a value.
        """
        if not isinstance(self.memory, MemoryHierarchy):
            raise PluginError(f"backend {self.name!r}: declares no memory hierarchy")
        return Declarations(self.memory, float(self.peak_gflops), tuple(self.patterns))

    def device_status(self) -> str:
        """What this machine offers the backend, where that limits it: empty when nothing
        does (the default), else a sentence ``hetero plugins`` shows beside it, such as
        ``"no CUDA device found: ...; kernels compile to PTX, and running them needs a GPU"``.

        It informs; it does not refuse. A backend whose device is absent still declares,
        plans and compiles (the partition shows what it would take), and says plainly at
        run time that the device is missing.
        """
        return ""

    def supports(self, node: Node, target: Target) -> Support:
        """Whether this backend takes ``node`` under ``target``; by default, whether its op
        is declared.

        Override to refuse nodes by dtype, attribute or size, and say why.
        """
        if node.op in self.supported_ops:
            return Support.yes()
        return Support.no(f"{self.name} does not implement {node.op}")

    def estimate(self, subgraph: Graph, target: Target) -> float:
        """Seconds ``subgraph`` would take on ``target``'s device; by default a per-node roofline.

        Each node costs the larger of its FLOPs over the peak throughput and the bytes
        it reads and writes over the outermost memory level's bandwidth: no fusion, no
        cache reuse, so the estimate errs on the slow side. Override with a model
        of the device (a cycle count, a tuned table) when there is one.
        """
        return sum(roofline(node, target.peak_gflops, target.memory.outermost.bandwidth_gbps)
                   for node in subgraph.nodes)

    @abstractmethod
    def compile(self, subgraph: Graph, target: Target) -> CompiledPart:
        """Generate code for ``subgraph`` and return it as a runnable part.

        Every node of ``subgraph`` was accepted by :meth:`supports` under ``target``;
        ``target.options`` holds every option this backend declares (the user's value
        or the default), and ``target.dump_dir``, when set, is a folder for every
        stage. Raise :class:`hetero.errors.PluginError` naming the node to refuse the
        subgraph; the core then falls back for it.
        """

    @abstractmethod
    def load_artifact(self, artifact: bytes) -> CompiledPart:
        """Rebuild the part whose :attr:`CompiledPart.artifact` is ``artifact`` (a
        ``memoryview`` of those bytes when the backend declares ``artifact_views``)."""

    # -- auto-tuning (hetero.core.schedule.tune): a backend that schedules with traces implements these --

    def tuning_tasks(self, subgraph: Graph, target: Target) -> list[TuningTask]:
        """The distinct kernels :meth:`compile` would build for ``subgraph``, one
        :class:`~hetero.core.schedule.tune.task.TuningTask` each (equal kernels one task, its
        occurrences counted); by default none: the backend is not tunable."""
        return []

    def tuning_replay(self, task: TuningTask, trace: Trace) -> None:
        """Apply ``trace`` to ``task``'s function, raising
        :class:`~hetero.errors.ScheduleError` when it does not fit; cheap (no code is
        generated), run in the tuner's process to reject candidates before measuring."""
        raise PluginError(f"backend {self.name} has no tuning tasks, so it replays no trace")

    def tuning_measure(self, task: TuningTask, trace: Trace, repeats: int,
                       seed: int) -> tuple[float, list[np.ndarray]]:
        """Build ``task`` with ``trace`` and run it ``repeats`` times on inputs drawn from
        ``seed``: the median seconds and the outputs (compared with the default
        schedule's). Runs in a worker process, so it may crash or hang without harm."""
        raise PluginError(f"backend {self.name} has no tuning tasks, so it measures none")

    def tuning_machine(self) -> dict[str, Any]:
        """What identifies the machine a measurement holds for (records from another are
        used only when asked); by default the backend's name and version."""
        return {"backend": self.name, "version": self.version}

    def tuning_features(self, task: TuningTask, trace: Trace) -> list[float] | None:
        """What ``trace`` makes of ``task``'s kernel, as numbers that mean the same for
        every task of this backend (vector lanes, register tile, working set against
        the caches): a learned cost model trained on records of one task ranks another's
        candidates through them. The same length for every task and trace; None where
        the backend offers none (the default) or ``trace`` does not replay."""
        return None

    def __repr__(self) -> str:
        return f"<Backend {self.name or type(self).__name__} {self.version} ({self.device_kind})>"


def node_work(node: Node) -> tuple[float, int]:
    """``node``'s FLOPs (its op's count) and the bytes it reads and writes."""
    ins = [v.type for v in node.inputs if v is not None]
    outs = [v.type for v in node.outputs]
    return get_op(node.op).flops(ins, outs, node.attrs), sum(t.nbytes for t in (*ins, *outs))


def roofline(node: Node, peak_gflops: float, bandwidth_gbps: float) -> float:
    """Seconds ``node`` takes at ``peak_gflops`` and ``bandwidth_gbps``: the larger of its
    compute and its memory traffic, as :meth:`Backend.estimate` counts each node."""
    flops, moved = node_work(node)
    return max(flops / (peak_gflops * 1e9), moved / (bandwidth_gbps * 1e9))


def validate_backend(backend: object) -> list[str]:
    """Problems with ``backend``'s declarations, one sentence each; empty if it is sound.

    Checks that it is a :class:`Backend` whose hooks hetero can call: each in the
    current form, or every one that is not in an API 1 form that hetero adapts
    (:func:`~hetero.core.plugin.compat.review_hooks`; the adapted forms are not
    problems here, the plugin manager warns about them), that its name, version and
    device kind are well formed, that its options are sound, that its memory
    hierarchy and peak throughput are declared, that every op it lists is a
    canonical op (all of them when it declares ``takes_every_op``) and that its
    patterns are sound (canonical ops, known attributes, unique names).
    """
    if not isinstance(backend, Backend):
        return [f"{backend!r} is not a hetero Backend (subclass hetero.core.plugin.Backend)"]
    problems: list[str] = []
    label = f"backend {backend.name!r}"
    if not isinstance(backend.name, str) or not NAME_PATTERN.match(backend.name):
        problems.append(
            f"{label}: name must be a lower-case identifier such as 'my_npu' "
            "(letters, digits, underscores; a letter first)"
        )
    if not isinstance(backend.version, str) or not backend.version.strip():
        problems.append(f"{label}: declares no version")
    if not isinstance(backend.device_kind, str) or not NAME_PATTERN.match(backend.device_kind):
        problems.append(
            f"{label}: device_kind must be a lower-case word such as 'cpu', 'gpu', 'npu' "
            f"or 'fpga', got {backend.device_kind!r}"
        )
    if not isinstance(backend.memory, MemoryHierarchy):
        problems.append(f"{label}: memory must be a MemoryHierarchy, got {backend.memory!r}")
    peak = backend.peak_gflops
    if isinstance(peak, bool) or not isinstance(peak, numbers.Real) or not (
        math.isfinite(peak) and peak > 0
    ):
        problems.append(f"{label}: peak_gflops must be a positive number, got {peak!r}")
    canonical = op_names()
    ops = backend.supported_ops
    if isinstance(ops, str) or not isinstance(ops, Collection):
        problems.append(f"{label}: supported_ops must be a collection of op names, got {ops!r}")
    else:
        problems += _unknown_ops(f"{label}: supported_ops", ops, canonical)
        if backend.takes_every_op:
            missing = sorted(set(canonical) - set(ops))
            if missing:
                problems.append(f"{label}: declares takes_every_op but its supported_ops lack "
                                f"{len(missing)} canonical op(s): {', '.join(missing[:8])}"
                                f"{' ...' if len(missing) > 8 else ''}")
    if not isinstance(backend.takes_every_op, bool):
        problems.append(f"{label}: takes_every_op must be True or False, got {backend.takes_every_op!r}")
    if not isinstance(backend.artifact_views, bool):
        problems.append(f"{label}: artifact_views must be True or False, got {backend.artifact_views!r}")
    problems += _option_problems(label, backend.options)
    problems += _hook_problems(label, backend)
    problems += _pattern_problems(label, backend.patterns)
    return problems


def _option_problems(label: str, options: object) -> list[str]:
    if isinstance(options, str) or not isinstance(options, Sequence):
        return [f"{label}: options must be a sequence of Option, got {options!r}"]
    found: list[str] = []
    seen: set[str] = set()
    for option in options:
        if not isinstance(option, Option):
            found.append(f"{label}: options holds {option!r}, which is not an Option")
            continue
        if not isinstance(option.name, str) or not NAME_PATTERN.match(option.name):
            found.append(f"{label}: option name {option.name!r} must be a lower-case identifier")
        if option.name in seen:
            found.append(f"{label}: option {option.name!r} is declared twice")
        seen.add(option.name)
    return found


def _hook_problems(label: str, backend: Backend) -> list[str]:
    """Hooks hetero cannot call: one problem naming each, and the API 1 forms beside them
    (a backend is adapted only when every hook can be)."""
    # compat builds on this module (the adapter is a Backend), hence the late import.
    from hetero.core.plugin.compat import MIGRATION_GUIDE, review_hooks

    review = review_hooks(backend)
    if not review.problems:
        return []
    also = f"; in API 1's form: {'; '.join(str(c) for c in review.changes)}" if review.changes else ""
    return [f"{label}: hooks that plugin API {API_VERSION} cannot call: {'; '.join(review.problems)}{also} "
            f"(see {MIGRATION_GUIDE})"]


def _unknown_ops(where: str, ops: Collection[object], canonical: list[str]) -> list[str]:
    found = []
    for op in sorted(ops, key=str):
        if op not in canonical:
            hint = did_you_mean(op, canonical) if isinstance(op, str) else ""
            found.append(f"{where} names {op!r}, which is not a canonical op{hint}")
    return found


def _pattern_problems(label: str, patterns: object) -> list[str]:
    if isinstance(patterns, str) or not isinstance(patterns, Sequence):
        return [f"{label}: patterns must be a sequence of Pattern, got {patterns!r}"]
    found: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        if not isinstance(pattern, Pattern):
            found.append(f"{label}: patterns holds {pattern!r}, which is not a Pattern")
            continue
        if pattern.name in seen:
            found.append(f"{label}: pattern name {pattern.name!r} is used twice")
        seen.add(pattern.name)
        try:
            pattern.pattern.validate()
        except HeteroError as exc:
            found.append(f"{label}: pattern {pattern.name!r}: {exc}")
    return found
