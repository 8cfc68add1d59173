"""Targets: a backend bound, once, to the options it compiles with.

A backend declares the compile options it reads (:class:`Option`); the user gives
options as keywords (``hetero.compile(..., npu_sram_kib=64)``). :func:`route_options`
hands each option to the selected backends that declare it, and refuses one that none
declares (with a did-you-mean over every installed backend's options). :func:`bind`
then checks the values and asks the backend to describe its device under them
(:meth:`Backend.declare <hetero.core.plugin.backend.Backend.declare>`): the memory
hierarchy, the peak throughput and the composite patterns. The :class:`Target` it
returns is what the partitioner asks (``supports``, ``patterns``, ``memory``,
``estimate``) and what compiles (``compile``), so the partition is planned for the
machine the backend builds for (ARCHITECTURE.md, rule 5).

Example::

    >>> target = bind(get_backend("my_npu"), {"my_npu_sram_kib": 64})   # doctest: +SKIP
    >>> target.memory.levels[1].capacity_bytes                         # doctest: +SKIP
    65536
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
import math
import numbers
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from hetero.core.memory.hierarchy import MemoryHierarchy
from hetero.errors import HeteroError, OptionError, PluginError, did_you_mean

if TYPE_CHECKING:
    from hetero.core.ir.graph import Graph, Node
    from hetero.core.plugin.backend import Backend, CompiledPart, Pattern, Support


@dataclass(frozen=True)
class Option:
    """A compile option a backend reads: its name, what it does, its default, what it takes.

    ``types`` lists the Python types a value may have (empty: any); ``bool`` is never
    taken for ``int`` or ``float``. ``choices``, when given, are the only values allowed.
    A default of ``None`` means "not set": the backend picks (an NPU's preset decides
    its SRAM unless an SRAM-size option is given). Names are unique among a backend's
    options and, by convention, prefixed with the backend's short name (``my_npu_``) unless
    they mean the same for every backend (``num_threads``).
    """

    name: str
    help: str
    default: Any = None
    types: tuple[type, ...] = ()
    choices: tuple[Any, ...] = ()

    def check(self, value: Any, backend: str) -> Any:
        """``value`` if this option takes it; an :class:`OptionError` naming both if not."""
        if value is None:
            return None
        if self.types:
            plain = tuple(t for t in self.types if t is not bool)
            ok = isinstance(value, bool) if bool in self.types else False
            ok = ok or (not isinstance(value, bool) and isinstance(value, plain))
            if float in self.types and isinstance(value, numbers.Real) and not isinstance(value, bool):
                ok = ok or math.isfinite(float(value))
            if not ok:
                names = " or ".join(t.__name__ for t in self.types)
                raise OptionError(f"option {self.name} of backend {backend} takes {names}, got {value!r} "
                                  f"({self.help})")
        if self.choices and value not in self.choices:
            raise OptionError(f"option {self.name} of backend {backend} takes one of {list(self.choices)}, "
                              f"got {value!r}{did_you_mean(str(value), [str(c) for c in self.choices])}")
        return value


@dataclass(frozen=True)
class Declarations:
    """What a backend declares about its device under one set of options.

    ``settings`` is the backend's own reading of the options (an NPU's configuration object),
    kept on the target so that ``supports``, ``estimate`` and ``compile`` use the same one.
    ``computes_int8`` says that the backend runs the QDQ units it takes as hetero's integer
    ops even when it is the fallback (a CPU backend asked for integer kernels); other
    backends that declare the integer ops get them whatever this says.
    """

    memory: MemoryHierarchy
    peak_gflops: float
    patterns: tuple[Pattern, ...] = ()
    settings: Any = None
    computes_int8: bool = False


@dataclass(frozen=True, eq=False)
class Target:
    """One selected backend bound to its options: every declaration and compile reads it.

    ``options`` holds every option the backend declares, the user's value or the
    default; ``given`` the names the user set. ``dump_dir``, when set, asks ``compile``
    to write its stages there.
    """

    backend: Backend
    options: Mapping[str, Any]
    given: frozenset[str]
    declarations: Declarations
    dump_dir: Path | None = field(default=None)

    @property
    def name(self) -> str:
        """The backend's name."""
        return self.backend.name

    @property
    def version(self) -> str:
        """The backend's version."""
        return self.backend.version

    @property
    def device_kind(self) -> str:
        """The backend's device kind (``cpu``, ``npu``...)."""
        return self.backend.device_kind

    @property
    def memory(self) -> MemoryHierarchy:
        """The memory hierarchy under these options."""
        return self.declarations.memory

    @property
    def peak_gflops(self) -> float:
        """The peak compute throughput under these options."""
        return self.declarations.peak_gflops

    @property
    def patterns(self) -> tuple[Pattern, ...]:
        """The composites the backend wants whole under these options."""
        return self.declarations.patterns

    @property
    def settings(self) -> Any:
        """The backend's own reading of the options (see :class:`Declarations`)."""
        return self.declarations.settings

    @property
    def takes_every_op(self) -> bool:
        """Whether the backend declares that it takes every canonical op (a fallback can)."""
        return bool(self.backend.takes_every_op)

    def supports(self, node: Node) -> Support:
        """Whether the backend takes ``node`` under these options."""
        return self.backend.supports(node, self)

    def estimate(self, subgraph: Graph) -> float:
        """Seconds ``subgraph`` would take on the device these options describe."""
        return self.backend.estimate(subgraph, self)

    def compile(self, subgraph: Graph) -> CompiledPart:
        """The backend's compile of ``subgraph`` for this target."""
        return self.backend.compile(subgraph, self)

    def dumping_to(self, folder: Path | None) -> Target:
        """This target, writing its compile stages into ``folder`` (None: not at all)."""
        return replace(self, dump_dir=folder)

    def __repr__(self) -> str:
        set_ = ", ".join(f"{k}={self.options[k]!r}" for k in sorted(self.given))
        return f"<Target {self.name}{' ' + set_ if set_ else ''}>"


