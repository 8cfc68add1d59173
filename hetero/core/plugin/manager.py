"""Plugin discovery: find the installed backends, one plugin at a time.

Plugins are the entry points of the ``hetero.backends`` group, whatever
distribution declares them (hetero's own bundled backends included). Each is
loaded in isolation: its import, its registration against the hook specs, its
``hetero_backends`` call and the validation of what it returned. A failure at any
of these steps (or a name another plugin already holds) marks that plugin
*broken*: it is skipped, recorded with its distribution, version and error, and
announced with a :class:`PluginWarning`, while the others load as usual
(ARCHITECTURE.md, rule 6). A backend whose hooks are in plugin API 1's forms loads
*adapted* (:mod:`hetero.core.plugin.compat`): the core gets an adapter that it
calls in the current forms, the record keeps a message per adapted backend naming
every change, and a :class:`DeprecationWarning` says it.

Names are settled in one deterministic order (:func:`ordered_entry_points`):

- The *bundled* plugins, those declared by the distribution that ships this core
  (:data:`CORE_DISTRIBUTION`), load first and keep their names. A third-party
  plugin that declares a bundled plugin's entry-point name, or provides a backend
  under a bundled plugin's name or a name a bundled plugin provides, is broken
  with the clash as its reason, even while the bundled plugin is disabled or
  broken itself: installing a package never silently replaces a bundled backend.
- Among the others, the plugin found in the earlier ``sys.path`` folder comes
  first, then the one whose distribution name sorts first; the later of two
  plugins providing the same backend name is broken, naming the earlier one.

An import that hangs cannot be bounded in-process (Python cannot interrupt an
import safely); :mod:`hetero.core.plugin.isolated` imports each plugin in a child
process with a timeout instead, for ``hetero plugins --isolated``.

Two environment variables select plugins by entry-point name, comma-separated;
an empty value counts as unset:

- ``HETERO_PLUGINS``: load only these.
- ``HETERO_DISABLE_PLUGINS``: never load these (wins over ``HETERO_PLUGINS``).

A plugin they exclude is not imported at all; it is recorded as *disabled*.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
import functools
import importlib
import importlib.metadata as metadata
import os
import re
import threading
import traceback
from typing import Generic, TypeVar
import warnings

import pluggy

from hetero.core import timing
from hetero.core.plugin import hookspecs
from hetero.core.plugin.backend import Backend, validate_backend
from hetero.core.plugin.compat import adapted, deprecation_message, review_hooks
from hetero.errors import UnknownBackendError, did_you_mean

#: The entry-point group every hetero plugin is declared in.
ENTRY_POINT_GROUP = "hetero.backends"
#: Allow-list of plugin (entry-point) names.
ALLOW_ENV = "HETERO_PLUGINS"
#: Deny-list of plugin (entry-point) names.
DENY_ENV = "HETERO_DISABLE_PLUGINS"
#: The distribution that ships this core. The plugins it declares are the bundled
#: ones; this names no plugin, so the core still finds them only through the
#: entry-point group (ARCHITECTURE.md, rule 1).
CORE_DISTRIBUTION = "hetero"

T = TypeVar("T")


class PluginWarning(UserWarning):
    """A plugin was skipped (broken), or a plugin selection names no installed plugin."""


@dataclass(frozen=True)
class PluginRecord:
    """What happened to one plugin: the entry point, where it came from, the outcome.

    ``status`` is ``"loaded"`` (its ``backends`` are available), ``"broken"``
    (``error`` says why, ``traceback`` holds the Python traceback when an
    exception caused it) or ``"disabled"`` (``disabled_by`` names the variable).
    ``bundled`` is true for the plugins hetero's own distribution declares.
    ``adapted`` holds ``(backend, message)`` for each backend of a loaded plugin that
    runs adapted from plugin API 1, the message naming every change and what to
    write instead.
    """

    name: str
    target: str
    distribution: str
    version: str
    backends: tuple[str, ...] = ()
    error: str | None = None
    traceback: str = ""
    disabled_by: str | None = None
    bundled: bool = False
    adapted: tuple[tuple[str, str], ...] = ()

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


class PluginRecords:
    """What a discovery's outcome says of its plugins by status (it holds ``records``)."""

    records: tuple[PluginRecord, ...]

    @property
    def broken(self) -> list[PluginRecord]:
        """The plugins that failed to load."""
        return [r for r in self.records if r.status == "broken"]

    @property
    def disabled(self) -> list[PluginRecord]:
        """The plugins left out by ``HETERO_PLUGINS`` or ``HETERO_DISABLE_PLUGINS``."""
        return [r for r in self.records if r.status == "disabled"]

    @property
    def adapted(self) -> list[PluginRecord]:
        """The loaded plugins with a backend that runs adapted from plugin API 1."""
        return [r for r in self.records if r.status == "loaded" and r.adapted]


