"""Registries of the tensor IR's open sets: memory scopes, intrinsics, hardware thread
axes and annotation keys.

The core registers the built-in entries when this module is imported; a codegen plugin
adds its own (an FPGA's ``bram`` scope, a GPU's warp shuffle) once, at import time, and
from then on the verifier, the interpreter and the schedule primitives accept them::

    from hetero.core.ir.tir.registry import register_scope
    register_scope("bram", "on-chip block RAM of an FPGA kernel")
    Buffer("T", (64,), "float32", scope="bram")  # now verifies

Registering a name again with the same definition is a no-op (a plugin imported twice);
with a different one it is a :class:`~hetero.errors.PluginError`. An unregistered name is
an error that names it and says how to register it. :data:`SCOPES`, :data:`INTRINSICS`
and :data:`THREAD_AXES` are live, read-only views of the names (``"shared" in SCOPES``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
import math
from typing import Any, Generic, TypeVar, overload

import numpy as np

from hetero.errors import PluginError, VerificationError, did_you_mean

DTypeRule = Callable[[tuple[np.dtype, ...]], np.dtype]


@dataclass(frozen=True)
class Scope:
    """A memory scope: where a buffer lives.

    ``per_thread`` scopes (registers, a thread's stack) are private to one thread, so a
    barrier on them means nothing; the others are shared by the threads of some group
    (a GPU block for ``shared``, every thread for ``global``).
    """

    name: str
    doc: str
    per_thread: bool = False


@dataclass(frozen=True)
class Intrinsic:
    """A function every renderer that claims it provides.

    ``arity`` is its number of arguments. ``result_dtype`` gives its dtype from its
    arguments' dtypes; None means the call states it (``bitcast``). ``reference`` is
    its meaning for the interpreter: it takes the arguments as numpy scalars of their
    dtypes (and, where ``result_dtype`` is None, the result dtype as keyword ``dtype``)
    and returns the result, which the interpreter converts to the call's dtype. A
    call made for its effect (:class:`~hetero.core.ir.tir.stmt.Evaluate`) runs
    ``reference`` and drops its result.
    """

    name: str
    arity: int
    reference: Callable[..., Any]
    result_dtype: DTypeRule | None
    doc: str = ""


@dataclass(frozen=True)
class ThreadAxis:
    """A hardware axis a THREAD_BINDING loop may be bound to. ``level`` is ``"block"``
    (one iteration per thread group, as CUDA's ``blockIdx``) or ``"thread"`` (one per
    thread of a group, as ``threadIdx``); a block axis never nests inside a thread one."""

    name: str
    level: str
    doc: str = ""


@dataclass(frozen=True)
class AnnotationKey:
    """A documented key of ``For.annotations`` (``on="loop"``) or ``Allocate.annotations``
    (``on="buffer"``). ``check(value)`` returns what is wrong with a value, or None."""

    key: str
    on: str
    check: Callable[[Any], str | None]
    doc: str


_T = TypeVar("_T")


class _Table(Generic[_T]):
    """Entries by name; what is registered stays registered."""

    def __init__(self, what: str, register: str) -> None:
        self.what, self.register = what, register
        self.entries: dict[str, _T] = {}

    def add(self, name: str, entry: _T) -> _T:
        old = self.entries.get(name)
        if old is not None and old != entry:
            raise PluginError(f"{self.what} {name!r} is already registered as {old}; a plugin may not "
                              f"redefine it (choose another name)")
        self.entries[name] = entry
        return entry

    def get(self, name: str) -> _T:
        if name not in self.entries:
            raise VerificationError(self.unknown(name))
        return self.entries[name]

    def unknown(self, name: str) -> str:
        """The message for an unregistered ``name``: the known ones and how to add it."""
        return (f"unknown {self.what} {name!r}{did_you_mean(name, self.entries)}; known: "
                f"{', '.join(self.entries)} (a plugin adds one with "
                f"hetero.core.ir.tir.registry.{self.register}({name!r}, ...))")


class Names(Sequence[str]):
    """A live, read-only view of the names registered in one table, in registration order."""

    def __init__(self, table: _Table[Any]) -> None:
        self._table = table

    def __contains__(self, name: object) -> bool:
        return name in self._table.entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._table.entries))

    def __len__(self) -> int:
        return len(self._table.entries)

    @overload
    def __getitem__(self, k: int) -> str: ...

    @overload
    def __getitem__(self, k: slice) -> Sequence[str]: ...

    def __getitem__(self, k: int | slice) -> str | Sequence[str]:
        return tuple(self._table.entries)[k]

    def __repr__(self) -> str:
        return repr(tuple(self._table.entries))


_SCOPES: _Table[Scope] = _Table("memory scope", "register_scope")
_INTRINSICS: _Table[Intrinsic] = _Table("intrinsic", "register_intrinsic")
_THREAD_AXES: _Table[ThreadAxis] = _Table("thread axis", "register_thread_axis")
_ANNOTATIONS: _Table[AnnotationKey] = _Table("annotation key", "register_annotation")

#: The registered memory scopes' names.
SCOPES = Names(_SCOPES)
#: The registered intrinsics' names.
INTRINSICS = Names(_INTRINSICS)
#: The registered thread axes' names.
THREAD_AXES = Names(_THREAD_AXES)


def register_scope(name: str, doc: str, *, per_thread: bool = False) -> Scope:
    """Add the memory scope ``name`` (see :class:`Scope`); return it."""
    return _SCOPES.add(name, Scope(name, doc, per_thread))


def register_intrinsic(name: str, arity: int, reference: Callable[..., Any], *,
                       result_dtype: DTypeRule | None = None, same_as_first: bool = True,
                       doc: str = "") -> Intrinsic:
    """Add the intrinsic ``name`` (see :class:`Intrinsic`); return it.

    Its result dtype is ``result_dtype(arg_dtypes)`` when given, else its first
    argument's (``same_as_first``), else stated by each call (``same_as_first=False``).
    """
    if arity < 0:
        raise PluginError(f"intrinsic {name!r}: arity must be >= 0, got {arity}")
    rule = result_dtype if result_dtype is not None else _first if same_as_first else None
    return _INTRINSICS.add(name, Intrinsic(name, arity, reference, rule, doc))


def register_thread_axis(name: str, level: str, doc: str = "") -> ThreadAxis:
    """Add the hardware axis ``name`` at ``level`` ``"block"`` or ``"thread"``; return it."""
    if level not in ("block", "thread"):
        raise PluginError(f"thread axis {name!r}: level must be 'block' or 'thread', got {level!r}")
    return _THREAD_AXES.add(name, ThreadAxis(name, level, doc))


def register_annotation(key: str, on: str, check: Callable[[Any], str | None], doc: str) -> AnnotationKey:
    """Add the annotation ``key`` for loops (``on="loop"``) or buffers (``on="buffer"``)."""
    if on not in ("loop", "buffer"):
        raise PluginError(f"annotation key {key!r}: on must be 'loop' or 'buffer', got {on!r}")
    return _ANNOTATIONS.add(f"{on}:{key}", AnnotationKey(key, on, check, doc))


def scope(name: str) -> Scope:
    """The registered scope ``name``; VerificationError naming it and how to register it."""
    return _SCOPES.get(name)


def intrinsic(name: str) -> Intrinsic:
    """The registered intrinsic ``name``; VerificationError naming it and how to register it."""
    return _INTRINSICS.get(name)


def thread_axis(name: str) -> ThreadAxis:
    """The registered thread axis ``name``; VerificationError naming it and how to register it."""
    return _THREAD_AXES.get(name)


def annotation_key(key: str, on: str) -> AnnotationKey:
    """The registered annotation ``key`` for ``on`` (``"loop"`` or ``"buffer"``)."""
    entry = _ANNOTATIONS.entries.get(f"{on}:{key}")
    if entry is None:
        known = [a.key for a in _ANNOTATIONS.entries.values() if a.on == on]
        raise VerificationError(
            f"unknown {on} annotation {key!r}{did_you_mean(key, known)}; known: {', '.join(known)} "
            f"(a plugin adds one with hetero.core.ir.tir.registry.register_annotation({key!r}, {on!r}, ...))")
    return entry


def unknown_scope(name: str) -> str:
    """The message for an unregistered scope ``name``, naming how to register it."""
    return _SCOPES.unknown(name)


def unknown_intrinsic(name: str) -> str:
    """The message for an unregistered intrinsic ``name``, naming how to register it."""
    return _INTRINSICS.unknown(name)


def unknown_thread_axis(name: str) -> str:
    """The message for an unregistered thread axis ``name``, naming how to register it."""
    return _THREAD_AXES.unknown(name)


def annotation_keys(on: str) -> list[AnnotationKey]:
    """Every registered annotation key for ``on`` (``"loop"`` or ``"buffer"``)."""
    return [a for a in _ANNOTATIONS.entries.values() if a.on == on]


def _first(dtypes: tuple[np.dtype, ...]) -> np.dtype:
    return dtypes[0]


# -- the built-in entries -----------------------------------------------------------------

register_scope("global", "the function's arguments and heap memory, seen by every thread")
register_scope("shared", "on-chip memory shared by a GPU thread block, or an FPGA kernel's BRAM")
register_scope("local", "registers or the stack of one thread", per_thread=True)

for _axis in "xyz":
    register_thread_axis(f"blockIdx.{_axis}", "block", f"CUDA grid dimension {_axis}")
    register_thread_axis(f"threadIdx.{_axis}", "thread", f"CUDA block dimension {_axis}")


def _erf(x: Any) -> Any:
    return type(x)(math.erf(float(x)))


def _bitcast(x: Any, *, dtype: np.dtype) -> Any:
    return np.asarray(x).view(dtype)[()]


def _fence(x: Any) -> Any:
    return x


def _dot4_u8s8(acc: Any, a: Any, b: Any) -> Any:
    ua, ub = int(a) & 0xFFFFFFFF, int(b) & 0xFFFFFFFF
    total = int(acc) + sum(((ua >> 8 * k) & 0xFF) * ((((ub >> 8 * k) & 0xFF) ^ 0x80) - 0x80) for k in range(4))
    return np.int32((total + 2**31) % 2**32 - 2**31)


_FLOAT_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "erf": _erf, "abs": np.abs,
    "floor": np.floor, "ceil": np.ceil, "round_even": np.rint, "expm1": np.expm1,
    "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
    "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}
for _name, _fn in _FLOAT_FUNCTIONS.items():
    register_intrinsic(_name, 1, _fn, doc=f"numpy's {getattr(_fn, '__name__', _name)}, elementwise")
register_intrinsic("bitcast", 1, _bitcast, same_as_first=False,
                   doc="its operand's bits read as another dtype of the same width (built by expr.bitcast)")
register_intrinsic("dot4_u8s8", 3, _dot4_u8s8,
                   doc="dot4_u8s8(acc, a, b) of int32s: acc plus the sum over the four bytes k of "
                       "a's byte k read unsigned times b's byte k read signed (byte 0 the least "
                       "significant), wrapped to int32: x86's vpdpbusd in one lane, Arm's usdot")
register_intrinsic("fence", 1, _fence,
                   doc="its float operand unchanged, rounded as computed: a renderer that fuses a "
                       "multiply and an add must not fuse across it")


def _positive_int(value: Any) -> str | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return None if ok else f"must be a positive integer, got {value!r}"


register_annotation("ii", "loop", _positive_int,
                    "initiation interval of a PIPELINED loop: cycles between the starts of two "
                    "iterations (HLS PIPELINE II)")
register_annotation("unroll_factor", "loop", _positive_int,
                    "unroll the loop by this factor (partially; HLS UNROLL factor, LLVM's "
                    "unroll count); an UNROLLED loop unrolls whole")
