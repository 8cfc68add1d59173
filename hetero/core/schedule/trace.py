"""Schedule traces: the primitives a schedule applied, replayable on a fresh function.

Every primitive of :class:`~hetero.core.schedule.schedule.Schedule` appends one
:class:`Instruction`. Inputs are names (blocks, and loops by block and loop
variable), so a trace replays on any function lowered from the same compute
definition. An instruction's *decisions* are its tunable choices (a split's
factors): a tuner changes them with :meth:`Trace.with_decisions` and replays::

    trace = sch.trace
    faster = trace.with_decisions({0: {"factors": [4, 16]}}).apply(func)
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hetero.core.ir.tir.buffer import Partition
from hetero.errors import ScheduleError

if TYPE_CHECKING:
    from hetero.core.ir.tir.stmt import PrimFunc

#: The primitives a trace may hold, each replayed by calling the Schedule method of
#: that name with the instruction's inputs, attrs and decisions.
KINDS = ("split", "reorder", "fuse", "vectorize", "parallel", "unroll", "bind", "pipeline",
         "annotate", "cache_read", "cache_operand", "cache_write", "compute_at", "compute_inline",
         "tile_accumulator", "pack", "rfactor")

TRACE_FORMAT = 1


@dataclass(frozen=True)
class BlockRef:
    """A block, by name; stays valid as long as the block exists."""

    name: str

    def __str__(self) -> str:
        return f"block {self.name}"


@dataclass(frozen=True)
class LoopRef:
    """A loop, by the block that owns it and its loop variable's name.

    New loops get fresh variable names (``i`` splits into ``i_0``, ``i_1``), so a
    reference stays valid until a primitive replaces the loop itself.
    """

    block: str
    name: str

    def __str__(self) -> str:
        return f"loop {self.name} (block {self.block})"


@dataclass(frozen=True)
class BufferRef:
    """A buffer the function allocates, by name (for :meth:`Schedule.annotate`)."""

    name: str

    def __str__(self) -> str:
        return f"buffer {self.name}"


Ref = BlockRef | LoopRef | BufferRef


def _ref_to_dict(r: Ref) -> dict[str, str]:
    if isinstance(r, BlockRef):
        return {"block": r.name}
    if isinstance(r, BufferRef):
        return {"buffer": r.name}
    return {"block": r.block, "loop": r.name}


def _ref_from_dict(r: Mapping[str, str]) -> Ref:
    if "buffer" in r:
        return BufferRef(r["buffer"])
    return LoopRef(r["block"], r["loop"]) if "loop" in r else BlockRef(r["block"])


def _encode(value: Any) -> Any:
    """An annotation value as JSON data: a Partition as ``{"partition": [dim, kind, factor]}``,
    a tuple as a list."""
    if isinstance(value, Partition):
        return {"partition": [value.dim, value.kind, value.factor]}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    """:func:`_encode`'s inverse; lists come back as tuples (annotations are hashable)."""
    if isinstance(value, dict) and set(value) == {"partition"}:
        dim, kind, factor = value["partition"]
        return Partition(int(dim), str(kind), int(factor))
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


@dataclass(frozen=True)
class Instruction:
    """One applied primitive: ``kind``, the blocks and loops it took, its fixed
    ``attrs`` (a scope, a thread axis) and its tunable ``decisions``."""

    kind: str
    inputs: tuple[Ref, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    decisions: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The instruction as plain JSON-ready data."""
        attrs = {k: _encode(v) for k, v in self.attrs.items()}
        return {"kind": self.kind, "inputs": [_ref_to_dict(r) for r in self.inputs], "attrs": attrs,
                "decisions": dict(self.decisions)}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Instruction:
        """Read back :meth:`to_dict`'s form; raise ScheduleError on anything else."""
        try:
            kind = data["kind"]
            inputs = tuple(_ref_from_dict(r) for r in data["inputs"])
            attrs = {k: _decode(v) for k, v in dict(data.get("attrs", {})).items()}
            decisions = dict(data.get("decisions", {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ScheduleError(f"malformed trace instruction {data!r}: {exc}") from None
        if kind not in KINDS:
            raise ScheduleError(f"trace instruction of unknown kind {kind!r}; known kinds: {', '.join(KINDS)}")
        return Instruction(kind, inputs, attrs, decisions)


@dataclass(frozen=True)
class Trace:
    """The instructions of a schedule, in the order they were applied."""

    instructions: tuple[Instruction, ...] = ()

    def append(self, instruction: Instruction) -> Trace:
        """This trace with ``instruction`` added at the end."""
        return Trace(self.instructions + (instruction,))

    @property
    def decisions(self) -> dict[int, Mapping[str, Any]]:
        """Each tunable instruction's decisions, by its position in the trace."""
        return {k: ins.decisions for k, ins in enumerate(self.instructions) if ins.decisions}

    def with_decisions(self, changes: Mapping[int, Mapping[str, Any]]) -> Trace:
        """This trace with the decisions of the instructions at the given positions
        replaced (only decisions an instruction already has may change)."""
        instructions = list(self.instructions)
        for k, new in changes.items():
            if not 0 <= k < len(instructions):
                raise ScheduleError(f"trace has no instruction {k} (it has {len(instructions)})")
            old = instructions[k]
            unknown = set(new) - set(old.decisions)
            if unknown:
                raise ScheduleError(f"instruction {k} ({old.kind}) has no decision {sorted(unknown)}; "
                                    f"its decisions are {sorted(old.decisions)}")
            instructions[k] = Instruction(old.kind, old.inputs, old.attrs, {**old.decisions, **new})
        return Trace(tuple(instructions))

    def apply(self, func: PrimFunc) -> PrimFunc:
        """Replay every instruction on ``func``; return the scheduled function."""
        # Imported here: the Schedule records into a Trace, so the modules refer to each other.
        from hetero.core.schedule.schedule import Schedule

        sch = Schedule(func)
        for k, ins in enumerate(self.instructions):
            primitive = getattr(sch, ins.kind)
            try:
                inspect.signature(primitive).bind(*ins.inputs, **ins.attrs, **ins.decisions)
            except TypeError as exc:
                raise ScheduleError(f"trace instruction {k} does not fit Schedule.{ins.kind}: {exc}") from None
            primitive(*ins.inputs, **ins.attrs, **ins.decisions)
        return sch.func

    def to_json(self) -> str:
        """The trace as JSON text."""
        # One instruction a line: diffs of tuned traces stay readable.
        rows = ",\n  ".join(json.dumps(i.to_dict()) for i in self.instructions)
        return f'{{"format": {TRACE_FORMAT}, "instructions": [\n  {rows}\n]}}'

    @staticmethod
    def from_json(text: str) -> Trace:
        """Read a trace written by :meth:`to_json`."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"trace is not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != TRACE_FORMAT:
            raise ScheduleError(f"trace JSON must be an object with \"format\": {TRACE_FORMAT}")
        return Trace(tuple(Instruction.from_dict(i) for i in data.get("instructions", [])))

    def __len__(self) -> int:
        return len(self.instructions)

    def __str__(self) -> str:
        lines = []
        for ins in self.instructions:
            args = [str(r) for r in ins.inputs] + [f"{k}={v!r}" for k, v in {**ins.attrs, **ins.decisions}.items()]
            lines.append(f"{ins.kind}({', '.join(args)})")
        return "\n".join(lines)