@dataclass(frozen=True)
class PluginSet(PluginRecords):
    """The outcome of one discovery: usable backends by name, and every plugin's record."""

    backends: Mapping[str, Backend]
    records: tuple[PluginRecord, ...]
    provided_by: Mapping[str, PluginRecord] = field(default_factory=dict)
    #: Names in HETERO_PLUGINS / HETERO_DISABLE_PLUGINS that match no installed plugin.
    selection_problems: tuple[str, ...] = ()

    def get(self, name: str) -> Backend:
        """The backend called ``name``; UnknownBackendError saying what there is if none."""
        try:
            return self.backends[name]
        except KeyError:
            raise UnknownBackendError(
                unknown_backend_message(name, self.backends, self.records, self.selection_problems)
            ) from None


def unknown_backend_message(
    name: str, available: Sequence[str] | Mapping[str, object],
    records: Sequence[PluginRecord], selection_problems: Sequence[str] = (),
) -> str:
    """Why there is no backend ``name``: a did-you-mean, what there is, and the broken or
    disabled plugins and selection problems that may explain it. When a broken plugin
    is the one ``name`` would come from (its entry point has that name, or validation
    found a problem with a backend of that name), the message names only it."""
    broken = [r for r in records if r.status == "broken"]
    for r in broken:
        if r.name == name or f"backend {name!r}: " in (r.error or ""):
            return (f"backend {name!r} is broken: plugin {r.label} did not load: {r.error}. "
                    "Run `hetero plugins` for details.")
    parts = [f"no backend named {name!r}{did_you_mean(name, list(available))}."]
    if available:
        parts.append(f"Available backends: {', '.join(sorted(available))}.")
    elif not records:
        parts.append(
            "No hetero plugin is installed: backends come from packages that declare "
            f"the {ENTRY_POINT_GROUP!r} entry point."
        )
    else:
        parts.append("No backend is available.")
    disabled = [r for r in records if r.status == "disabled"]
    parts += [f"Plugin {r.label} is broken: {r.error}." for r in broken]
    parts += [f"Plugin {r.label} is disabled by {r.disabled_by}." for r in disabled]
    parts += [f"{problem}." for problem in selection_problems]
    if broken or disabled:
        parts.append("Run `hetero plugins` for details.")
    return " ".join(parts)


#: Loads one plugin given its entry point and its record so far: the record of the
#: outcome, and what the plugin provides by backend name (empty unless loaded).
Loader = Callable[[metadata.EntryPoint, PluginRecord], tuple[PluginRecord, Mapping[str, T]]]


@dataclass(frozen=True)
class Discovery(Generic[T]):
    """One discovery's outcome, whatever a loader returns for each backend.

    ``provided`` holds what the loader returned for each backend name that
    survived the name rules; ``provided_by`` the record of the plugin behind it.
    """

    provided: Mapping[str, T]
    provided_by: Mapping[str, PluginRecord]
    records: tuple[PluginRecord, ...]
    selection_problems: tuple[str, ...]


