"""The pieces every per-op case generator shares: tolerances, draws, operands, arrays.

A generator is written once against :class:`Draw` and serves two masters: a
hypothesis strategy (each choice a hypothesis draw, so failures shrink) and a fixed
example (each choice from a numpy generator with a fixed seed). Array contents
always come from ``Draw.rng``, seeded from one hypothesis draw, so that a case of a
few hundred elements costs one draw, not hundreds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from hetero.core.ir.types import is_float

T = TypeVar("T")

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "uint8", "int32", "int64")
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)
#: The storage types Cast and the quantisers convert (ml_dtypes' names).
FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
NARROW_FLOATS = FLOAT8 + ("float8_e8m0fnu", "float4_e2m1fn")
NARROW_INTS = ("int4", "uint4", "int2", "uint2")
NARROW = ("bfloat16",) + NARROW_FLOATS + NARROW_INTS


@dataclass(frozen=True)
class Tolerance:
    """How far a backend's output may be from the reference: ``|got - want| <= atol + rtol·|want|``.

    Integer and bool outputs use ``Tolerance(0, 0)``: they must be equal.
    """

    rtol: float
    atol: float

    def check(self, got: np.ndarray, want: np.ndarray) -> str | None:
        """None if ``got`` is within tolerance of ``want``; otherwise what is wrong and where."""
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            return f"shape {list(got.shape)} differs from the expected {list(want.shape)}"
        if want.size == 0:
            return None
        if want.dtype.kind in "biu" or (self.rtol == 0 and self.atol == 0):
            wrong = (got != want) & ~(_nan(got) & _nan(want))
            if not np.any(wrong):
                return None
            index = np.unravel_index(int(np.argmax(wrong)), want.shape)
            return (f"{int(wrong.sum())} of {want.size} elements differ (exact match required); "
                    f"first at index {tuple(int(i) for i in index)}: got {got[index]!r}, "
                    f"want {want[index]!r}")
        g, w = got.astype(np.float64), want.astype(np.float64)
        # Equal infinities and NaN against NaN agree; any other non-finite pair is infinitely wrong.
        same = (g == w) | (np.isnan(g) & np.isnan(w))
        with np.errstate(invalid="ignore"):  # inf - inf: `same` has judged those already
            gap = np.where(same, 0.0, np.abs(g - w))
        gap = np.where(np.isnan(gap), np.inf, gap)
        bound = self.atol + self.rtol * np.where(np.isfinite(w), np.abs(w), 0.0)
        if np.all(gap <= bound):
            return None
        index = np.unravel_index(int(np.argmax(gap - bound)), want.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(gap > 0, gap / np.abs(w), 0.0)
        return (f"{int((gap > bound).sum())} of {want.size} elements out of tolerance "
                f"(rtol={self.rtol:.3g}, atol={self.atol:.3g}); max abs error {gap.max():.6g}, "
                f"max rel error {np.nanmax(rel):.6g}; worst at index "
                f"{tuple(int(i) for i in index)}: got {g[index]!r}, want {w[index]!r}")


def _nan(a: np.ndarray) -> np.ndarray:
    # bfloat16 and the float8/float4 types (numpy kind "V", float8_e5m2 "f") via float32.
    if a.dtype.kind == "f" or a.dtype.name in NARROW_FLOATS + ("bfloat16",):
        with np.errstate(over="ignore"):  # a float64 past float32's range is no NaN, only large
            return np.isnan(a.astype(np.float32))
    return np.zeros(a.shape, bool)


EXACT = Tolerance(0.0, 0.0)


def eps(dtype: Any) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def rounded(dtype: Any, ulps: float, scale: float = 0.0) -> Tolerance:
    """A few roundings of an elementwise computation: ``ulps`` eps relative, plus
    ``ulps`` eps of ``scale`` absolute, ``scale`` bounding the intermediate values that
    can cancel (|x| for Gelu or HardSigmoid); a zero ``scale`` leaves the dtype's
    smallest normal number as the only absolute slack."""
    e = eps(dtype)
    return Tolerance(ulps * e, max(ulps * e * scale, float(np.finfo(np.dtype(dtype)).tiny)))


def summed(dtype: Any, terms: int, magnitude: float, ulps: float = 2.0) -> Tolerance:
    """A sum of ``terms`` rounded terms whose absolute values add up to at most
    ``magnitude``: whatever the order of summation, the computed sum is within
    ``terms · eps · magnitude`` of the exact one (Higham, 2.2); ``ulps`` eps relative
    covers the final rounding and any scaling after the sum."""
    e = eps(dtype)
    return Tolerance(ulps * e, terms * e * magnitude + float(np.finfo(np.dtype(dtype)).tiny))


def peak(*arrays: np.ndarray | None) -> float:
    """The largest absolute value in ``arrays`` (absent ones skipped), as a Python float."""
    return max((float(np.max(np.abs(a.astype(np.float64)))) for a in arrays
                if a is not None and a.size), default=0.0)


class Draw(Protocol):
    """The choices a generator makes: structure through ``pick``/``integer``, data through
    ``rng``, and whether to use the op's edge values (NaN, an index out of range) through
    ``edge``."""

    rng: np.random.Generator

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options``."""

    def integer(self, lo: int, hi: int) -> int:
        """An integer in ``[lo, hi]``, both included."""

    def edge(self) -> bool:
        """Whether this case takes the op's edge values: NaN in float inputs where NaN
        semantics matter (the max/min family, pools, reductions, comparisons), an index
        out of range for Gather (a case whose reference raises)."""


