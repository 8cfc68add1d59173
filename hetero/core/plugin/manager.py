"""Plugin discovery: find the installed backends, one plugin at a time.

Plugins are the entry points of the ``hetero.backends`` group, whatever
distribution declares them (hetero's own bundled backends included). Each is
loaded in isolation: its import, its registration against the hook specs, its
``hetero_backends`` call and the validation of what it returned. A failure at any
of these steps (or a backend name another plugin already provides) marks that
plugin *broken*: it is skipped, recorded with its distribution, version and
error, and announced with a :class:`PluginWarning`, while the others load as
usual (ARCHITECTURE.md, rule 6). When two plugins provide the same backend name,
the one found first on ``sys.path`` wins.

Two environment variables select plugins by entry-point name, comma-separated;
an empty value counts as unset:

- ``HETERO_PLUGINS``: load only these.
- ``HETERO_DISABLE_PLUGINS``: never load these (wins over ``HETERO_PLUGINS``).

A plugin they exclude is not imported at all; it is recorded as *disabled*.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
import importlib
import importlib.metadata as metadata
import os
import threading
import traceback
import warnings

import pluggy

from hetero.core.plugin import hookspecs
from hetero.core.plugin.backend import Backend, validate_backend
from hetero.errors import UnknownBackendError, did_you_mean

#: The entry-point group every hetero plugin is declared in.
ENTRY_POINT_GROUP = "hetero.backends"
#: Allow-list of plugin (entry-point) names.
ALLOW_ENV = "HETERO_PLUGINS"
#: Deny-list of plugin (entry-point) names.
DENY_ENV = "HETERO_DISABLE_PLUGINS"


class PluginWarning(UserWarning):
    """A plugin was skipped (broken), or a plugin selection names no installed plugin."""


@dataclass(frozen=True)
class PluginRecord:
    """What happened to one plugin: the entry point, where it came from, the outcome.

    ``status`` is ``"loaded"`` (its ``backends`` are available), ``"broken"``
    (``error`` says why, ``traceback`` holds the Python traceback when an
    exception caused it) or ``"disabled"`` (``disabled_by`` names the variable).
    """

    name: str
    target: str
    distribution: str
    version: str
    backends: tuple[str, ...] = ()
    error: str | None = None
    traceback: str = ""
    disabled_by: str | None = None

    @property
    def status(self) -> str:
        """``"loaded"``, ``"broken"`` or ``"disabled"``."""
        if self.disabled_by is not None:
            return "disabled"
        return "broken" if self.error is not None else "loaded"

    @property
    def label(self) -> str:
        """``"name (distribution version)"``, how messages refer to the plugin."""
        return f"{self.name} ({self.distribution} {self.version})"


@dataclass(frozen=True)
class PluginSet:
    """The outcome of one discovery: usable backends by name, and every plugin's record."""

    backends: Mapping[str, Backend]
    records: tuple[PluginRecord, ...]
    provided_by: Mapping[str, PluginRecord] = field(default_factory=dict)
    #: Names in HETERO_PLUGINS / HETERO_DISABLE_PLUGINS that match no installed plugin.
    selection_problems: tuple[str, ...] = ()

    @property
    def broken(self) -> list[PluginRecord]:
        """The plugins that failed to load."""
        return [r for r in self.records if r.status == "broken"]

    @property
    def disabled(self) -> list[PluginRecord]:
        """The plugins left out by ``HETERO_PLUGINS`` or ``HETERO_DISABLE_PLUGINS``."""
        return [r for r in self.records if r.status == "disabled"]

    def get(self, name: str) -> Backend:
        """The backend called ``name``; UnknownBackendError saying what there is if none."""
        try:
            return self.backends[name]
        except KeyError:
            raise UnknownBackendError(self._unknown_message(name)) from None

    def _unknown_message(self, name: str) -> str:
        parts = [f"no backend named {name!r}{did_you_mean(name, self.backends)}."]
        if self.backends:
            parts.append(f"Available backends: {', '.join(sorted(self.backends))}.")
        elif not self.records:
            parts.append(
                "No hetero plugin is installed: backends come from packages that declare "
                f"the {ENTRY_POINT_GROUP!r} entry point."
            )
        else:
            parts.append("No backend is available.")
        for record in self.broken:
            parts.append(f"Plugin {record.label} is broken: {record.error}.")
        for record in self.disabled:
            parts.append(f"Plugin {record.label} is disabled by {record.disabled_by}.")
        parts += [f"{problem}." for problem in self.selection_problems]
        if self.broken or self.disabled:
            parts.append("Run `hetero plugins` for details.")
        return " ".join(parts)


