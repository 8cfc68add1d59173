"""The machinery every codegen backend shares around its kernels (part of the kit).

- Dumps: :class:`StageDump` writes a backend's compile stages in the one layout
  ``--dump`` gives every backend (:data:`STAGES`: graph, tir, scheduled, legalized, code,
  report).
"""

from __future__ import annotations

from hetero.core.parts import STAGES, StageDump

__all__ = ["STAGES", "StageDump"]
