"""Buffers: named, typed, shaped memory in a memory scope, and how one is split into banks."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from hetero.core.ir.tir import registry
from hetero.core.ir.tir.expr import Expr, Load, as_expr

#: Memory scopes: a live view of the scope registry. ``global`` is the function's
#: arguments and heap memory; ``local`` is registers or the stack; ``shared`` is on-chip
#: memory shared by a GPU thread block or an FPGA kernel's BRAM; plugins register more
#: with :func:`hetero.core.ir.tir.registry.register_scope`.
SCOPES = registry.SCOPES

#: How :class:`Partition` splits a dimension, as HLS's ARRAY_PARTITION types.
PARTITION_KINDS = ("cyclic", "block", "complete")


@dataclass(frozen=True, eq=True)
class Buffer:
    """A dense row-major array: ``name``, static ``shape``, numpy ``dtype``, ``scope``."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    scope: str = "global"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __getitem__(self, indices: Any) -> Load:
        """``buf[i, j]`` reads the buffer."""
        if not isinstance(indices, tuple):
            indices = (indices,)
        return Load(self, tuple(as_expr(i) for i in indices), self.dtype)

    def __repr__(self) -> str:
        scope = "" if self.scope == "global" else f", {self.scope}"
        return f"Buffer({self.name}: {self.dtype.name}{list(self.shape)}{scope})"


@dataclass(frozen=True, eq=True)
class Partition:
    """Dimension ``dim`` of a buffer split into banks that can be read in the same cycle,
    as HLS's ``ARRAY_PARTITION`` does: ``cyclic`` deals elements round-robin into
    ``factor`` banks (element ``k`` in bank ``k % factor``), ``block`` cuts the dimension
    into ``factor`` runs of consecutive elements, ``complete`` gives every element its
    own register (``factor`` is then 0). The values stay where they were: a partition
    changes where they live, not what the program computes.
    """

    dim: int
    kind: str
    factor: int = 0

    def problem(self, buffer: Buffer) -> str | None:
        """What is wrong with this partition of ``buffer``, or None."""
        if self.kind not in PARTITION_KINDS:
            return f"partition kind {self.kind!r} is not one of {', '.join(PARTITION_KINDS)}"
        if not 0 <= self.dim < len(buffer.shape):
            return f"partition of dimension {self.dim}, but the buffer has rank {len(buffer.shape)}"
        if self.kind == "complete" and self.factor != 0:
            return f"a complete partition takes no factor (got {self.factor})"
        if self.kind != "complete" and not 1 <= self.factor <= buffer.shape[self.dim]:
            return (f"a {self.kind} partition of dimension {self.dim} (extent {buffer.shape[self.dim]}) "
                    f"needs a factor from 1 to the extent, got {self.factor}")
        return None


def _partitions_problem(value: object) -> str | None:
    if not isinstance(value, tuple) or not all(isinstance(p, Partition) for p in value):
        return f"must be a tuple of Partition, got {value!r}"
    dims = [p.dim for p in value]
    if len(set(dims)) != len(dims):
        return f"partitions dimension {sorted(dims)} more than once"
    return None


registry.register_annotation(
    "partition", "buffer", _partitions_problem,
    "how the buffer is split into banks: a tuple of Partition, at most one a dimension "
    "(HLS ARRAY_PARTITION)")


def flat_index(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr:
    """The row-major element offset of ``indices`` in ``buffer``."""
    offset: Expr = as_expr(0)
    for index, extent in zip(indices, buffer.shape):
        offset = offset * extent + index
    return offset