def bind(backend: Backend, options: Mapping[str, Any] | None = None, *, dump_dir: Path | None = None) -> Target:
    """``backend`` bound to ``options`` (only its own: see :func:`route_options`).

    Raises :class:`OptionError` for an option the backend does not declare (with the
    nearest one it does) or a value it refuses, and :class:`PluginError` when the
    backend's :meth:`declare` fails in a way that is its own bug.
    """
    options = dict(options or {})
    declared = {o.name: o for o in backend.options}
    for name in options:
        if name not in declared:
            raise OptionError(f"backend {backend.name} has no option {name!r}{did_you_mean(name, declared)}; "
                              f"its options are {sorted(declared) or 'none'}")
    values = {o.name: o.default for o in backend.options}
    values.update({name: declared[name].check(value, backend.name) for name, value in options.items()})
    frozen = MappingProxyType(values)
    try:
        declarations = backend.declare(frozen)
    except OptionError:
        raise
    except HeteroError as exc:  # the backend refusing a value: the user's to fix
        raise OptionError(f"backend {backend.name} refuses its options: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a plugin's bug, reported against it
        raise PluginError(f"backend {backend.name}: declare() raised {type(exc).__name__}: {exc}; "
                          "this is a bug in the backend") from exc
    if not isinstance(declarations, Declarations):
        raise PluginError(f"backend {backend.name}: declare() returned {declarations!r}, not Declarations")
    if not isinstance(declarations.memory, MemoryHierarchy):
        raise PluginError(f"backend {backend.name}: declare() gave memory {declarations.memory!r}, "
                          "not a MemoryHierarchy")
    return Target(backend, frozen, frozenset(options), declarations, dump_dir)


def route_options(options: Mapping[str, Any], selected: Sequence[Backend],
                  installed: Mapping[str, Backend]) -> dict[str, dict[str, Any]]:
    """Each selected backend's share of ``options``, by backend name.

    An option goes to every selected backend that declares it. One that none declares
    is an :class:`OptionError`: naming the installed backend that does declare it when
    one does (add it to the targets), or the nearest option name there is.
    """
    routed: dict[str, dict[str, Any]] = {b.name: {} for b in selected}
    for name, value in options.items():
        takers = [b for b in selected if any(o.name == name for o in b.options)]
        for backend in takers:
            routed[backend.name][name] = value
        if takers:
            continue
        owners = sorted(b.name for b in installed.values() if any(o.name == name for o in b.options))
        chosen = ", ".join(b.name for b in selected) or "none"
        if owners:
            raise OptionError(f"option {name!r} is {' and '.join(owners)}'s, and no selected backend "
                              f"({chosen}) reads it; add {owners[0]} to the targets or drop the option")
        known = sorted({o.name for b in installed.values() for o in b.options})
        raise OptionError(f"unknown compile option {name!r}{did_you_mean(name, known)}: no installed backend "
                          f"declares it (the targets {chosen} take: "
                          f"{', '.join(sorted({o.name for b in selected for o in b.options})) or 'none'})")
    return routed


def parse_option_value(text: str) -> object:
    """An option's value written as text (``hetero --option NAME=VALUE``, the conformance
    suite's ``--hetero-option``): ``true``/``false`` booleans, integers and decimals
    numbers, anything else the string."""
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def plain_value(value: Any) -> Any:
    """An option's value (or default, or choice) as JSON data, for reports and listings:
    as it is when it is plain, a list for a sequence of plain values, else its repr."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in value):
        return list(value)
    return repr(value)


def as_target(backend: Backend | Target) -> Target:
    """``backend`` as a target: a Target as it is, a Backend bound to its default options
    (for callers that plan with a backend's own declarations, such as tests and tools)."""
    return backend if isinstance(backend, Target) else bind(backend)