def discover_plugins() -> PluginSet:
    """Load every plugin of the ``hetero.backends`` group now, each in isolation.

    Reads ``HETERO_PLUGINS`` and ``HETERO_DISABLE_PLUGINS`` from the environment and
    warns with :class:`PluginWarning` for each broken plugin. Most callers want
    the cached :func:`load_plugins` instead.
    """
    allow = _names(os.environ.get(ALLOW_ENV, ""))
    deny = _names(os.environ.get(DENY_ENV, ""))
    entry_points = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    selection_problems = _unmatched(allow, ALLOW_ENV, entry_points)
    selection_problems += _unmatched(deny, DENY_ENV, entry_points)
    for problem in selection_problems:
        warnings.warn(problem, PluginWarning)

    backends: dict[str, Backend] = {}
    provided_by: dict[str, PluginRecord] = {}
    records: list[PluginRecord] = []
    by_name: dict[str, PluginRecord] = {}
    for ep in entry_points:
        where = _origin(ep)
        if ep.name in deny:
            record = PluginRecord(ep.name, ep.value, *where, disabled_by=DENY_ENV)
        elif allow and ep.name not in allow:
            record = PluginRecord(ep.name, ep.value, *where, disabled_by=ALLOW_ENV)
        elif ep.name in by_name:
            record = PluginRecord(
                ep.name, ep.value, *where,
                error=f"plugin name {ep.name!r} is already declared by {by_name[ep.name].label}; "
                "one of the two distributions must rename its entry point",
            )
        else:
            record, provided = _load_one(ep, where, provided_by)
            for backend in provided:
                backends[backend.name] = backend
                provided_by[backend.name] = record
        by_name.setdefault(ep.name, record)
        records.append(record)
        if record.status == "broken":
            warnings.warn(
                f"hetero plugin {record.label} is broken and was skipped: {record.error}",
                PluginWarning,
            )
    return PluginSet(backends, tuple(records), provided_by, tuple(selection_problems))


# Reentrant: a plugin that looks a backend up while it is being imported must not
# deadlock the process.
_lock = threading.RLock()
_cache: PluginSet | None = None


def load_plugins(reload: bool = False) -> PluginSet:
    """The installed plugins, discovered once per process.

    ``reload=True`` discovers again, re-reading ``sys.path`` and the environment
    variables (modules already imported are not re-imported).
    """
    global _cache
    with _lock:
        if _cache is None or reload:
            if reload:
                importlib.invalidate_caches()
            _cache = discover_plugins()
        return _cache


def get_backend(name: str) -> Backend:
    """The installed backend called ``name``.

    Raises :class:`hetero.errors.UnknownBackendError` with a did-you-mean, the
    available backends, and the broken or disabled plugins that may explain why.
    """
    return load_plugins().get(name)


def _load_one(
    ep: metadata.EntryPoint, where: tuple[str, str], taken: Mapping[str, PluginRecord]
) -> tuple[PluginRecord, list[Backend]]:
    """Import, register, call and validate one plugin; a broken record on any failure."""

    def broken(error: str, exc: BaseException | None = None) -> tuple[PluginRecord, list[Backend]]:
        trace = "".join(traceback.format_exception(exc)) if exc is not None else ""
        return PluginRecord(ep.name, ep.value, *where, error=error, traceback=trace), []

    # SystemExit too: a plugin calling sys.exit() at import must not end the process.
    try:
        plugin = ep.load()
    except (Exception, SystemExit) as exc:
        return broken(f"cannot import {ep.value}: {_describe(exc)}", exc)
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    try:
        manager.register(plugin, name=ep.name)
        manager.check_pending()
    except (Exception, SystemExit) as exc:
        return broken(f"does not match the hook specs: {_describe(exc)}", exc)
    implementations = manager.hook.hetero_backends.get_hookimpls()
    if not implementations:
        return broken(
            f"{ep.value} implements no hetero_backends hook "
            "(define it and mark it with @hetero.core.plugin.hookimpl)"
        )
    try:
        results = manager.hook.hetero_backends()
    except (Exception, SystemExit) as exc:
        return broken(f"hetero_backends() raised {_describe(exc)}", exc)
    # pluggy drops None results; a plugin that forgot its return statement must not
    # pass for one that provides no backend.
    if len(results) < len(implementations):
        return broken("hetero_backends() returned None; return a list of Backend ([] for none)")

    provided: list[Backend] = []
    for result in results:
        if not isinstance(result, (list, tuple)):
            return broken(f"hetero_backends() must return a list of Backend, got {result!r}")
        provided.extend(result)
    problems: list[str] = []
    names: set[str] = set()
    for backend in provided:
        try:
            problems += validate_backend(backend)
        except Exception as exc:  # a declaration may be a property that raises
            return broken(f"reading the declarations of {backend!r} raised {_describe(exc)}", exc)
        if not isinstance(backend, Backend):
            continue
        name = backend.name
        if name in names:
            problems.append(f"backend {name!r} is provided twice by this plugin")
        elif name in taken:
            problems.append(f"backend {name!r} is already provided by plugin {taken[name].label}")
        names.add(name)
    if problems:
        return broken("; ".join(problems))
    record = PluginRecord(ep.name, ep.value, *where, backends=tuple(b.name for b in provided))
    return record, provided


def _origin(ep: metadata.EntryPoint) -> tuple[str, str]:
    """The distribution name and version that declare ``ep``."""
    dist = ep.dist
    if dist is None:
        return "unknown distribution", "?"
    return dist.name or "unknown distribution", dist.version or "?"


def _names(value: str) -> set[str]:
    return {name.strip() for name in value.split(",") if name.strip()}


def _unmatched(names: set[str], variable: str, entry_points: list[metadata.EntryPoint]) -> list[str]:
    installed = sorted({ep.name for ep in entry_points})
    return [
        f"{variable} names plugin {name!r}, which is not installed{did_you_mean(name, installed)}; "
        f"installed plugins: {', '.join(installed) or 'none'}"
        for name in sorted(names - set(installed))
    ]


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