def discover_plugins() -> PluginSet:
    """Load every plugin of the ``hetero.backends`` group now, each in isolation.

    Reads ``HETERO_PLUGINS`` and ``HETERO_DISABLE_PLUGINS`` from the environment and
    warns with :class:`PluginWarning` for each broken plugin. Most callers want
    the cached :func:`load_plugins` instead.
    """
    found = discover(load_in_process)
    return PluginSet(found.provided, found.records, found.provided_by, found.selection_problems)


def discover(load: Loader[T]) -> Discovery[T]:
    """Select, load (with ``load``) and settle the names of every plugin, in order.

    The selection variables, the order (:func:`ordered_entry_points`) and the name
    rules are the same whichever loader runs; :func:`discover_plugins` loads in
    this process, :mod:`hetero.core.plugin.isolated` in a child process each.
    """
    allow = _names(os.environ.get(ALLOW_ENV, ""))
    deny = _names(os.environ.get(DENY_ENV, ""))
    entry_points = ordered_entry_points(metadata.entry_points(group=ENTRY_POINT_GROUP))
    selection_problems = _unmatched(allow, ALLOW_ENV, entry_points)
    selection_problems += _unmatched(deny, DENY_ENV, entry_points)
    for problem in selection_problems:
        warnings.warn(problem, PluginWarning)

    provided: dict[str, T] = {}
    provided_by: dict[str, PluginRecord] = {}
    records: list[PluginRecord] = []
    by_name: dict[str, PluginRecord] = {}
    # A bundled plugin's entry-point name is its backend's name by convention; it is
    # reserved even when that plugin is disabled or broken, so no installed package
    # can take it over.
    reserved = {ep.name: _record(ep) for ep in entry_points if is_bundled(ep)}
    for ep in entry_points:
        record = _record(ep)
        if ep.name in deny:
            record = replace(record, disabled_by=DENY_ENV)
        elif allow and ep.name not in allow:
            record = replace(record, disabled_by=ALLOW_ENV)
        elif ep.name in by_name:
            record = replace(record, error=_plugin_name_clash(ep.name, by_name[ep.name]))
        else:
            record, offered = load(ep, record)
            clashes = _backend_name_clashes(record, offered, provided_by, reserved)
            if clashes:
                record = replace(record, backends=(), adapted=(), error="; ".join(clashes))
            else:
                for name, value in offered.items():
                    provided[name] = value
                    provided_by[name] = record
        by_name.setdefault(ep.name, record)
        records.append(record)
        if record.status == "broken":
            warnings.warn(
                f"hetero plugin {record.label} is broken and was skipped: {record.error}",
                PluginWarning,
            )
        elif record.status == "loaded":
            for _, message in record.adapted:
                warnings.warn(f"hetero plugin {record.label}: {message}", DeprecationWarning)
    return Discovery(provided, provided_by, tuple(records), tuple(selection_problems))


def is_bundled(ep: metadata.EntryPoint) -> bool:
    """Whether ``ep`` is declared by the distribution that ships this core."""
    return ep.dist is not None and _canonical(_described(ep.dist)[0]) == _canonical(CORE_DISTRIBUTION)


def ordered_entry_points(entry_points: Sequence[metadata.EntryPoint]) -> list[metadata.EntryPoint]:
    """``entry_points`` in the order their names are settled: bundled ones first, then the
    others by ``sys.path`` folder (earlier first), distribution name and entry-point name.

    importlib lists distributions in ``sys.path`` order, but within one folder in
    whatever order the file system lists them; sorting by name makes the winner of
    a clash the same on every machine.
    """
    folders: dict[str, int] = {}
    for ep in entry_points:
        folders.setdefault(_folder(ep), len(folders))

    def key(ep: metadata.EntryPoint) -> tuple[bool, int, str, str]:
        dist = _canonical(_described(ep.dist)[0]) if ep.dist is not None else ""
        return (not is_bundled(ep), folders[_folder(ep)], dist, ep.name)

    return sorted(entry_points, key=key)


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
            with timing.phase("plugin discovery"):
                _cache = discover_plugins()
        return _cache


