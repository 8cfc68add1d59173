"""Support checks a codegen backend's ``supports`` chains (:mod:`hetero.core.plugin.support`)."""

from __future__ import annotations

from hetero.core.lower import is_lowerable
from hetero.core.plugin.support import Check, check


def lowerable(backend: str) -> Check:
    """Accept a node whose op lowers to the tensor IR (what a codegen backend compiles)."""
    return check(lambda node, _: is_lowerable(node.op), lambda node: f"{backend} has no lowering for {node.op}")


__all__ = ["lowerable"]
