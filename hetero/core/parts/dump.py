"""Named compile stages, dumped in one layout by every backend.

``hetero compile --dump DIR`` (``hetero.compile(dump=DIR)``) gives each backend a folder
(``DIR/<backend>``, or ``DIR/<backend>/<region>`` when the model has several regions)
as its target's ``dump_dir``. Every backend writes what it made of each kernel step
there, one folder a stage, one file a step, so the same stage of any two backends sits
at the same path:

========== ==============================================================================
stage      what it holds
========== ==============================================================================
graph      the step's graph nodes as text (after the backend's graph passes)
tir        the step lowered to the tensor IR
scheduled  the tensor IR after the backend's schedule
legalized  the scheduled IR legalised to the renderer's primitives
code       the target code: LLVM IR and assembly, NVVM IR and PTX, HLS C++, NPU
           assembly, C
report     what the target says of it: ptxas's figures, the HLS estimate, the NPU
           timeline, the kernel's launch
========== ==============================================================================

A backend writes the stages it has (one that compiles graph nodes straight to its
instructions has no tensor IR) and may add files of its own to a stage folder (an
ahead-of-time object file beside the assembly).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
import re
from typing import TYPE_CHECKING

from hetero.core.ir.printer import format_node

if TYPE_CHECKING:
    from hetero.core.ir.graph import Node

#: The stages, in the order a kernel passes through them.
STAGES = ("graph", "tir", "scheduled", "legalized", "code", "report")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]")


class StageDump:
    """Writes one backend's stages under ``folder`` (nothing at all when it is None)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder

    def __bool__(self) -> bool:
        return self.folder is not None

    def write(self, stage: str, name: str, suffix: str, content: str | bytes) -> Path | None:
        """Write ``content`` as ``<stage>/<name>.<suffix>``; the path, or None when not dumping.

        ``stage`` is one of :data:`STAGES`; ``name`` (a step's name) is made safe as a
        file name."""
        if self.folder is None:
            return None
        if stage not in STAGES:
            raise ValueError(f"unknown dump stage {stage!r}; the stages are {', '.join(STAGES)}")
        where = self.folder / stage
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{_UNSAFE.sub('_', name)}.{suffix}"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if content.endswith("\n") else content + "\n")
        return path

    def nodes(self, name: str, nodes: Iterable[Node]) -> Path | None:
        """Write the ``graph`` stage of step ``name``: its nodes as text, one a line."""
        return self.write("graph", name, "txt", "\n".join(format_node(node) for node in nodes))


__all__ = ["STAGES", "StageDump"]
