"""Buffers: named, typed, shaped memory in a memory scope."""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any

import numpy as np

from hetero.core.ir.tir.expr import Expr, Load, as_expr

#: Memory scopes every renderer understands. ``global`` is the function's arguments and
#: heap memory; ``local`` is registers or the stack; ``shared`` is on-chip memory
#: shared by a GPU thread block or an FPGA kernel's BRAM; plugins may declare more.
SCOPES = ("global", "shared", "local")


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


def flat_index(buffer: Buffer, indices: tuple[Expr, ...]) -> Expr:
    """The row-major element offset of ``indices`` in ``buffer``."""
    offset: Expr = as_expr(0)
    for index, extent in zip(indices, buffer.shape):
        offset = offset * extent + index
    return offset
