"""What ``hetero plugins`` shows: a text table for people, a JSON-ready dict for tools.

Both are rendered from a :class:`PluginListing`, plain data about each backend and
each plugin's record. :func:`listing_of` makes one from the plugins this process
loaded; :func:`hetero.core.plugin.isolated.isolated_listing` makes one from plugins
imported in child processes, so the same table shows either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hetero.core.memory.hierarchy import MemoryHierarchy, MemoryLevel
from hetero.core.plugin.backend import Backend
from hetero.core.plugin.manager import (
    ENTRY_POINT_GROUP, PluginRecord, PluginRecords, PluginSet, unknown_backend_message,
)
from hetero.core.plugin.target import plain_value
from hetero.errors import UnknownBackendError


def declarations(backend: Backend) -> dict[str, Any]:
    """A backend's declarations as JSON-ready data: name, version, device, whether it takes
    every op (can be the fallback), its compile options, ops, patterns, memory."""
    return {
        "name": backend.name,
        "version": backend.version,
        "device_kind": backend.device_kind,
        "takes_every_op": bool(backend.takes_every_op),
        "status": _status(backend),
        "options": [{"name": o.name, "help": o.help, "default": plain_value(o.default),
                     "types": [t.__name__ for t in o.types], "choices": [plain_value(c) for c in o.choices]}
                    for o in backend.options],
        "peak_gflops": float(backend.peak_gflops),
        "ops": sorted(backend.supported_ops),
        "patterns": [{"name": p.name, "pattern": repr(p.pattern)} for p in backend.patterns],
        "memory": [asdict(level) for level in backend.memory or ()],
    }


def _status(backend: Backend) -> str:
    try:
        status = backend.device_status()
    except Exception as exc:  # noqa: BLE001 - a plugin's bug, shown instead of its status
        return f"device_status() raised {type(exc).__name__}: {exc}"
    return status if isinstance(status, str) else repr(status)


@dataclass(frozen=True)
class PluginListing(PluginRecords):
    """Every available backend's declarations (:func:`declarations`) and every plugin's record.

    ``provided_by`` names the record of the plugin behind each backend.
    """

    backends: Mapping[str, Mapping[str, Any]]
    records: tuple[PluginRecord, ...]
    provided_by: Mapping[str, PluginRecord]
    selection_problems: tuple[str, ...] = ()

    def backend(self, name: str) -> dict[str, Any]:
        """Backend ``name`` as JSON-ready data, with the plugin and distribution it comes from.

        An unknown ``name`` raises UnknownBackendError with a did-you-mean.
        """
        if name not in self.backends:
            raise UnknownBackendError(
                unknown_backend_message(name, self.backends, self.records, self.selection_problems)
            )
        declared = dict(self.backends[name])
        record = self.provided_by[name]
        return {
            "name": name,
            "version": declared.pop("version"),
            "device_kind": declared.pop("device_kind"),
            "plugin": record.name,
            "distribution": record.distribution,
            "distribution_version": record.version,
            "bundled": record.bundled,
            **{k: v for k, v in declared.items() if k != "name"},
        }


def listing_of(plugins: PluginSet) -> PluginListing:
    """The listing of the plugins loaded in this process."""
    return PluginListing(
        {name: declarations(backend) for name, backend in plugins.backends.items()},
        plugins.records, plugins.provided_by, plugins.selection_problems,
    )


def describe_plugins(plugins: PluginSet | PluginListing) -> dict[str, Any]:
    """Every backend's declarations and every plugin's record, as JSON-ready data."""
    listing = _listing(plugins)
    records = [
        {
            "name": r.name,
            "target": r.target,
            "distribution": r.distribution,
            "version": r.version,
            "bundled": r.bundled,
            "status": r.status,
            "backends": list(r.backends),
            "error": r.error,
            "disabled_by": r.disabled_by,
            "traceback": r.traceback,
            "adapted": dict(r.adapted),
        }
        for r in listing.records
    ]
    return {
        "entry_point_group": ENTRY_POINT_GROUP,
        "backends": [listing.backend(name) for name in listing.backends],
        "plugins": records,
        "selection_problems": list(listing.selection_problems),
    }


def format_plugins(plugins: PluginSet | PluginListing) -> str:
    """The text form: a table of backends, then the plugins that run adapted from plugin
    API 1, the broken and the disabled ones."""
    listing = _listing(plugins)
    if not listing.records and not listing.selection_problems:
        return (
            "No hetero plugins are installed.\n"
            f"Backends come from packages that declare the {ENTRY_POINT_GROUP!r} entry point "
            "(see hetero.core.plugin.hookspecs)."
        )
    lines: list[str] = []
    if listing.backends:
        rows = [("backend", "version", "distribution", "device", "ops", "memory")]
        for name in listing.backends:
            backend = listing.backend(name)
            memory = _memory(backend)
            rows.append((
                name,
                backend["version"],
                f"{backend['distribution']} {backend['distribution_version']}",
                backend["device_kind"],
                str(len(backend["ops"])),
                memory.summary() if memory is not None else "-",
            ))
        lines.append(f"Backends ({len(rows) - 1}):")
        lines += ["  " + line for line in _table(rows)]
        statuses = [(name, listing.backends[name].get("status")) for name in listing.backends]
        if any(status for _, status in statuses):
            lines.append("")
            lines.append("On this machine:")
            lines += [f"  {name}: {status}" for name, status in statuses if status]
    else:
        lines.append("No backends are available.")
    if listing.adapted:
        lines.append("")
        lines.append(f"Adapted from plugin API 1 ({len(listing.adapted)}), to update:")
        lines += [f"  {r.label}: {message}" for r in listing.adapted for _, message in r.adapted]
    if listing.broken:
        lines.append("")
        lines.append(f"Broken plugins ({len(listing.broken)}), skipped:")
        lines += [f"  {r.label}: {r.error}" for r in listing.broken]
    if listing.disabled:
        lines.append("")
        lines.append(f"Disabled plugins ({len(listing.disabled)}):")
        lines += [f"  {r.label}: disabled by {r.disabled_by}" for r in listing.disabled]
    if listing.selection_problems:
        lines.append("")
        lines.append("Plugin selection:")
        lines += [f"  {problem}" for problem in listing.selection_problems]
    return "\n".join(lines)


def format_backend(plugins: PluginSet | PluginListing, name: str) -> str:
    """One backend in detail: where it comes from, its ops, patterns and memory hierarchy.

    An unknown ``name`` raises UnknownBackendError with a did-you-mean.
    """
    listing = _listing(plugins)
    backend = listing.backend(name)
    ops = backend["ops"]
    record = listing.provided_by[name]
    lines = [
        f"backend       {name} {backend['version']} ({backend['device_kind']})",
        f"plugin        {record.label}",
        *[f"adapted       {message}" for backend_name, message in record.adapted if backend_name == name],
        f"peak          {backend['peak_gflops']:g} GFLOP/s",
        *([f"here          {backend['status']}"] if backend.get("status") else []),
        f"ops ({len(ops)})".ljust(14) + ("every canonical op (it can be the fallback)"
                                         if backend.get("takes_every_op") else ", ".join(ops)),
    ]
    if backend.get("options"):
        lines.append("options (hetero.compile keywords)")
        for o in backend["options"]:
            kinds = " or ".join(o["types"]) or "any"
            also = f", one of {o['choices']}" if o["choices"] else ""
            default = f", default {o['default']!r}" if o["default"] is not None else ""
            lines.append(f"  {o['name']} ({kinds}{also}{default}): {o['help']}")
    if backend["patterns"]:
        lines.append("patterns")
        lines += [f"  {p['name']}: {p['pattern']}" for p in backend["patterns"]]
    memory = _memory(backend)
    if memory is not None:
        lines.append("memory")
        lines += ["  " + line for line in str(memory).splitlines()]
    return "\n".join(lines)


def _listing(plugins: PluginSet | PluginListing) -> PluginListing:
    return plugins if isinstance(plugins, PluginListing) else listing_of(plugins)


def _memory(backend: Mapping[str, Any]) -> MemoryHierarchy | None:
    levels = backend["memory"]
    return MemoryHierarchy([MemoryLevel(**level) for level in levels]) if levels else None


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