class SeededDraw:
    """Choices from a numpy generator with a fixed seed: the same case every time."""

    def __init__(self, seed: int, edges: bool = False) -> None:
        self.rng = np.random.default_rng(seed)
        self.edges = edges
        self.took_edge = False  # whether the generator asked for an edge and took it

    def pick(self, options: Sequence[T]) -> T:
        return options[int(self.rng.integers(len(options)))]

    def integer(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))

    def edge(self) -> bool:
        self.took_edge |= self.edges
        return self.edges


class HypothesisDraw:
    """Choices drawn by hypothesis (so they shrink); array data from one drawn seed."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        from hypothesis import strategies as st

        self._draw, self._st = draw, st
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def pick(self, options: Sequence[T]) -> T:
        return self._draw(self._st.sampled_from(list(options)))

    def integer(self, lo: int, hi: int) -> int:
        return int(self._draw(self._st.integers(lo, hi)))

    def edge(self) -> bool:
        return bool(self._draw(self._st.sampled_from((False, False, True))))


@dataclass(frozen=True)
class Operand:
    """One input of the case's node: a graph input, or a graph constant when ``constant``."""

    name: str
    array: np.ndarray
    constant: bool = False


@dataclass(frozen=True)
class Spec:
    """What a generator returns: the node's operands (None: an absent optional input),
    its attributes, and the tolerance its outputs are judged with."""

    operands: tuple[Operand | None, ...]
    attrs: dict[str, Any]
    tolerance: Tolerance
    #: The hetero error the reference raises on these operands (an index out of range):
    #: a backend must raise it too, at compile or run time, rather than return values.
    error: type[Exception] | None = None


#: A generator: (op, draw, dtype name) -> Spec.
Generator = Callable[[str, Draw, np.dtype], Spec]

GENERATORS: dict[str, tuple[tuple[str, ...], Generator]] = {}


def generates(ops: Sequence[str], dtypes: tuple[str, ...]) -> Callable[[Generator], Generator]:
    """Register the decorated function as the case generator of ``ops`` over ``dtypes``."""
    def register(fn: Generator) -> Generator:
        for op in ops:
            GENERATORS[op] = (dtypes, fn)
        return fn

    return register


def shape(d: Draw, rank_lo: int, rank_hi: int, dim_hi: int = 4, dim_lo: int = 1) -> tuple[int, ...]:
    return tuple(d.integer(dim_lo, dim_hi) for _ in range(d.integer(rank_lo, rank_hi)))


def uniform(d: Draw, shape: Sequence[int], dtype: Any, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return np.asarray(d.rng.uniform(lo, hi, tuple(shape))).astype(dtype)


def away_from_zero(d: Draw, shape: Sequence[int], dtype: Any, lo: float, hi: float) -> np.ndarray:
    """Magnitudes in ``[lo, hi]`` with random signs (signed dtypes only)."""
    magnitude = d.rng.uniform(lo, hi, tuple(shape))
    return np.asarray(magnitude * d.rng.choice((-1.0, 1.0), tuple(shape))).astype(dtype)


def integers(d: Draw, shape: Sequence[int], dtype: Any, lo: int, hi: int) -> np.ndarray:
    return np.asarray(d.rng.integers(lo, hi + 1, tuple(shape))).astype(dtype)


def values(d: Draw, shape: Sequence[int], dtype: np.dtype, small: bool = False) -> np.ndarray:
    """Any values of ``dtype`` the op is defined on: floats in [-4, 4], integers within
    ±100 (±10 when ``small``, products of two stay in int8), bools either way."""
    if dtype.kind == "b":
        return np.asarray(d.rng.integers(0, 2, tuple(shape))).astype(bool)
    if dtype.kind == "f":
        return uniform(d, shape, dtype, -4.0, 4.0)
    top = 10 if small else 100
    return integers(d, shape, dtype, 0 if dtype.kind == "u" else -top, top)


def with_nan(d: Draw, x: np.ndarray) -> np.ndarray:
    """``x`` with about a fifth of its elements (at least one) NaN when the case takes
    edge values (:meth:`Draw.edge`) and ``x`` is a float array; else ``x`` itself."""
    if x.dtype.kind != "f" or x.size == 0 or not d.edge():
        return x
    x = np.array(x)  # a copy, and an array even for a numpy scalar, so the view below writes
    flat = x.reshape(-1)
    flat[d.rng.random(flat.size) < 0.2] = np.nan
    flat[int(d.rng.integers(flat.size))] = np.nan
    return x


def exact_or(dtype: np.dtype, tolerance: Callable[[], Tolerance]) -> Tolerance:
    """:data:`EXACT` for integer and bool dtypes, else ``tolerance()`` (bfloat16, whose
    numpy kind is not ``"f"``, among the floats)."""
    return tolerance() if is_float(dtype) else EXACT
