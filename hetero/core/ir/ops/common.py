"""Helpers shared by the op families: type checks, broadcasting, axis handling."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hetero.core.ir.types import FLOAT_DTYPES, TensorType
from hetero.errors import ShapeError


def same_dtype(types: Sequence[TensorType | None], what: str = "inputs") -> np.dtype:
    """The common dtype of ``types`` (ignoring absent ones); ShapeError if they differ."""
    dtypes = {t.dtype for t in types if t is not None}
    if len(dtypes) != 1:
        raise ShapeError(f"{what} must share one dtype, got {sorted(d.name for d in dtypes)}")
    return dtypes.pop()


def require_dtype(t: TensorType, allowed: Sequence[np.dtype], what: str) -> None:
    """ShapeError unless ``t``'s dtype is one of ``allowed``."""
    if t.dtype not in allowed:
        raise ShapeError(f"{what} must be one of {[d.name for d in allowed]}, got {t.dtype.name}")


def require_float(t: TensorType, what: str = "input") -> None:
    require_dtype(t, FLOAT_DTYPES, what)


def require_rank(t: TensorType, rank: int | Sequence[int], what: str) -> None:
    ranks = (rank,) if isinstance(rank, int) else tuple(rank)
    if t.rank not in ranks:
        raise ShapeError(f"{what} must have rank {' or '.join(map(str, ranks))}, got {t}")


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """Numpy (multidirectional) broadcasting of ``shapes``; ShapeError if impossible."""
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ShapeError(
            f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast"
        ) from None


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[-rank, rank)`` as a non-negative index; ShapeError otherwise."""
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def normalize_axes(axes: Sequence[int], rank: int, what: str = "axes", as_set: bool = False) -> tuple[int, ...]:
    """``axes`` made non-negative and sorted; ShapeError if one is out of range or, unless
    ``as_set`` (the axes a reduction reduces, where naming one twice names it once),
    repeated."""
    result = sorted({normalize_axis(a, rank, f"{what} entry") for a in axes} if as_set else
                    (normalize_axis(a, rank, f"{what} entry") for a in axes))
    if len(set(result)) != len(result):
        raise ShapeError(f"{what} {list(axes)} name an axis twice (rank {rank})")
    return tuple(result)


def check_canonical_axes(axes: Sequence[int], rank: int, what: str = "axes") -> None:
    """Canonical axes are sorted, unique and non-negative; ShapeError otherwise."""
    if list(axes) != sorted(set(axes)) or any(not 0 <= a < rank for a in axes):
        raise ShapeError(f"{what} {list(axes)} must be sorted, unique and in [0, {rank})")


def require_spatial(x: TensorType, op: str) -> int:
    """The number of spatial axes of an (N, C, D1, ..., Dk) input, k >= 1."""
    if x.rank < 3:
        raise ShapeError(
            f"{op} input X must be (N, C, D1, ...) with at least one spatial axis, got {x}"
        )
    return x.rank - 2