def get_backend(name: str) -> Backend:
    """The installed backend called ``name``.

    Raises :class:`hetero.errors.UnknownBackendError` with a did-you-mean, the
    available backends, and the broken or disabled plugins that may explain why.
    """
    return load_plugins().get(name)


def load_in_process(
    ep: metadata.EntryPoint, record: PluginRecord
) -> tuple[PluginRecord, dict[str, Backend]]:
    """Import, register, call and validate one plugin here; a broken record on any failure.

    The import runs in this process and cannot be interrupted: a plugin whose
    import never returns blocks the caller (see :mod:`hetero.core.plugin.isolated`).
    """

    def broken(error: str, exc: BaseException | None = None) -> tuple[PluginRecord, dict[str, Backend]]:
        trace = "".join(traceback.format_exception(exc)) if exc is not None else ""
        return replace(record, error=error, traceback=trace), {}

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
        if backend.name in names:
            problems.append(f"backend {backend.name!r} is provided twice by this plugin")
        names.add(backend.name)
    if problems:
        return broken("; ".join(problems))
    # Validation passed, so every hook is in the current form or in one hetero adapts.
    changes = {b.name: review_hooks(b).changes for b in provided}
    notes = tuple((name, deprecation_message(name, found)) for name, found in changes.items() if found)
    return (replace(record, backends=tuple(changes), adapted=notes),
            {b.name: adapted(b, changes[b.name]) for b in provided})


def _plugin_name_clash(name: str, holder: PluginRecord) -> str:
    if holder.bundled:
        return (
            f"plugin name {name!r} belongs to plugin {holder.label}, which is bundled with "
            "hetero and keeps its name; rename this entry point"
        )
    return (
        f"plugin name {name!r} is already declared by {holder.label}; "
        "one of the two distributions must rename its entry point"
    )


def _backend_name_clashes(
    record: PluginRecord, offered: Mapping[str, object],
    provided_by: Mapping[str, PluginRecord], reserved: Mapping[str, PluginRecord],
) -> list[str]:
    """Why ``record``'s backends cannot have their names, one sentence per name."""
    clashes = []
    for name in offered:
        # The prefix of the first two sentences is what the conformance suite looks for.
        holder = provided_by.get(name)
        if holder is not None and holder.bundled:
            clashes.append(
                f"backend {name!r} is already provided by plugin {holder.label}, which is "
                "bundled with hetero and keeps its name; rename this backend"
            )
        elif holder is not None:
            clashes.append(
                f"backend {name!r} is already provided by plugin {holder.label}, which comes "
                "first (from an earlier sys.path folder, or by distribution name); rename one "
                f"of the two, or set {DENY_ENV}={holder.name} to use this one"
            )
        elif name in reserved and not record.bundled:
            clashes.append(
                f"backend {name!r} is the name of plugin {reserved[name].label}, which is "
                "bundled with hetero and keeps its name even when it is not loaded; "
                "rename this backend"
            )
    return clashes


def _record(ep: metadata.EntryPoint) -> PluginRecord:
    """The record of ``ep`` before it is loaded: where it comes from."""
    name, version = _described(ep.dist) if ep.dist is not None else ("", "")
    distribution = name or "unknown distribution"
    version = version or "?"
    return PluginRecord(ep.name, ep.value, distribution, version, bundled=is_bundled(ep))


@functools.lru_cache(maxsize=None)
def _described(dist: metadata.Distribution) -> tuple[str, str]:
    """``dist``'s name and version ("" where missing), read once: each read of
    ``Distribution.name`` or ``.version`` parses its metadata file again."""
    meta = dist.metadata
    if meta is None:
        return "", ""
    return meta["Name"] or "", meta["Version"] or ""


def _folder(ep: metadata.EntryPoint) -> str:
    """The folder (a ``sys.path`` entry) ``ep``'s distribution was found in."""
    return str(ep.dist.locate_file("")) if ep.dist is not None else ""


def _canonical(name: str) -> str:
    """A distribution name as packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


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
